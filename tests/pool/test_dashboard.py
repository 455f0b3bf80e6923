"""Dashboard truth: the Grafana panels that show per-node data query metrics the scorer actors
emit (on their own nodes), not the broker's (which sits on one node), and best_value is shown per
cell (objective, k) with the tags the broker sets."""

import ast
import json
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DASHBOARD = json.loads((ROOT / "cluster" / "grafana" / "ghostsearch-dashboard.json").read_text())


def emitted_by(cls_name: str) -> dict[str, set[str]]:
    """metric name -> tag keys, for every ray.util.metrics object created in class ``cls_name``."""
    tree = ast.parse((ROOT / "ghostsearch" / "pool" / "actors.py").read_text())
    cls = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == cls_name)
    out = {}
    for call in ast.walk(cls):
        if isinstance(call, ast.Call) and getattr(call.func, "attr", "") in ("Counter", "Gauge", "Histogram"):
            tags = next((kw.value for kw in call.keywords if kw.arg == "tag_keys"), None)
            out[call.args[0].value] = {e.value for e in tags.elts} if tags is not None else set()
    return out


def queries(title_pattern: str) -> list[str]:
    return [
        t["expr"] for p in DASHBOARD["panels"] if re.search(title_pattern, p["title"]) for t in p.get("targets", [])
    ]


def test_per_node_panels_use_scorer_metrics():
    scorer = emitted_by("ScorerActor")
    node_exprs = [e for e in queries(r"by node") if "ray_ghostsearch_" in e]
    assert len(node_exprs) >= 2
    for e in node_exprs:
        (name,) = re.findall(r"ray_(ghostsearch_\w+?)(?:_total|_bucket|_sum|_count)?\{", e)
        assert name in scorer, f"per-node panel queries {name}, not emitted by the scorer actors"


def test_best_value_per_cell():
    tags = emitted_by("Broker")["ghostsearch_best_value"]
    (expr,) = queries(r"^Best value")
    by = set(re.search(r"by \(([^)]*)\)", expr).group(1).replace(" ", "").split(","))
    assert {"cell", "objective", "k"} <= by <= tags
