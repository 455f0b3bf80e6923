"""How well cbo's quadratic surrogate ranks sets it has not seen, fitted to the value or to its log.

Reads every full-fidelity set a matched bench scored for one (objective, k) (all searchers' run
directories under --runs), holds out a quarter of the k-sets, fits ``cbo.fit`` to the rest on the
value and on log(value), and prints the held-out Spearman and the value of the predicted best
held-out set over the true best, over 20 random splits:

  python bench/cbo_surrogate.py --runs runs/bench-16x32 --k 6
"""
from __future__ import annotations

import argparse
import glob

import benchenv  # noqa: F401

import numpy as np
from scipy.stats import spearmanr

from ghostsearch.rundir.ledger import read_ledger
from ghostsearch.search.cbo import fit


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", required=True)
    ap.add_argument("--k", type=int, default=6)
    ap.add_argument("--objective", default="perplexity")
    ap.add_argument("--splits", type=int, default=20)
    args = ap.parse_args()
    vals = {}
    for d in sorted(glob.glob(f"{args.runs}/*-{args.objective}-k{args.k}-s*")):
        for r in read_ledger(d).to_pylist():
            if r["fidelity"] >= 1.0 and not r["partial"]:
                vals[tuple(sorted(r["removed"]))] = r["value"]
    if not vals:
        raise SystemExit(f"no {args.objective} k={args.k} run directories under {args.runs}")
    free = sorted({b for s in vals for b in s})
    pos = {b: i for i, b in enumerate(free)}
    sets = list(vals)
    X = np.zeros((len(sets), len(free)))
    for i, s in enumerate(sets):
        X[i, [pos[b] for b in s]] = 1
    y = np.array([vals[s] for s in sets])
    size = np.array([len(s) for s in sets])
    print(f"{len(sets)} sets scored, {(size == args.k).sum()} of size {args.k}")
    scales = [("value", lambda v: v)] + ([("log(value)", np.log)] if (y > 0).all() else [])
    for name, f in scales:
        rng, rhos, ratio = np.random.default_rng(0), [], []
        for _ in range(args.splits):
            test = rng.permutation(np.flatnonzero(size == args.k))[: max(10, (size == args.k).sum() // 4)]
            train = np.setdiff1d(np.arange(len(sets)), test)
            m = fit(X[train], f(y[train]))
            e = m.c + X[test] @ m.a + np.einsum("ni,ij,nj->n", X[test], np.triu(m.B, 1), X[test])
            rhos.append(spearmanr(e, y[test])[0])
            ratio.append(y[test][np.argmin(e)] / y[test].min())
        print(f"fitted to {name:10s}: held-out Spearman {np.mean(rhos):.3f} +- {np.std(rhos):.3f}; "
              f"predicted best / true best {np.mean(ratio):.4f}")


if __name__ == "__main__":
    main()
