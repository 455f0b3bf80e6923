"""``ghostsearch eval TARGET``: downstream evaluation (perplexities, lm-eval zero-shot) of pruned models.

TARGET is one of
* a run directory (config.yaml + result.json): every cell's best removed set, one row each;
* a model directory written by ``ghostsearch export`` (evaluated as it is; the calibration data its
  recovery.json records, the repair's and the search's, are held out like a run's);
* a CONFIG file with ``--remove 3,4,5`` ('' = the dense model).
The work is ghostsearch.study.eval (source, check, evaluate); this module parses and prints. Every
removed set of a run or config is evaluated in one pass over the dense prefix cache
(``evaluate.evaluate_finalist_specs``). Prints one JSON line per row; writes the rows to
RUN_DIR/eval.parquet or ``--out``, the per-item predictions beside them (``<out>_items.parquet``)
and lm-eval's results files under ``lm_eval/`` there.
"""

from __future__ import annotations

from pathlib import Path

from ghostsearch.cli.common import parse_remove, positive_int, print_json
from ghostsearch.recovery import RECOVERY


def add(sub) -> None:
    sp = sub.add_parser("eval", help="downstream perplexity and zero-shot accuracy of pruned models")
    sp.add_argument("target", help="RUN_DIR, an exported model directory, or a CONFIG (with --remove)")
    sp.add_argument("overrides", nargs="*", help="key=value overrides, e.g. eval.ppl_max_seq=8")
    sp.add_argument("--remove", default=None, help="with a CONFIG: comma-separated block indices ('' = dense)")
    sp.add_argument(
        "--limit", type=positive_int, default=None, help="documents per task / LAMBADA passages (eval.limit)"
    )
    sp.add_argument("--tasks", default=None, help="comma-separated zero-shot tasks ('' = none; default eval.tasks)")
    sp.add_argument("--recovery", default="none", choices=RECOVERY.names(), help="repair before evaluating")
    sp.add_argument("--out", default=None, help="Parquet file (default: RUN_DIR/eval.parquet; none otherwise)")
    sp.add_argument(
        "--json", action="store_true", help="print one JSON line per row (the Parquet's rows) instead of the table"
    )


def run(args) -> None:
    from ghostsearch.study.eval import check, evaluate, source

    removed = parse_remove(args.remove) if args.remove is not None else None
    cfg, jobs, default_out = source(Path(args.target), args.overrides, removed, args.recovery)
    if args.limit is not None:
        cfg.eval.limit = args.limit
    if args.tasks is not None:
        cfg.eval.tasks = [t.strip() for t in args.tasks.split(",") if t.strip()]
    out = Path(args.out) if args.out else default_out
    check(cfg, jobs, out, not args.out, args.recovery)  # every input error before the model loads
    outcome = evaluate(cfg, jobs, Path(args.target), args.recovery, out, on_row=print_json if args.json else None)
    if not args.json:
        print(outcome.table(), flush=True)
