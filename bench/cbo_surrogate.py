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
from ghostsearch.search.cbo import fit, fitted_scale


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
    of_k = np.flatnonzero([len(s) == args.k for s in sets])
    gates = np.array([[pos[b] for b in sets[i]] for i in of_k])  # Quadratic.energy takes gate positions
    print(f"{len(sets)} sets scored, {len(of_k)} of size {args.k}")
    for transform in ("none", "auto"):  # cbo's own scales: the value as it is, and its log while all are > 0
        rng, rhos, ratio = np.random.default_rng(0), [], []
        for _ in range(args.splits):
            held = rng.permutation(len(of_k))[: max(10, len(of_k) // 4)]
            train = np.setdiff1d(np.arange(len(sets)), of_k[held])
            e = fit(X[train], fitted_scale(y[train], transform)).energy(gates[held])
            truth = y[of_k[held]]
            rhos.append(spearmanr(e, truth)[0])
            ratio.append(truth[np.argmin(e)] / truth.min())
        name = {"none": "value", "auto": "log(value)" if (y > 0).all() else "value (auto)"}[transform]
        print(
            f"fitted to {name:10s}: held-out Spearman {np.mean(rhos):.3f} +- {np.std(rhos):.3f}; "
            f"predicted best / true best {np.mean(ratio):.4f}"
        )


if __name__ == "__main__":
    main()
