"""Adaptive evaluation (eval.looks) against the fixed design, on SmolLM2 finalists, same draw, same run.

  python bench/adaptive.py --design three [--threads 2]      # the pre-registered design (below)
  python bench/adaptive.py --design eight                    # the first design (2026-12-01, targets missed)
  python bench/adaptive.py --pilot OUT --seed 5 --tasks arc_easy,piqa,hellaswag --pilot-items 300
  python bench/adaptive.py --replay docs/results/bench-adaptive --looks ... --spending ...

The designs (``DESIGNS``: models, contrasts, tasks, looks, spending rule, margin and draw seed, each
fixed and committed before its run) and the run live in ghostsearch/study/adaptive.py. Each run:
1. adaptive: compare.evaluate_finalists with eval.looks and the contrasts;
2. fixed: the same run directory copied and extended to the last look for every model (the
   per-item rows resume, so the fixed design costs only what adaptive did not evaluate); its
   verdicts on all items: differs by stats.paired_test + stats.holm at 0.05, within margin when the
   1 - 0.05 / m interval lies inside +-margin, else open.
Prints items per model and in all, the ratio adaptive / fixed, each contrast's verdict and look,
whether both designs reach the same verdicts, CPU seconds of each phase; writes OUT/bench.json.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import benchenv  # noqa: F401  (repository on sys.path, offline HF, ../shared/data)

from ghostsearch.study.adaptive import DESIGNS, pilot, replay, run_design


def say(line: str) -> None:
    print(line, flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--design", choices=list(DESIGNS), default="three", help="the fixed design to run")
    ap.add_argument("--looks", default="300,600,900,1200", help="--replay: items per model at each look")
    ap.add_argument("--spending", default="pocock", choices=["pocock", "obrien-fleming"], help="--replay's rule")
    ap.add_argument("--margin", type=float, default=0.04, help="--replay: eval.margin (0: none)")
    ap.add_argument("--seed", type=int, default=5, help="--pilot: eval.seed, the draw")
    ap.add_argument("--tasks", default=None, help="--pilot: eval.tasks (default: the eight commonsense tasks)")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--out", default=None, help="the run's directory (default: the design's, under docs/results)")
    ap.add_argument(
        "--replay",
        metavar="OUT",
        help="no evaluation: replay the design (--looks, --spending, "
        "--margin) on the per-item rows of an earlier run's fixed design (OUT/fixed)",
    )
    ap.add_argument(
        "--pilot",
        metavar="OUT",
        help="no design: evaluate --pilot-models on --pilot-items items per "
        "model (a fixed draw, --seed, --tasks) and print every pair's paired mean difference and "
        "variance, to choose and size a design before fixing it",
    )
    ap.add_argument("--pilot-models", default="dense,greedy,greedy+ghosted,greedy+replaceme,greedy+linearpatch")
    ap.add_argument("--pilot-items", type=int, default=300)
    args = ap.parse_args()
    if args.pilot:
        threads(args.threads)
        pilot(Path(args.pilot), args.pilot_models.split(","), args.pilot_items, args.seed, args.tasks, say)
        return
    if args.replay:
        replay(Path(args.replay), [int(x) for x in args.looks.split(",")], args.spending, args.margin or None)
        return

    threads(args.threads)
    run_design(args.design, Path(args.out or DESIGNS[args.design]["out"]), say)


def threads(n: int) -> None:
    import torch

    from ghostsearch.core.logs import quiet_libraries

    quiet_libraries()
    torch.set_num_threads(n)


if __name__ == "__main__":
    main()
