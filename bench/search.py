"""Searchers on SmolLM2, k = 6 of 30, perplexity, fixed calibration, one shared pool:
each searcher's best value against evaluations and wall seconds, and how many full-fidelity
evaluations ga, bo and cbo need to reach greedy's best value (greedy itself uses ~165).

  python bench/search.py [--out runs/bench-search] [--n-seq 8 --seq-len 128]   # runs the searches
  python bench/search.py --from-run runs/study-smollm2 --k 6                    # reads a compare's ledger
"""
from __future__ import annotations

import argparse
import math
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from ghostsearch.rundir.ledger import read_ledger  # noqa: E402

SEARCHERS = ["oneshot", "greedy", "beam", "ga", "bo", "cbo", "fastblock", "lorp"]


def curves(run_dir, objective: str, k: int) -> dict[str, dict]:
    """Per searcher (first seed): full-fidelity evaluations used, best value, and evaluations / seconds to
    each improvement; computed from the ledger rows in time order."""
    rows = [r for r in read_ledger(run_dir).to_pylist() if r["objective"] == objective]
    out = {}
    for cell in sorted({r["cell"] for r in rows}):
        rs = sorted((r for r in rows if r["cell"] == cell), key=lambda r: r["time"])
        if not rs or rs[0]["k"] is None or f"-k{k}-" not in cell:
            continue
        name = cell.split("-")[0]
        if name in out:
            continue
        t0, used, best, trace = rs[0]["time"], 0.0, math.inf, []
        for r in rs:
            used += r["fidelity"]
            if r["fidelity"] >= 1.0 and len(r["removed"]) == k and r["value"] < best:
                best = r["value"]
                trace.append((used, r["time"] - t0, best))
        out[name] = {"used": used, "best": best, "trace": trace, "seconds": rs[-1]["time"] - t0}
    return out


def evals_to_reach(trace, target, rel=1e-9):
    for used, sec, best in trace:
        if best <= target + rel * abs(target):  # lower is better; the margin objective is negative
            return used, sec
    return None, None


def report(run_dir, objective="perplexity", k=6):
    cs = curves(run_dir, objective, k)
    if "greedy" not in cs:
        raise SystemExit(f"no greedy cell for {objective} k={k} in {run_dir}")
    g = cs["greedy"]
    print(f"{objective}, k={k}; greedy best {g['best']:.4f} after {g['used']:.0f} evaluations")
    print(f"{'searcher':10s} {'best':>10s} {'evals used':>10s} {'wall s':>8s} {'evals to greedy':>16s} {'ratio':>7s}")
    for name in SEARCHERS:
        if name not in cs:
            continue
        c = cs[name]
        used, sec = evals_to_reach(c["trace"], g["best"])
        ratio = f"{used / g['used']:.2f}x" if used else "-"
        print(f"{name:10s} {c['best']:10.4f} {c['used']:10.1f} {c['seconds']:8.1f} "
              f"{(f'{used:.1f}' if used else 'not reached'):>16s} {ratio:>7s}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--from-run", default=None)
    ap.add_argument("--out", default="runs/bench-search")
    ap.add_argument("--k", type=int, default=6)
    ap.add_argument("--objective", default="perplexity")
    ap.add_argument("--n-seq", type=int, default=8)
    ap.add_argument("--seq-len", type=int, default=128)
    args = ap.parse_args()
    if args.from_run:
        report(args.from_run, args.objective, args.k)
        return
    from ghostsearch.compare import grid, run_cells
    from ghostsearch.config import load_config
    from ghostsearch.pool.pool import connect, start_pool
    from ghostsearch.models import model_depth
    from ghostsearch.rundir import open_run_dir

    import ray

    cfg = load_config(None, [f"k={args.k}", f"objective={args.objective}", f"out={args.out}",
                             f"calibration.n_seq={args.n_seq}", f"calibration.seq_len={args.seq_len}",
                             "search.protected=[0,-1]", f"compare.searchers=[{','.join(SEARCHERS)}]",
                             "pool.actors=2", "pool.threads=1", "pool.dashboard=false"])
    run_dir = open_run_dir(cfg, "bench-search")
    connect(None, dashboard=False)
    try:
        run_cells(cfg, start_pool(cfg), run_dir, grid(cfg), model_depth(cfg.model))
    finally:
        ray.shutdown()
    report(run_dir, args.objective, args.k)


if __name__ == "__main__":
    main()
