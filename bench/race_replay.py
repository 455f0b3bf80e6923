"""Racing replayed on exact greedy's path (issue 27): where a race's evaluations go, at no model cost.

  # 1. score: walk exact greedy's path, every candidate of every step on every calibration row (the model)
  nice -n 10 python bench/race_replay.py --score --k 8 --n-seq 64 --seq-len 64 --threads 1
  # 2. replay: races with the real racing code (ghostsearch.search.racing) on the stored rows (no model)
  python bench/race_replay.py --k 6                     # the default RaceParams, per step
  python bench/race_replay.py --k 6 --race '{min_rows: 8, growth: 1.5}'
  python bench/race_replay.py --k 6 --sweep             # a grid of policies, k = 6 only

``--score`` uses the same configuration as ``bench/search.py --matched --n-seq N --seq-len T``
(``calibration.n_seq``, ``calibration.seq_len``, ``search.protected=[0,-1]``, the configured model and
objective, perplexity), one in-process Scorer, and writes one Parquet file per greedy step to
``--dir`` (default docs/results/bench-race-64/): per candidate R ∪ {j} (R the exact step's prefix):
the per-row loss sums in calibration-row order (the objective's ``row_losses``), the per-row counts,
and the full value. Each step's winner is the exact greedy's choice (best value, ties: the smaller
set), so steps 1..k of the files are exact greedy's path; a killed run resumes at the first missing
step. The exact greedy's cost is the number of candidates (each at fidelity 1).

The replay feeds those rows to ``racing.run_race`` through an in-memory ``RowEvaluator`` (the rows a
look asks, in the race order), so every decision is the library's own: per step, the evaluations
used (fidelity n/N per candidate), the winner and whether it equals the exact step's winner, and
where the evaluations went (per look: survivors; per candidate: rows seen). The floor of a step is
1 (its winner at full fidelity) plus the first look for every other candidate. The replay and its
analyses, and the scoring (``score_path``), are ``ghostsearch.study.race_replay``; this script is the command line.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

import benchenv  # noqa: F401  (the repository on sys.path, offline HF, ../shared/data as the data directory)

from ghostsearch.search import RaceParams
from ghostsearch.study.race_replay import (
    bound_check,
    correlation,
    decompose,
    describe,
    live,
    load_steps,
    parse_race,
    replay,
    score_path,
    spending,
    sweep,
)

DIR = Path(__file__).resolve().parents[1] / "docs" / "results" / "bench-race-64"


def score(args) -> None:
    os.environ.setdefault("OMP_NUM_THREADS", str(args.threads))
    import torch

    from ghostsearch.config import load_config

    torch.set_num_threads(args.threads)
    over = [f"calibration.n_seq={args.n_seq}", f"calibration.seq_len={args.seq_len}", "search.protected=[0,-1]"]
    cfg = load_config(None, [*over, f"objective={args.objective}"])
    score_path(cfg, args.dir, args.k, args.objective, args.threads)


SWEEP = [{"min_rows": m, "growth": g} for m in (2, 3, 4, 6, 8, 12, 16) for g in (1.25, 1.5, 2.0, 3.0)]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--score", action="store_true", help="walk exact greedy's path with the model (slow)")
    ap.add_argument("--k", type=int, default=6)
    ap.add_argument("--n-seq", type=int, default=64)
    ap.add_argument("--seq-len", type=int, default=64)
    ap.add_argument("--objective", default="perplexity")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--dir", type=Path, default=DIR)
    ap.add_argument("--race", default=None, help="a race mapping in YAML, e.g. '{min_rows: 8}' (default: RaceParams())")
    ap.add_argument("--sweep", action="store_true", help="replay a grid of policies (totals only)")
    ap.add_argument(
        "--decompose", action="store_true", help="the cost of each part of the bound (default and --race policies)"
    )
    ap.add_argument(
        "--spending", action="store_true", help="alpha spent unevenly over the looks (default and --race policies)"
    )
    ap.add_argument(
        "--correlation", action="store_true", help="the union bound with the rivals' correlation known (an oracle)"
    )
    ap.add_argument("--bound", action="store_true", help="the false-drop simulation with the default and --race")
    ap.add_argument(
        "--live", default=None, help="a live raced greedy run directory (or its saved ledger .parquet): vs the replay"
    )
    ap.add_argument("--save-live", default=None, help="--live: write the run's ledger to this .parquet file")
    args = ap.parse_args()
    if args.score:
        score(args)
        return
    if args.bound:
        bound_check([RaceParams()] + ([parse_race(args.race)] if args.race else []))
        return
    steps = load_steps(args.dir, args.k)
    if args.sweep:
        sweep(steps, SWEEP)
        return
    p = parse_race(args.race)
    if args.correlation:
        correlation(steps, [RaceParams()] + ([p] if args.race else []))
        return
    if args.spending:
        spending(steps, [RaceParams()] + ([p] if args.race else []))
        return
    if args.decompose:
        decompose(steps, [RaceParams()] + ([p] if args.race else []))
        return
    if args.live:
        live(args.live, steps, p, args.save_live)
        return
    print(f"replay, k={args.k}, {describe(p)}, {len(steps[0][0]['row_losses'])} rows")
    r = replay(steps, p)
    print(
        f"raced {r['used']:.3f} of exact greedy's {r['exact']:.0f} evaluations ({r['ratio']:.3f}x); floor "
        f"{r['floor']:.2f} ({r['floor'] / r['exact']:.3f}x); ideal {r['ideal']:.2f} ({r['ideal'] / r['exact']:.3f}x); "
        f"near-ties (rivals within 1/3 sd of the winner) cost {r['near']:.2f}; "
        f"every step's winner = exact's: {r['same']}"
    )


if __name__ == "__main__":
    main()
