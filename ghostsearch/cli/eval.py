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
    from ghostsearch.core import lmeval_results
    from ghostsearch.core.logs import progress_enabled
    from ghostsearch.evaluation.evaluate import check_tasks, evaluate_model, write_rows
    from ghostsearch.model.models import load_configured, resolve_dtype

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
    from ghostsearch.rundir.dataplan import announce, export_plan, plan

    repairs = repairs_of(args, jobs)
    if args.recovery != "none" and jobs is not None:
        from ghostsearch.config import check_repairs

        check_repairs(cfg, "--recovery", [args.recovery])  # before the data and the model
    if jobs is not None:  # a run's (or config's) calibration data is held out of what is evaluated
        data_plan = plan(cfg, [cfg.objective], evaluate=True, repair=bool(repairs))
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
        if args.json:
            print_json(rows[-1])
        else:
            print_export_row(rows[-1])
    else:  # every removed set in one pass over the dense prefix cache (evaluate_finalist_specs)
        from ghostsearch.evaluation.evaluate import evaluate_finalist_specs
        from ghostsearch.evaluation.native import write_item_rows
        from ghostsearch.model.stack import Stack, check_removed
        from ghostsearch.study.compare import finalist_numbers

        model, tok = load_configured(cfg)
        n_blocks = Stack(model).n_blocks
        sets = [list(check_removed(removed, n_blocks)) for _, removed, _ in jobs]
        # the dense model, each distinct set without repair, and every repair (--recovery, recover's)
        specs = list(
            dict.fromkeys(
                [((), "none")]
                + [(tuple(r), "none") for r in sets]
                + [(tuple(r), m) for r in sets for m in repairs.get(tuple(r), [])]
            )
        )
        results, items = evaluate_finalist_specs(
            model, tok, cfg, [(list(r), m) for r, m in specs], held_out, progress=progress_enabled()
        )
        by_spec = {spec: res for spec, res in zip(specs, results)}
        fitted = fitted_on(data_plan)
        jobs_all: list[tuple] = ([] if any(not r for r in sets) else [("dense", [], None)]) + [
            (cell, removed, value) for (cell, _, value), removed in zip(jobs, sets)
        ]
        for cell, removed, value in jobs_all:
            for method in ["none"] + repairs.get(tuple(removed), []) if removed else ["none"]:
                res = finalist_numbers(cfg, lm_dir, removed, method, by_spec[(tuple(removed), method)])
                rows.append(
                    {
                        "cell": cell,
                        "removed": removed,
                        "value": value,
                        "recovery": method,
                        "held_out": ",".join(held_out),
                        **res.to_dict(),
                    }
                )
                if args.json:
                    print_json(rows[-1])
        if not args.json:
            print(models_table(rows, items, fitted, model, cfg.data_dir), flush=True)
        if out is not None:  # per-item predictions beside the rows, to audit which items a cut changed
            write_item_rows(items, out.with_name(out.stem + "_items.parquet"))
    if out is not None:
        write_rows(rows, out)


def repairs_of(args, jobs) -> dict[tuple[int, ...], list[str]]:
    """{removed set: repair methods} to evaluate beside the unrepaired model: ``--recovery`` for
    every set, and in a run directory every repair ``recover`` fitted (RUN_DIR/recovery.parquet)."""
    if jobs is None:
        return {}
    from ghostsearch.cli.speed import recovered_methods

    out: dict[tuple[int, ...], list[str]] = {}
    sets = [tuple(sorted(r)) for _, r, _ in jobs]
    for r in sets:
        if r and args.recovery != "none":
            out.setdefault(r, []).append(args.recovery)
    t = Path(args.target)
    if (t / "result.json").exists():
        for r, m in recovered_methods(t):
            if r in sets and m not in out.get(r, []):
                out.setdefault(r, []).append(m)
    return out


def fitted_on(data_plan) -> dict[str, str]:
    """{"search": dataset, "repair": dataset} the models were fitted on (the data plan's calibrations)."""
    out = {}
    for c in data_plan.calibration:
        out["repair" if c.role == "calibration:repair" else "search"] = c.used
    return out


def held_out_text(removed, method: str, fitted: dict[str, str]) -> str:
    """What this model was fitted on, held out of the evaluation: the data plan (``dataplan.plan``)
    checked before any work that no evaluated item or window is in it (a corpus both fitted on and
    evaluated is read in disjoint halves), so the answer is yes by construction."""
    if not removed and method == "none":
        return "nothing fitted"
    used = [("search", fitted.get("search"))] + ([("repair", fitted.get("repair"))] if method != "none" else [])
    return "yes: " + ", ".join(f"{ds} ({role})" for role, ds in used if ds)


def models_table(rows: list[dict], items, fitted: dict[str, str], model, data_dir=None) -> str:
    """The printed table: dense, each set without repair, each repair, side by side, every number with
    its difference from dense and a paired interval (ghostsearch.study.report.models)."""
    from ghostsearch.model.stack import Stack
    from ghostsearch.recovery.speed import cost_operators, pruned_params
    from ghostsearch.study.claims import ItemMatrix
    from ghostsearch.study.report.models import ModelEntry, model_rows, text_table

    n_blocks, hidden = Stack(model).n_blocks, int(model.config.hidden_size)

    def key(removed, method) -> str:
        return f"{','.join(map(str, sorted(removed)))}|{method}"

    matrix = None
    if items:
        matrix = ItemMatrix.from_columns(
            [key(i.removed, i.recovery or "none") for i in items],
            [i.task for i in items],
            [i.doc for i in items],
            [float(i.correct) for i in items],
        )
    entries, seen = [], set()
    for r in rows:
        k = key(r["removed"], r["recovery"])
        if k in seen:
            continue
        seen.add(k)
        numbers = {n: v for n, v in r.items() if n not in ("cell", "removed", "value", "recovery", "held_out")}
        entries.append(
            ModelEntry(
                tuple(r["removed"]),
                r["recovery"],
                numbers,
                k,
                held_out_text(r["removed"], r["recovery"], fitted),
                params=pruned_params(
                    model, r["removed"], cost_operators(r["recovery"], r["removed"], n_blocks, hidden)
                ),
            )
        )
    return text_table(model_rows(entries, matrix), speed=False)


def print_export_row(row: dict) -> None:
    """An export's numbers as a one-row table (its base model is not here to compare with)."""
    from ghostsearch.study.report.models import ModelEntry, model_rows, text_table

    numbers = {n: v for n, v in row.items() if n not in ("model", "held_out")}
    name = Path(row["model"]).name
    entry = ModelEntry((), "export", numbers, name, held_out=f"held out: {row['held_out'] or 'nothing'}", label=name)
    print(text_table(model_rows([entry]), speed=False), flush=True)
