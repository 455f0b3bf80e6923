"""The report written from real data: the pilot study's committed k=8 models and their per-item
predictions (docs/results/study-cpu), with two pre-registered contrasts. report.html is parsed:
its tables are real tables (every <tr> inside a <table>), the contrasts come first, the summary
restates only computed verdicts, and the plots exist."""

from __future__ import annotations

import math
from html.parser import HTMLParser
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from ghostsearch.config import load_config
from ghostsearch.stats.contrasts import ContrastPair
from ghostsearch.study.report import to_html, write_report

ROOT = Path(__file__).resolve().parents[2]
RUN = ROOT / "docs" / "results" / "study-cpu"


class Tables(HTMLParser):
    """Counts tables, rows, and rows found outside any table."""

    def __init__(self):
        super().__init__()
        self.depth, self.tables, self.rows, self.stray, self.cells, self.headings = 0, 0, 0, 0, 0, []
        self._h = None

    def handle_starttag(self, tag, attrs):
        if tag == "table":
            self.depth += 1
            self.tables += 1
        elif tag == "tr":
            self.rows += 1
            self.stray += self.depth == 0
        elif tag in ("td", "th"):
            self.cells += 1
        elif tag == "h2":
            self._h = ""

    def handle_endtag(self, tag):
        if tag == "table":
            self.depth -= 1
        elif tag == "h2":
            self.headings.append(self._h)
            self._h = None

    def handle_data(self, data):
        if self._h is not None:
            self._h += data


def test_markdown_tables_become_html_tables():
    md = "# t\n\n## a\n\n| x | y |\n|---|---|\n| 1 | a\\|b |\n\ntext <b>raw</b>\n\n![p](plots/p.png)\n"
    page = to_html(md)
    p = Tables()
    p.feed(page)
    assert (p.tables, p.rows, p.stray, p.cells) == (1, 2, 0, 4)
    assert "a|b" in page and "&lt;b&gt;" in page and '<img src="plots/p.png" alt="p"' in page


@pytest.mark.skipif(not (RUN / "eval_items.parquet").exists(), reason="no committed study run")
def test_report_on_the_pilots_k8_models(tmp_path):
    table = pq.read_table(RUN / "comparison.parquet")
    table = table.filter(pc.is_in(table.column("k"), pa.array([0, 8])))
    items = pq.read_table(RUN / "eval_items.parquet", columns=["key", "task", "doc", "gold", "pred"])
    items = items.filter(pc.is_in(items.column("key"), table.column("eval_key")))
    pq.write_table(items, tmp_path / "eval_items.parquet")
    rows = table.to_pylist()
    key = {(r["searcher"], r["objective"], r["recovery"]): r["eval_key"] for r in rows if r.get("seed") in (0, None)}
    contrasts = [
        ContrastPair(
            "ghosted - none | searcher=fastblock, objective=perplexity, k=8",
            key[("fastblock", "perplexity", "ghosted")],
            key[("fastblock", "perplexity", "none")],
            "fastblock/perplexity/ghosted",
            "fastblock/perplexity/none",
        ),
        ContrastPair(
            "lorp - shortgpt | objective=perplexity, k=8",
            key[("lorp", "perplexity", "none")],
            key[("shortgpt", "perplexity", "none")],
            "lorp",
            "shortgpt",
        ),
    ]
    cfg = load_config(RUN / "config.yaml", [f"out={tmp_path}"])
    sim = np.eye(30) * 0.5 + 0.5  # the pool's block similarity (not part of the committed run)
    write_report(tmp_path, table, {"similarity": sim}, cfg, contrasts=contrasts)
    md = (tmp_path / "report.md").read_text()
    p = Tables()
    p.feed((tmp_path / "report.html").read_text())
    assert p.stray == 0 and p.tables >= 5 and p.rows > 60
    assert p.headings[:2] == [
        "Models (one per removed set x repair; the dense model first)",
        "Quality against speed-up",
    ]
    assert p.headings[2].startswith("Pre-registered contrasts") and p.headings[3] == "Summary"
    models = md.split("## Models")[1].split("\n## ")[0]
    assert models.index("| dense |") < models.index("| k=8 |") < models.index("| k=8 + ghosted |")
    assert (
        "ppl wikitext2" in models
        and "29.98 |" in models
        and " x4." in models
        and "134.5M" in models
        and "not measured" in models
    )
    assert (tmp_path / "plots" / "pareto.png").stat().st_size > 1000
    verdicts = md.split("## Verdicts")[1].split("\n## ")[0]
    assert "more claim rows cannot be decided here" in verdicts and "What would decide them" in verdicts
    assert "| no verdict |" not in verdicts and "| not computed |" not in verdicts
    assert md.index("ghosted - none \\| searcher=fastblock") < md.index("## Summary")
    summary = md.split("## Summary")[1].split("##")[0]
    assert "distinct evaluated models (removed set x repair)" in summary and "one family" in summary
    assert "highest" not in summary and "agrees with" not in summary  # no ranking by hand
    verdict_table = md.split("## Verdicts")[1].split("\n## ")[0]
    assert "| ghosted - none \\| searcher=fastblock, objective=perplexity, k=8 |" in verdict_table
    assert "p (Holm-adjusted)" in verdict_table
    for name in ("patterns", "convergence", "similarity", "accuracy", "spearman"):
        assert (tmp_path / "plots" / f"{name}.png").stat().st_size > 1000
    assert "minus dense [95%]" in md  # the paired accuracy table
    # issue 47: the floor and each model's majority answers, computed from the same per-item rows
    floor = md.split("## Answer bias and the floor (descriptive)")[1].split("\n## ")[0]
    assert "each task's most common gold option" in floor and "\n| dense | " in floor
    assert "Models at or below the floor (macro): " in floor and "One answer to every item of a task: " in floor


def test_an_adaptive_runs_contrasts_come_from_its_looks():
    from ghostsearch.stats.looks import ContrastRow
    from ghostsearch.study.report.render import verdict_rows

    def row(contrast, decided, look, items, estimate, z, level, bound, sign):
        return ContrastRow(
            contrast=contrast,
            left_key="a",
            right_key="b",
            decided=decided,
            verdict="differs" if decided else "open",
            decided_at_look=look,
            look_items=items,
            estimate=estimate,
            z=z,
            se=0.02,
            level=level,
            bound=bound,
            sign=sign,
            z_by_look=[z],
            margin=None,
            rci=[math.nan, math.nan],
            rci_level=None,
            items_left=items,
            items_right=items,
        )

    looks = [
        row("ghosted - none | k=8", True, 1, 600, 0.11, 6.1, 0.025, 5.38, 1),
        row("lorp - shortgpt | k=8", False, None, 2400, -0.01, -0.7, 0.05, 2.0, 0),
    ]
    got = verdict_rows([], None, looks=looks)
    assert [(r.claim, r.verdict) for r in got] == [
        ("ghosted - none | k=8", "holds"),
        ("lorp - shortgpt | k=8", "within noise"),
    ]
    assert "decided at look 1 (600 items per model)" in got[0].note and got[0].p_adj is None
    assert "undecided after 2400 items" in got[1].note
