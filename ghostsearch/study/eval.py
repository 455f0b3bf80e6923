"""The work of ``ghostsearch eval`` (cli/eval.py parses its arguments and prints), in named steps:
what TARGET is and what it gives (:func:`source`), every refusal before the data and the model
(:func:`check`), then :func:`evaluate`: the data plan that holds out what the models were fitted
on, one pass over the dense prefix cache for every removed set and repair
(``evaluate.evaluate_finalist_specs``) or an exported model as it loads, the rows
(RUN_DIR/eval.parquet or ``--out``), the per-item predictions beside them and lm-eval's results
files under ``lm_eval/``; and the table of dense, each set and each repair side by side."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ghostsearch.config import Config
from ghostsearch.core.errors import GhostsearchError

# (cell, removed, value): a run's cells, or ("remove", removed, None) for a config with --remove
Job = tuple[str, Any, Any]


@dataclass
class EvalOutcome:
    """What ``evaluate`` produced: the rows (one per model), and for the table the per-item rows,
    the data each model was fitted on, and the loaded model (None for an export)."""

    rows: list[dict]
    items: list = field(default_factory=list)
    fitted: dict[str, str] = field(default_factory=dict)
    model: Any = None

    def table(self) -> str:
        if self.model is None:
            return export_table(self.rows[-1])
        return models_table(self.rows, self.items, self.fitted, self.model)


def source(target: Path, overrides: list[str], removed: list[int] | None, recovery: str):
    """What TARGET gives: (config, jobs, default rows file). A run directory (config.yaml +
    result.json): every cell's best removed set, under the search's dtype and scorer threads, rows to
    RUN_DIR/eval.parquet; an exported model directory: jobs None (evaluated as it is), no default
    file; a config file with ``removed`` (--remove; () the dense model): one job, no default file."""
    from ghostsearch.config import load_config
    from ghostsearch.rundir import cells, run_config

    if (target / "result.json").exists():
        if removed is not None:
            raise GhostsearchError(f"{target} is a run directory; it gives the removed sets, drop --remove")
        import torch

        from ghostsearch.rundir import scoring_settings

        # the search's dtype and scorer thread count (one rule with recover and export)
        cfg, threads = scoring_settings(target, run_config(target, overrides))
        if threads:
            torch.set_num_threads(threads)
        return cfg, cells(target), target / "eval.parquet"
    if (target / "config.json").exists():
        if removed is not None or recovery != "none":
            raise GhostsearchError(
                f"{target} is an exported model (already pruned and repaired); drop --remove/--recovery"
            )
        if not (target / "tokenizer_config.json").exists():
            raise GhostsearchError(
                f"{target} has no tokenizer; export it with its tokenizer (export(..., tokenizer=tok))"
            )
        return load_config(None, overrides), None, None
    if target.is_file():
        if removed is None:
            raise GhostsearchError(f"eval {target} needs --remove BLOCKS (e.g. --remove 3,4,5; '' = dense)")
        return load_config(str(target), overrides), [("remove", removed, None)], None
    raise GhostsearchError(
        f"{target} is neither a run directory (result.json), an exported model directory (config.json) nor a "
        "config file"
    )


def check(cfg: Config, jobs: list[Job] | None, out: Path | None, own_out: bool, recovery: str) -> None:
    """Every refusal before the data plan and the model: the tasks, something to evaluate, the
    removed sets against the model's depth (read from its config, no weights), every file eval writes
    (``out``: the rows, the per-item rows beside them, lm-eval's results) against the run's own files
    (``own_out``: out is the run directory's default) and other programs' files, on a writable disk;
    and ``recovery`` for a run's or config's sets."""
    from ghostsearch.core.io import check_output, check_writable
    from ghostsearch.evaluation.evaluate import check_tasks

    check_tasks(cfg.eval.tasks, cfg.data_dir)
    if not cfg.eval.tasks and not cfg.eval.perplexity:
        raise GhostsearchError(
            "nothing to evaluate: no zero-shot tasks (--tasks '') and no perplexity corpora (eval.perplexity=[]); "
            "give --tasks or eval.perplexity"
        )
    if jobs is not None:
        from ghostsearch.config import check_model_fit
        from ghostsearch.model.stack import check_removed

        n_blocks = check_model_fit(cfg)  # the model's config only, no weights
        for _, removed, _ in jobs:
            check_removed(removed, n_blocks)
    if out is not None:
        own = ("eval.parquet", "eval_items.parquet", "lm_eval") if own_out else ()
        for path in (out, out.with_name(out.stem + "_items.parquet")):
            check_output(path, "eval:" if own_out else "eval --out", ours=_our_parquet, own=own)
        check_writable(
            out.parent,
            "eval: the output directory",
            "make it writable, or give --out a path elsewhere (checked now: the rows are written after all the work)",
        )
    if recovery != "none" and jobs is not None:
        from ghostsearch.config import check_repairs

        check_repairs(cfg, "--recovery", [recovery])  # before the data and the model


def _our_parquet(path: Path) -> bool:
    """A Parquet file eval wrote before (rows with a ``held_out`` column, or per-item rows)."""
    import pyarrow.parquet as pq

    try:
        names = pq.read_schema(path).names
    except Exception:  # noqa: BLE001  (not Parquet at all: not ours)
        return False
    return "held_out" in names or {"task", "doc"} <= set(names)


def evaluate(
    cfg: Config,
    jobs: list[Job] | None,
    target: Path,
    recovery: str = "none",
    out: Path | None = None,
    on_row: Callable[[dict], None] | None = None,
) -> EvalOutcome:
    """Evaluate a run's (or a config's) removed sets, each with its repairs (``recovery`` and, in a
    run directory, every repair ``recover`` fitted), beside the dense model; or, with ``jobs`` None,
    the exported model directory ``target``. ``on_row`` sees each row as it is made. Writes the rows
    to ``out`` (when given), the per-item rows and lm-eval's results files beside it."""
    from ghostsearch.data.dataplan import announce, export_plan, plan
    from ghostsearch.evaluation.evaluate import write_rows

    repairs = repairs_of(target, recovery, jobs)
    if jobs is not None:  # a run's (or config's) calibration data is held out of what is evaluated
        data_plan = plan(cfg, [cfg.objective], evaluate=True, repair=bool(repairs))
    else:  # an export: the data its recovery.json says the repair (and the search) read
        data_plan = export_plan(cfg, export_data(target))
    cfg = cfg.evaluating(data_plan.perplexity)  # eval.perplexity as the data plan resolved it here
    announce(data_plan)
    lm_dir = out.parent / "lm_eval" if out is not None else None
    if jobs is None:
        outcome = _evaluate_export(cfg, target, data_plan.held_out, lm_dir)
        if on_row is not None:
            on_row(outcome.rows[-1])
    else:
        outcome = _evaluate_sets(cfg, jobs, repairs, data_plan, lm_dir, on_row)
        if out is not None:  # per-item predictions beside the rows, to audit which items a cut changed
            from ghostsearch.evaluation.native import write_item_rows

            write_item_rows(outcome.items, out.with_name(out.stem + "_items.parquet"))
    if out is not None:
        write_rows(outcome.rows, out)
    return outcome


def _evaluate_export(cfg: Config, target: Path, held_out, lm_dir: Path | None) -> EvalOutcome:
    """An exported model directory, evaluated as it loads (its base model is not here)."""
    from ghostsearch.core import lmeval_results
    from ghostsearch.evaluation.evaluate import evaluate_model
    from ghostsearch.model.models import resolve_dtype
    from ghostsearch.recovery.export import load_pruned, load_tokenizer

    raw: dict = {}  # lm-eval's own output, written beside the rows as lm-eval's results file
    device = cfg.resolved_device()
    model = load_pruned(target, dtype=resolve_dtype(cfg.dtype, device), device=device)
    numbers = evaluate_model(model, load_tokenizer(target), cfg.eval, cfg.data_dir, held_out=held_out, raw=raw)
    row = {"model": str(target), "held_out": ",".join(held_out), **numbers.to_dict()}
    if lm_dir is not None:
        lmeval_results.write(lm_dir, raw, target.name)
    return EvalOutcome([row])


def _evaluate_sets(cfg: Config, jobs: list[Job], repairs, data_plan, lm_dir: Path | None, on_row) -> EvalOutcome:
    """The dense model, each distinct set without repair and every repair, in one pass over the
    dense prefix cache (``evaluate_finalist_specs``); one row each, dense first."""
    from ghostsearch.core.logs import progress_enabled
    from ghostsearch.evaluation.evaluate import evaluate_finalist_specs
    from ghostsearch.model.models import load_configured
    from ghostsearch.model.stack import Stack, check_removed
    from ghostsearch.study.compare import finalist_numbers

    held_out = data_plan.held_out
    model, tok = load_configured(cfg)
    n_blocks = Stack(model).n_blocks
    sets = [list(check_removed(removed, n_blocks)) for _, removed, _ in jobs]
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
    jobs_all: list[tuple] = ([] if any(not r for r in sets) else [("dense", [], None)]) + [
        (cell, removed, value) for (cell, _, value), removed in zip(jobs, sets)
    ]
    rows: list[dict] = []
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
            if on_row is not None:
                on_row(rows[-1])
    return EvalOutcome(rows, items, fitted_on(data_plan), model)


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


def repairs_of(target: Path, recovery: str, jobs: list[Job] | None) -> dict[tuple[int, ...], list[str]]:
    """{removed set: repair methods} to evaluate beside the unrepaired model: ``recovery`` for
    every set, and in a run directory every repair ``recover`` fitted (RUN_DIR/recovery.parquet)."""
    if jobs is None:
        return {}
    from ghostsearch.rundir.outputs import recovered_methods

    out: dict[tuple[int, ...], list[str]] = {}
    sets = [tuple(sorted(r)) for _, r, _ in jobs]
    for r in sets:
        if r and recovery != "none":
            out.setdefault(r, []).append(recovery)
    if (target / "result.json").exists():
        for r, m in recovered_methods(target):
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


def models_table(rows: list[dict], items, fitted: dict[str, str], model) -> str:
    """The printed table: dense, each set without repair, each repair, side by side, every number with
    its difference from dense and a paired interval (ghostsearch.study.report.models)."""
    from ghostsearch.evaluation.speed import cost_operators, pruned_params
    from ghostsearch.model.stack import Stack
    from ghostsearch.stats.bootstrap import ItemMatrix
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
    from ghostsearch.study.report.answers import eval_lines  # issue 47: the floor beside the accuracies

    return "\n".join([text_table(model_rows(entries, matrix), speed=False), *eval_lines(items or [])])


def export_table(row: dict) -> str:
    """An export's numbers as a one-row table (its base model is not here to compare with)."""
    from ghostsearch.study.report.models import ModelEntry, model_rows, text_table

    numbers = {n: v for n, v in row.items() if n not in ("model", "held_out")}
    name = Path(row["model"]).name
    entry = ModelEntry((), "export", numbers, name, held_out=f"held out: {row['held_out'] or 'nothing'}", label=name)
    return text_table(model_rows([entry]), speed=False)
