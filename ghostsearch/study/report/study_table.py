"""The study's tables and verdicts from a compare run directory, as Markdown for docs/results.md
(bench/study_table.py prints them): per recovery and objective a line per searcher (:func:`tables`),
then every claim of the search paper and the LoRP comparisons as ONE family, Holm-adjusted at 0.05
(:func:`study_report`); while a compare still runs, its finished cells (:func:`partial_report`)."""

from __future__ import annotations

import math
import os
from collections import defaultdict

import numpy as np
import pyarrow.parquet as pq

from ghostsearch.core.comparison_row import ComparisonRow, from_arrow
from ghostsearch.stats.bootstrap import ItemMatrix
from ghostsearch.study.claims.base import RULE, family, finalists, jaccard, method_comparison, render
from ghostsearch.study.claims.search_paper import all_claims

LORP_PAPER = "LoRP beats ShortGPT / LLM-Streamline without repair (Qwen3-8B, 7 of 36 blocks: 56.65 vs 51.50 % mean acc)"


def fmt(v, p=3):
    return "–" if v is None or (isinstance(v, float) and math.isnan(v)) else f"{v:.{p}f}"


def mean(rs: list[ComparisonRow], key: str):
    v = [x for r in rs if (x := r.column(key)) is not None and not math.isnan(x)]
    return float(np.mean(v)) if v else None


def tables(rows: list[ComparisonRow]) -> str:
    """Per recovery and objective: one line per searcher, calib / ppl WT2 / mean acc per k (means over seeds)."""
    rows = finalists(rows)
    ks = sorted({r.k for r in rows})
    searchers = list(dict.fromkeys(r.searcher for r in rows))
    out = []
    for rec in sorted({r.rec for r in rows}, key=str):
        for obj in sorted({r.objective for r in rows}, key=str):
            out += [
                f"\n### recovery {rec}, objective {obj}\n",
                "| searcher | "
                + " | ".join(f"k={k} calib | k={k} ppl WT2 | k={k} mean acc (seeds)" for k in ks)
                + " |",
                "|---|" + "---|---|---|" * len(ks),
            ]
            for s in searchers:
                cells = []
                for k in ks:
                    g = [r for r in rows if r.rec == rec and r.objective == obj and r.searcher == s and r.k == k]
                    cells += (
                        [
                            fmt(mean(g, "calib_value")),
                            fmt(mean(g, "ppl_wikitext2"), 1),
                            f"{fmt(mean(g, 'mean_acc'))} ({len(g)})",
                        ]
                        if g
                        else ["–"] * 3
                    )
                if any(c != "–" for c in cells):
                    out.append(f"| {s} | " + " | ".join(cells) + " |")
    out.append(
        "\n(means over seeds, seed count in parentheses; calib = the objective's value on calibration "
        "data, lower is better)"
    )
    return "\n".join(out)


def study_report(run_dir: str) -> str:
    """The study's tables and its verdicts, one family (what bench/study_table.py RUN_DIR prints)."""
    out: list[str] = []
    rows = from_arrow(pq.read_table(os.path.join(run_dir, "comparison.parquet")))
    matrix = ItemMatrix.read(os.path.join(run_dir, "eval_items.parquet"))
    dense = [r for r in rows if r.is_dense]
    if dense:
        d = dense[0]
        out.append(f"dense: ppl WT2 {fmt(d.metric('ppl_wikitext2'), 1)}, mean acc {fmt(d.metric('mean_acc'))}")
    out.append(tables(rows))
    out.append("\n## Claims\n")
    if matrix is None:
        out.append("(no RUN_DIR/eval_items.parquet: the per-item claims are not computed)\n")
    else:
        out.append(f"({len(matrix.keys)} evaluated models x {matrix.n_items} items on {len(matrix.tasks)} tasks)\n")
    main_rows = all_claims(rows, matrix)
    lorp, lines = method_comparison(rows, matrix, "lorp", ["shortgpt", "streamline"], LORP_PAPER)  # the LoRP paper's
    decided = family(main_rows + lorp)  # one family: every tested row of the run
    main_rows, lorp = decided[: len(main_rows)], decided[len(main_rows) :]
    n = sum(r.p_adj is not None for r in decided)
    out.append(f"One family of {n} tested rows (this table and the LoRP table below), Holm at 0.05.\n")
    out.append(render(main_rows))
    if lorp:
        out.append("\n### LoRP vs ShortGPT vs Streamline, unrepaired\n")
        out.append(render(lorp))
        out.append("\n" + "\n".join(f"- {x}" for x in lines))
    out.append("\n" + RULE)
    return "\n".join(out)


def partial_report(run_dir: str) -> str:
    """While a compare is still searching: the finished cells (and their downstream numbers when
    evaluated) and how similar the removed sets are within an objective vs between objectives."""
    out: list[str] = []
    import glob
    import json

    from ghostsearch.config import load_config
    from ghostsearch.study.compare import eval_key

    cfg = load_config(os.path.join(run_dir, "config.yaml"))

    def load(path):
        with open(path) as f:
            return json.load(f)

    cells = [load(f) for f in sorted(glob.glob(os.path.join(run_dir, "cells", "*.json")))]
    out.append(f"{len(cells)} finished cells\n")
    out.append(
        "| cell | removed | calib value | evaluations | cache hits | ppl WT2 (repaired) | mean acc |\n"
        "|---|---|---|---|---|---|---|"
    )
    for c in sorted(cells, key=lambda c: (c["objective"], c["k"], c["searcher"], c["seed"])):
        f = os.path.join(run_dir, "evals", eval_key(c["removed"], cfg.recovery.method, cfg) + ".json")
        e = load(f) if os.path.exists(f) else {}
        out.append(
            f"| {c['cell']} | {c['removed']} | {c['value']:.4g} | {c['evaluations']} | {c['cache_hits']} | "
            f"{fmt(e.get('ppl_wikitext2'), 1)} | {fmt(e.get('mean_acc'))} |"
        )
    by_k = defaultdict(list)
    for c in cells:
        by_k[c["k"]].append(c)
    for k, g in sorted(by_k.items()):
        within: list[float] = []
        between: list[float] = []
        for i, a in enumerate(g):
            for b in g[i + 1 :]:
                if a["searcher"] == b["searcher"] and a["seed"] != b["seed"]:
                    continue
                (within if a["objective"] == b["objective"] else between).append(jaccard(a["removed"], b["removed"]))
        if within and between:
            out.append(
                f"\nk={k}: mean Jaccard of removed sets, same objective {np.mean(within):.2f} (n={len(within)}), "
                f"different objectives {np.mean(between):.2f} (n={len(between)})"
            )
    return "\n".join(out)
