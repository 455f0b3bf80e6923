"""``ghostsearch eval TARGET``: downstream evaluation (perplexities, lm-eval zero-shot) of pruned models.

TARGET is one of
* a run directory (config.yaml + result.json): every cell's best removed set, one row each;
* a model directory written by ``ghostsearch export`` (evaluated as it is; the calibration data its
  recovery.json records, the repair's and the search's, are held out like a run's);
* a CONFIG file with ``--remove 3,4,5`` ('' = the dense model).
Every removed set of a run or config is evaluated in one pass over the dense prefix cache
(``evaluate.evaluate_finalist_specs``). Prints one JSON line per row; writes the rows to
RUN_DIR/eval.parquet or ``--out``, the per-item predictions beside them (``<out>_items.parquet``)
and lm-eval's results files under ``lm_eval/`` there.
"""

from __future__ import annotations

from pathlib import Path

from ghostsearch.cli.common import parse_remove, positive_int, print_json
from ghostsearch.errors import GhostsearchError
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
    from ghostsearch.io import check_output, check_writable

    if jobs is not None:
        from ghostsearch.config import check_model_fit
        from ghostsearch.stack import check_removed

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


def export_data(directory: Path) -> dict | None:
    """What an export's recovery.json records of the data its repair and search read (None when
    it records nothing)."""
    import json

    from ghostsearch.recovery.base import META_FILE

    meta = directory / META_FILE
    if not meta.exists():  # a model directory ghostsearch did not write: evaluated as it is
        return None
    try:
        return json.loads(meta.read_text()).get("data")
    except (ValueError, AttributeError):
        raise GhostsearchError(f"{meta} is not a JSON object; re-export the model") from None


def run(args) -> None:
    from ghostsearch import lmeval_results
    from ghostsearch.evaluate import check_tasks, evaluate_model, write_rows
    from ghostsearch.logs import progress_enabled
    from ghostsearch.models import load_configured, resolve_dtype

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
    from ghostsearch.dataplan import announce, export_plan, plan

    if jobs is not None:  # a run's (or config's) calibration data is held out of what is evaluated
        data_plan = plan(cfg, [cfg.objective], evaluate=True, repair=args.recovery != "none")
    else:  # an export: the data its recovery.json says the repair (and the search) read
        data_plan = export_plan(cfg, export_data(Path(args.target)))
    announce(data_plan)
    held_out = data_plan.held_out
    out = Path(args.out) if args.out else out
    rows: list[dict] = []
    raw: dict = {}  # raw: lm-eval's own output, written beside the rows as lm-eval's results file
    lm_dir = out.parent / "lm_eval" if out is not None else None
    if jobs is None:
        from ghostsearch.recovery.export import load_pruned, load_tokenizer

        device = cfg.resolved_device()
        model = load_pruned(args.target, dtype=resolve_dtype(cfg.dtype, device), device=device)
        rows.append(
            {
                "model": str(args.target),
                "held_out": ",".join(held_out),
                **evaluate_model(
                    model, load_tokenizer(args.target), cfg.eval, cfg.data_dir, held_out=held_out, raw=raw
                ).to_dict(),
            }
        )
        if lm_dir is not None:
            lmeval_results.write(lm_dir, raw, Path(args.target).name)
        print_json(rows[-1])
    else:  # every removed set in one pass over the dense prefix cache (evaluate_finalist_specs)
        from ghostsearch.compare import finalist_numbers
        from ghostsearch.evaluate import evaluate_finalist_specs
        from ghostsearch.evaluation_native import write_item_rows
        from ghostsearch.stack import Stack, check_removed

        model, tok = load_configured(cfg)
        n_blocks = Stack(model).n_blocks
        sets = [list(check_removed(removed, n_blocks)) for _, removed, _ in jobs]
        specs = list(dict.fromkeys((tuple(r), args.recovery) for r in sets))  # each distinct set once
        results, items = evaluate_finalist_specs(
            model, tok, cfg, [(list(r), m) for r, m in specs], held_out, progress=progress_enabled()
        )
        by_set = {r: res for (r, _), res in zip(specs, results)}
        for (cell, _, value), removed in zip(jobs, sets):
            res = finalist_numbers(cfg, lm_dir, removed, args.recovery, by_set[tuple(removed)])
            rows.append(
                {
                    "cell": cell,
                    "removed": removed,
                    "value": value,
                    "recovery": args.recovery,
                    "held_out": ",".join(held_out),
                    **res.to_dict(),
                }
            )
            print_json(rows[-1])
        if out is not None:  # per-item predictions beside the rows, to audit which items a cut changed
            write_item_rows(items, out.with_name(out.stem + "_items.parquet"))
    if out is not None:
        write_rows(rows, out)
