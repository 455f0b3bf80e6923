"""``ghostsearch eval TARGET``: downstream evaluation (perplexities, lm-eval zero-shot) of pruned models.

TARGET is one of
* a run directory (config.yaml + result.json): every cell's best removed set, one row each;
* a model directory written by ``ghostsearch export`` (evaluated as it is; the calibration data its
  recovery.json records, the repair's and the search's, are held out like a run's);
* a CONFIG file with ``--remove 3,4,5`` ('' = the dense model).
The work is ghostsearch.study.eval; this module parses and prints. Every removed set of a run or
config is evaluated in one pass over the dense prefix cache
(``evaluate.evaluate_finalist_specs``). Prints one JSON line per row; writes the rows to
RUN_DIR/eval.parquet or ``--out``, the per-item predictions beside them (``<out>_items.parquet``)
and lm-eval's results files under ``lm_eval/`` there.
"""

from __future__ import annotations

from pathlib import Path

from ghostsearch.cli.common import parse_remove, positive_int, print_json
from ghostsearch.core.errors import GhostsearchError
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


def target(args):
    """(config, [(cell, removed, value)] or None for an exported model, default Parquet path)."""
    from ghostsearch.config import load_config
    from ghostsearch.rundir import cells, run_config

    t = Path(args.target)
    if (t / "result.json").exists():
        if args.remove is not None:
            raise GhostsearchError(f"{t} is a run directory; it gives the removed sets, drop --remove")
        import torch

        from ghostsearch.rundir import scoring_settings

        # the search's dtype and scorer thread count (one rule with recover and export)
        cfg, threads = scoring_settings(t, run_config(t, args.overrides))
        if threads:
            torch.set_num_threads(threads)
        return cfg, cells(t), t / "eval.parquet"
    if (t / "config.json").exists():
        if args.remove is not None or args.recovery != "none":
            raise GhostsearchError(f"{t} is an exported model (already pruned and repaired); drop --remove/--recovery")
        if not (t / "tokenizer_config.json").exists():
            raise GhostsearchError(f"{t} has no tokenizer; export it with its tokenizer (export(..., tokenizer=tok))")
        return load_config(None, args.overrides), None, None
    if t.is_file():
        if args.remove is None:
            raise GhostsearchError(f"eval {t} needs --remove BLOCKS (e.g. --remove 3,4,5; '' = dense)")
        return load_config(str(t), args.overrides), [("remove", parse_remove(args.remove), None)], None
    raise GhostsearchError(
        f"{t} is neither a run directory (result.json), an exported model directory (config.json) nor a config file"
    )


def check_outputs(args, cfg, jobs, default_out) -> None:
    """Before the data plan and the model: the removed sets against the model's depth (read from its
    config, no weights), and every file eval writes (rows, per-item rows, lm-eval's results) against
    the run's own files and other programs' files, on a writable disk."""
    from ghostsearch.core.io import check_output, check_writable

    if jobs is not None:
        from ghostsearch.config import check_model_fit
        from ghostsearch.model.stack import check_removed

        n_blocks = check_model_fit(cfg)  # the model's config only, no weights
        for _, removed, _ in jobs:
            check_removed(removed, n_blocks)
    out = Path(args.out) if args.out else default_out
    if out is None:
        return
    own = ("eval.parquet", "eval_items.parquet", "lm_eval") if args.out is None else ()
    for path in (out, out.with_name(out.stem + "_items.parquet")):
        check_output(path, "eval --out" if args.out else "eval:", ours=_our_parquet, own=own)
    check_writable(
        out.parent,
        "eval: the output directory",
        "make it writable, or give --out a path elsewhere (checked now: the rows are written after all the work)",
    )


def _our_parquet(path: Path) -> bool:
    """A Parquet file eval wrote before (rows with a ``held_out`` column, or per-item rows)."""
    import pyarrow.parquet as pq

    try:
        names = pq.read_schema(path).names
    except Exception:  # noqa: BLE001  (not Parquet at all: not ours)
        return False
    return "held_out" in names or {"task", "doc"} <= set(names)


def run(args) -> None:
    from ghostsearch.evaluation.evaluate import check_tasks
    from ghostsearch.study.eval import evaluate

    cfg, jobs, out = target(args)
    if args.limit is not None:
        cfg.eval.limit = args.limit
    if args.tasks is not None:
        cfg.eval.tasks = [t.strip() for t in args.tasks.split(",") if t.strip()]
    check_tasks(cfg.eval.tasks, cfg.data_dir)  # every input error before the model loads
    if not cfg.eval.tasks and not cfg.eval.perplexity:
        raise GhostsearchError(
            "nothing to evaluate: no zero-shot tasks (--tasks '') and no perplexity corpora (eval.perplexity=[]); "
            "give --tasks or eval.perplexity"
        )
    check_outputs(args, cfg, jobs, out)
    if args.recovery != "none" and jobs is not None:
        from ghostsearch.config import check_repairs

        check_repairs(cfg, "--recovery", [args.recovery])  # before the data and the model
    out = Path(args.out) if args.out else out
    outcome = evaluate(cfg, jobs, Path(args.target), args.recovery, out, on_row=print_json if args.json else None)
    if not args.json:
        print(outcome.table(), flush=True)
