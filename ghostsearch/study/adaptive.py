"""What adaptive evaluation (``stats.looks``) is compared with, decided from per-item rows: the fixed
design's verdicts on every item (:func:`fixed_verdicts`), a design replayed exactly on a fixed
run's rows (:func:`replay`: every look is a prefix of the run's draw, so it is the adaptive run
without the forward passes), and a pilot's paired differences (:func:`pair_differences`).
bench/adaptive.py runs the SmolLM2 designs and prints these."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq

from ghostsearch.core.eval_numbers import read_item_rows
from ghostsearch.stats import inference as stats
from ghostsearch.stats.looks import Contrast, Design


def correct_by_key(path: Path) -> dict[str, dict]:
    """{eval key: {item: 1.0 or 0.0}} of an eval_items.parquet file."""
    corr: dict[str, dict] = {}
    for r in read_item_rows(path):
        corr.setdefault(str(r.key), {})[r.item] = float(r.correct)
    return corr


def fixed_verdicts(corr: dict[str, dict], contrasts: list[Contrast], margin: float | None):
    """The fixed design's verdict of each contrast on every item the models share: (verdict, the
    paired test, its Holm-adjusted p); "differs" when the Holm p is at most 0.05, "within margin"
    when the 1 - 0.05 / m interval lies inside +-margin, else "open"."""
    items = sorted(next(iter(corr.values())))
    tests = [
        stats.paired_test(
            [corr[c.left_key][i] for i in items], [corr[c.right_key][i] for i in items], [t for t, _ in items]
        )
        for c in contrasts
    ]
    adj = stats.holm([t.p for t in tests])
    zc = stats.z_of_level(1 - stats.ALPHA / len(contrasts))
    out = []
    for t, p in zip(tests, adj):
        fv = (
            "differs"
            if p <= stats.ALPHA
            else "within margin"
            if margin and abs(t.estimate) + zc * t.se < margin
            else "open"
        )
        out.append((fv, t, p))
    return out


def pair_differences(corr: dict[str, dict], keys: dict[str, str], names: list[str], items) -> list[dict]:
    """Every pair of named models' paired difference on ``items``: mean, per-item variance, z."""
    rows = []
    for a, b in itertools.combinations(names, 2):
        d = np.array([corr[keys[a]][i] - corr[keys[b]][i] for i in items])
        z = d.mean() / np.sqrt(d.var(ddof=1) / len(d)) if d.var() > 0 else float("nan")
        rows.append({"left": a, "right": b, "mean": float(d.mean()), "var": float(d.var(ddof=1)), "z": float(z)})
    return rows


def replay(out: Path, looks: list[int], spending: str, margin: float | None) -> dict:
    """What an adaptive run with this design would have evaluated and decided, replayed exactly on
    the fixed design's per-item rows: a model's predictions do not depend on which other items are
    evaluated, and every look is a prefix of the run's draw, so the replay is the run without the
    forward passes (its items are OUT/fixed/items.parquet's order). Prints and returns the summary."""

    info = json.loads((out / "bench.json").read_text())
    order = [
        (r["task"], r["doc"])
        for r in sorted(pq.read_table(out / "fixed" / "items.parquet").to_pylist(), key=lambda r: r["rank"])
    ]
    looked = json.loads((out / "adaptive" / "looks.json").read_text())
    names = {v: n for n, v in info.get("keys", {}).items()}
    correct = correct_by_key(out / "fixed" / "eval_items.parquet")
    n_max = min(len(v) for v in correct.values())
    if looks[-1] > n_max:
        raise SystemExit(f"--looks ends at {looks[-1]} items but the fixed design has {n_max} per model")
    contrasts = [Contrast(c["contrast"], c["left_key"], c["right_key"]) for c in looked["contrasts"]]
    d = Design(looks, contrasts, spending=spending, margin=margin)
    used = {k: 0 for k in correct}
    for j, n in enumerate(looks):
        for k in correct if j == 0 else d.open_keys():
            used[k] = n
        d.test(j, correct, order[:n])
        if d.finished():
            break
    rows = [r.to_dict() for r in d.table(used, j + 1)]
    total, fixed = sum(used.values()), looks[-1] * len(correct)
    print(
        f"replay of {out}/fixed: looks {looks}, {spending}, margin {margin}: {total} items of the fixed "
        f"design's {fixed} (ratio {total / fixed:.2f}); items per model "
        f"{ {names.get(k, k[:6]): v for k, v in used.items()} }"
    )
    by_name = {c["contrast"]: c for c in info["contrasts"]}
    same = True
    for r in rows:
        f = by_name.get(r["contrast"], {})
        agree = r["verdict"] == f.get("fixed") if looks[-1] == info["looks"][-1] else None
        same = same and bool(agree) if agree is not None else same
        print(
            f"  {r['contrast']:36s} {r['verdict']} at look {r['decided_at_look']} (estimate {r['estimate']:+.3f}, "
            f"z {r['z']:.2f}); fixed design: {f.get('fixed')}"
        )
    return {
        "looks": looks,
        "spending": spending,
        "margin": margin,
        "items": total,
        "fixed": fixed,
        "ratio": total / fixed,
        "contrasts": rows,
        "same_verdicts": same,
    }
