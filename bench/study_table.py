"""Print the study's table from a compare run directory (Markdown, for docs/results.md).

  python bench/study_table.py runs/study-smollm2-mini             # after the compare finished
  python bench/study_table.py runs/study-smollm2-mini --partial   # finished cells so far
"""
from __future__ import annotations

import math
import os
import sys
from collections import defaultdict

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

import numpy as np  # noqa: E402
import pyarrow.parquet as pq  # noqa: E402

from ghostsearch.report import correlations, spread, summary  # noqa: E402


def jaccard(a, b) -> float:
    a, b = set(a), set(b)
    return len(a & b) / len(a | b)


def fmt(v, p=3):
    return "–" if v is None or (isinstance(v, float) and math.isnan(v)) else f"{v:.{p}f}"


def main(run_dir: str):
    rows = pq.read_table(os.path.join(run_dir, "comparison.parquet")).to_pylist()
    objs = sorted({r["objective"] for r in rows})
    ks = sorted({r["k"] for r in rows})
    searchers = list(dict.fromkeys(r["searcher"] for r in rows))
    for obj in objs:
        print(f"\n### objective: {obj}\n")
        head = "| searcher | " + " | ".join(f"k={k} calib | k={k} ppl WT2 | k={k} mean acc" for k in ks) + " |"
        print(head)
        print("|---|" + "---|---|---|" * len(ks))
        for s in searchers:
            cells = []
            for k in ks:
                g = [r for r in rows if r["objective"] == obj and r["searcher"] == s and r["k"] == k]
                if not g:
                    cells += ["–"] * 3
                    continue
                cells += [fmt(np.mean([r["calib_value"] for r in g]), 3),
                          fmt(np.mean([r.get("ppl_wikitext2", math.nan) for r in g]), 1),
                          fmt(np.mean([r.get("mean_acc", math.nan) for r in g]), 3)]
            print(f"| {s} | " + " | ".join(cells) + " |")
    print("\n(values are means over seeds; calib = perplexity on C4 or -mean margin; lower is better)\n")
    tasks = sorted({c[:-4] for r in rows for c in r if c.endswith("_acc") and c not in ("mean_acc", "lambada_acc")})
    if tasks:
        print("Per-task accuracy (acc), mean over k and seeds:\n")
        print("| objective | searcher | " + " | ".join(tasks) + " | mean |")
        print("|---|---|" + "---|" * (len(tasks) + 1))
        for obj in objs:
            for s in searchers:
                g = [r for r in rows if r["objective"] == obj and r["searcher"] == s]
                vals = [fmt(np.mean([r.get(f"{t}_acc", math.nan) for r in g]), 3) for t in tasks]
                print(f"| {obj} | {s} | " + " | ".join(vals) + f" | {fmt(np.mean([r.get('mean_acc', math.nan) for r in g]), 3)} |")
        print()
    print("| objective | k | n | Spearman rho(calib, mean acc) |\n|---|---|---|---|")
    for c in correlations(rows):
        print(f"| {c['objective']} | {c['k']} | {c['n']} | {fmt(c['rho'], 2)} |")
    sp = spread(rows)
    print(f"\nSpread of mean accuracy: within objectives {sp['within']}, between objectives {fmt(sp['between'])}")
    print("\n" + "\n".join(f"- {s}" for s in summary(rows)))
    from ghostsearch.report import spearman

    print("\n| objective | k | rho(calib, WT2 ppl) | rho(WT2 ppl, mean acc) | mean WT2 ppl | mean acc |\n|---|---|---|---|---|---|")
    for obj in objs:
        for k in ks:
            g = [r for r in rows if r["objective"] == obj and r["k"] == k and r.get("ppl_wikitext2") is not None]
            if len(g) < 2:
                continue
            c, w, a = ([r[x] for r in g] for x in ("calib_value", "ppl_wikitext2", "mean_acc"))
            print(f"| {obj} | {k} | {fmt(spearman(c, w), 2)} | {fmt(spearman(w, a), 2)} | {fmt(np.mean(w), 1)} | "
                  f"{fmt(np.mean(a))} |")

    driven = [r for r in rows if r["searcher"] not in ("fastblock", "lorp")]  # they use the objective only to rescore
    for k in ks:
        g = [r for r in driven if r["k"] == k]
        pairs = [(a, b) for i, a in enumerate(g) for b in g[i + 1:]]
        same = [jaccard(a["removed"], b["removed"]) for a, b in pairs if a["objective"] == b["objective"]]
        diff = [jaccard(a["removed"], b["removed"]) for a, b in pairs if a["objective"] != b["objective"]]
        if same and diff:
            print(f"k={k}: mean Jaccard of removed sets (all searchers but fastblock, lorp): same objective "
                  f"{np.mean(same):.2f}, different objectives {np.mean(diff):.2f}")
    per = defaultdict(set)
    for r in rows:
        per[(r["objective"], r["k"])].add(tuple(r["removed"]))
    print("\nDistinct removed sets per (objective, k): " + ", ".join(f"{o} k={k}: {len(v)}" for (o, k), v in sorted(per.items())))


if __name__ == "__main__" and len(sys.argv) == 2:
    main(sys.argv[1])


def partial(run_dir: str):
    """While a compare is still searching: the finished cells (no downstream numbers yet) and how
    similar the removed sets are within an objective vs between objectives (mean Jaccard)."""
    import glob
    import json

    from ghostsearch.compare import eval_key
    from ghostsearch.config import load_config

    cfg = load_config(os.path.join(run_dir, "config.yaml"))
    cells = [json.load(open(f)) for f in sorted(glob.glob(os.path.join(run_dir, "cells", "*.json")))]
    print(f"{len(cells)} finished cells\n")
    print("| cell | removed | calib value | evaluations | cache hits | ppl WT2 (repaired) | mean acc |\n"
          "|---|---|---|---|---|---|---|")
    for c in sorted(cells, key=lambda c: (c["objective"], c["k"], c["searcher"], c["seed"])):
        f = os.path.join(run_dir, "evals", eval_key(c["removed"], cfg.recovery.method, cfg) + ".json")
        e = json.load(open(f)) if os.path.exists(f) else {}
        print(f"| {c['cell']} | {c['removed']} | {c['value']:.4g} | {c['evaluations']} | {c['cache_hits']} | "
              f"{fmt(e.get('ppl_wikitext2'), 1)} | {fmt(e.get('mean_acc'))} |")

    for k in sorted({c["k"] for c in cells}):
        g = [c for c in cells if c["k"] == k]
        within, between = [], []
        for i, a in enumerate(g):
            for b in g[i + 1:]:
                if a["searcher"] == b["searcher"] and a["seed"] != b["seed"]:
                    continue
                (within if a["objective"] == b["objective"] else between).append(jaccard(a["removed"], b["removed"]))
        if within and between:
            print(f"\nk={k}: mean Jaccard of removed sets, same objective {np.mean(within):.2f} (n={len(within)}), "
                  f"different objectives {np.mean(between):.2f} (n={len(between)})")


if __name__ == "__main__" and len(sys.argv) > 2 and sys.argv[2] == "--partial":
    partial(sys.argv[1])
