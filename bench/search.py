"""Searchers on SmolLM2, k = 6 of 30, perplexity, fixed calibration, one shared pool:
each searcher's best value against evaluations and wall seconds, and how many full-fidelity
evaluations ga, bo and cbo need to reach greedy's best value (greedy itself: 153 at k = 6 and 196
at k = 8 on SmolLM2, 28 free blocks).

  python bench/search.py [--out runs/bench-search] [--n-seq 8 --seq-len 128]   # runs the searches
  python bench/search.py --from-run runs/study-smollm2 --k 6                    # reads a compare's ledger
  python bench/search.py --matched --objectives perplexity,margin --ks 6,8 --seeds 0,1 --n-seq 8 --seq-len 256
  python bench/search.py --table runs/bench-search/matched.jsonl        # the docs' table, reach from the histories
  python bench/search.py --table docs/results/bench-race-64/matched.jsonl --into docs/benchmarks.md  # kept current
  python bench/search.py --plot runs/bench-search/matched.jsonl --plot-out matched.png

``--matched`` (issue 14): in one invocation, on one pool, per objective, k and seed: exact greedy, raced
greedy (race: true), beam (width 2), and ga, bo, cbo given exactly greedy's cost as their budget
(racing on, their default); prints each one's best value, budget used, the budget at which it first
reached exact greedy's value (<= 1.0001x, lower is better) and wall seconds; each cell's result and
best-value history is appended to <out>/matched.jsonl, which ``--plot`` draws. A rerun with the same
``--out`` and calibration size skips the cells matched.jsonl holds (resumable over sessions).
Every search runs in fp32 on any CPU: reach is judged at 1.0001x, and a bf16 value on a CPU with
native bf16 moves by up to 1.3% with the thread count alone (bench/dtype.py); the committed
tables are fp32 (AVX2-only machines, where `dtype: auto` is fp32). What decides (the cases from the
registry's traits, reach, the resume rule, the table, the curves) is ``ghostsearch.study.matched``;
this script is its command line.
"""

from __future__ import annotations

import argparse

import benchenv  # noqa: F401  (the repository on sys.path, offline HF, ../shared/data as the data directory)

from ghostsearch.study import matched as m


def matched(args: argparse.Namespace) -> list[m.Row]:
    """--matched: every chosen case on each (objective, k, seed), one pool (``matched.run``)."""
    return m.run(
        args.out,
        n_seq=args.n_seq,
        seq_len=args.seq_len,
        objectives=args.objectives.split(","),
        ks=[int(k) for k in args.ks.split(",")],
        seeds=[int(s) for s in args.seeds.split(",")],
        actors=args.actors,
        searchers=args.searchers.split(",") if args.searchers else None,
        greedy_value=args.greedy_value,
        overrides=getattr(args, "overrides", []),
    )


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--matched", action="store_true")
    ap.add_argument("overrides", nargs="*", help="--matched: key=value config overrides, e.g. model=DIR")
    ap.add_argument("--objectives", default="perplexity")
    ap.add_argument("--ks", default="6")
    ap.add_argument("--seeds", default="0")
    ap.add_argument("--actors", type=int, default=2)
    ap.add_argument("--searchers", default=None, help="--matched: a comma list of " + ",".join(m.labels()))
    ap.add_argument(
        "--greedy-value",
        type=float,
        default=None,
        help="--matched without greedy: exact greedy's best value, the target to reach",
    )
    ap.add_argument("--from-run", default=None)
    ap.add_argument("--out", default="runs/bench-search")
    ap.add_argument("--k", type=int, default=6)
    ap.add_argument("--objective", default="perplexity")
    ap.add_argument("--n-seq", type=int, default=8)
    ap.add_argument("--seq-len", type=int, default=128)
    ap.add_argument("--plot", default=None, help="comma list of matched.jsonl files: draw their curves to --plot-out")
    ap.add_argument("--plot-out", default="matched.png")
    ap.add_argument("--table", default=None, help="comma list of matched.jsonl files: print their markdown table")
    ap.add_argument("--into", default=None, help="--table: replace that table in this markdown file")
    args = ap.parse_args()
    if args.into and not args.table:
        raise SystemExit("--into needs --table (the matched.jsonl files whose table it replaces)")
    if args.table:
        lines = m.table(args.table.split(","))
        print(m.into(args.into, lines) if args.into else "\n".join(lines))
    elif args.plot:
        m.plot(args.plot.split(","), args.plot_out)
        print(f"wrote {args.plot_out}")
    elif args.from_run:
        print("\n".join(m.reach_report(args.from_run, args.objective, args.k)))
    elif args.matched:
        matched(args)
    else:
        run_dir = m.run_every_searcher(
            args.out, k=args.k, objective=args.objective, n_seq=args.n_seq, seq_len=args.seq_len
        )
        print("\n".join(m.reach_report(run_dir, args.objective, args.k)))


if __name__ == "__main__":
    main()
