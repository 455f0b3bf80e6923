"""`ghostsearch compare`: a grid of searchers x objectives x k x seeds on ONE shared scoring pool.

Cells run concurrently (``compare.concurrent`` at a time), each as its own Ray task process on
the driver node (every searcher owns its random generators; a process per cell keeps a cell's
failure its own), all evaluating through the same broker: shared cache, per-searcher accounting. A
finished cell writes RUN_DIR/cells/<cell>.json; an interrupted compare skips finished cells and
replays the others from the ledger. The finalists are then repaired (``compare.recovery``) and
evaluated downstream on the pool's scorers; RUN_DIR/comparison.parquet and the report come last.
"""

from __future__ import annotations

import hashlib
import json
import time
from dataclasses import replace
from pathlib import Path

import ray

from ghostsearch.config import Config, check_repairs
from ghostsearch.core import lmeval_results
from ghostsearch.core.errors import GhostsearchError
from ghostsearch.core.eval_numbers import FinalistNumbers, ItemRow, read_item_rows
from ghostsearch.core.io import write_json_atomic, write_parquet_atomic
from ghostsearch.run.runner import Run, run_cell
from ghostsearch.rundir.cell import CellResult, CellSpec, grid_cells


def grid(cfg: Config) -> list[CellSpec]:
    cells = grid_cells(cfg)  # the one grid rule, which plan counts too
    if not cells:
        raise GhostsearchError("the comparison grid is empty; set compare.searchers, compare.objectives, compare.ks")
    return cells


@ray.remote(num_cpus=0, max_retries=0)
def _cell_task(cfg: Config, broker, run_dir: str, cell: CellSpec, n_blocks: int) -> CellResult:
    from ghostsearch.core.logs import quiet_libraries

    quiet_libraries()
    res = run_cell(
        cfg,
        broker,
        Path(run_dir),
        searcher=cell.searcher,
        objective=cell.objective,
        k=cell.k,
        seed=cell.seed,
        n_blocks=n_blocks,
        progress=False,
        matched=cfg.compare.budget == "matched",
    )
    write_json_atomic(Path(run_dir) / "cells" / f"{res.cell}.json", res.to_dict())
    return res


def run_cells(
    cfg: Config, broker, run_dir: Path, cells: list[CellSpec], n_blocks: int, progress: bool = True, on_cell=None
) -> list[CellResult]:
    """Every cell (finished ones read back); ``on_cell(result)`` for each, as it finishes."""
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy
    from tqdm.auto import tqdm

    (run_dir / "cells").mkdir(exist_ok=True)
    done: list[CellResult] = []
    todo = []
    for c in cells:
        f = run_dir / "cells" / f"{c.name}.json"
        (done.append(CellResult.from_dict(json.loads(f.read_text()))) if f.exists() else todo.append(c))
    for res in done if on_cell else ():
        on_cell(res)
    here = NodeAffinitySchedulingStrategy(ray.get_runtime_context().get_node_id(), soft=False)
    bar = tqdm(total=len(cells), initial=len(done), desc="cells", unit="cell", disable=not progress)
    pending: dict[ray.ObjectRef, CellSpec] = {}
    queue = list(todo)
    while queue or pending:
        while queue and len(pending) < max(1, cfg.compare.concurrent):
            c = queue.pop(0)
            ref = _cell_task.options(scheduling_strategy=here, name=f"cell:{c.name}").remote(
                cfg, broker, str(run_dir), c, n_blocks
            )
            pending[ref] = c
        ready, _ = ray.wait(list(pending), num_returns=1)
        c = pending.pop(ready[0])
        try:
            res = ray.get(ready[0])
        except ray.exceptions.RayTaskError as e:
            cause = e.as_instanceof_cause()
            if isinstance(getattr(e, "cause", None), GhostsearchError):
                raise e.cause from None
            raise cause from e
        done.append(res)
        if on_cell:
            on_cell(res)
        bar.update(1)
        bar.set_postfix(last=f"{res.cell}={res.value:.4g}")
    bar.close()
    order = {c.name: i for i, c in enumerate(cells)}
    return sorted(done, key=lambda r: order.get(r.cell, 1 << 30))


EVAL_RESULT_KEYS = (
    "tasks",
    "perplexity",
    "limit",
    "ppl_seq_len",
    "ppl_max_seq",
    "protocol",
    "seed",
    "sample",
    "allocation",
    "neyman_from",
    "exclude_from",
)
# what a finalist's numbers depend on (the item draw's keys included: ghostsearch/data/items.py); eval.engine
# (native = lm-eval by the parity tests), batch_size and cache_gib change only how fast they come, and
# eval.max_items / eval.looks only how far down the same draw a model goes (a longer run extends the
# cached rows), so changing them keeps every cached evaluation


def recovery_key(cfg: Config, method: str) -> dict:
    """cfg.recovery as an eval key holds it: LinearPatch's options (added 2026-12-03) only for
    linearpatch and only where they differ from what it did before them (paley, pooled), so every
    key computed before they existed stays valid."""
    rec = {k: v for k, v in cfg.to_dict()["recovery"].items() if k != "method"}
    lp = (rec.pop("linearpatch_rotation", "paley"), rec.pop("linearpatch_scale", "pooled"))
    if method == "linearpatch" and lp != ("paley", "pooled"):
        rec["linearpatch_rotation"], rec["linearpatch_scale"] = lp
    return rec


def eval_key(removed: list[int], method: str, cfg: Config, held_out=()) -> str:
    ev = cfg.to_dict()["eval"]
    blob = json.dumps(
        {
            "removed": list(removed),
            "method": method,
            "variant": cfg.recovery.variant,
            "recovery": recovery_key(cfg, method) if method != "none" else None,
            "eval": {k: ev[k] for k in EVAL_RESULT_KEYS},
            "model": cfg.model,
            "revision": cfg.revision,
            "dtype": cfg.dtype,
            "held_out": sorted(held_out),
        },
        sort_keys=True,
    )
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def finalist_jobs(cfg: Config, finalists) -> list[tuple[list[int], str]]:
    """(removed, recovery) to evaluate: the dense model once, then every distinct finalist (its
    removed set: ``finalists``) under every method of compare.recovery."""
    jobs: list[tuple[list[int], str]] = [([], "none")]
    for removed in finalists:
        for method in cfg.compare.recovery:
            if (list(removed), method) not in jobs:
                jobs.append((list(removed), method))
    return jobs


def finalist_numbers(
    cfg: Config, lm_dir: Path | None, removed, method: str, result: FinalistNumbers
) -> FinalistNumbers:
    """One finalist's numbers as ``evaluate_finalist_specs`` gives them, less lm-eval's own output
    (``lm_eval``), which goes to lm-eval's results file under ``lm_dir`` (None: not written), named
    for the pruned model (``lmeval_results.model_name``): the per-finalist writing of ``ghostsearch
    eval`` and of ``_Evaluator.finish``."""
    if lm_dir is not None:
        lmeval_results.write(lm_dir, result.lm_eval, lmeval_results.model_name(cfg.model, removed, method))
    return result.without_lm_eval()


def _shares(keys: list[str], todo: dict, n: int, size: int) -> list[list[str]]:
    """``keys`` in at least n shares (one per scorer) of at most ``size`` (eval.share: the progress
    bar moves, the scorers balance and a share's rows are saved when it ends, for one extra dense
    pass per share), each spanning first cuts early to late (sorted by first removed block, dealt
    round-robin) so that every share's dense prefix cache is used alike."""
    keys = sorted(keys, key=lambda k: (min(todo[k][0], default=-1), todo[k][1]))
    n = max(n, -(-len(keys) // size))
    return [s for s in (keys[i::n] for i in range(n)) if s]


def evaluate_finalists(
    cfg: Config,
    run_dir: Path,
    jobs: list[tuple[list[int], str]],
    held_out=(),
    progress: bool = True,
    broker=None,
    contrasts=None,
    on_look=None,
    on_share=None,
) -> dict[str, FinalistNumbers]:
    """Repair and evaluate each (removed, method) job downstream (``evaluate.evaluate_finalist_specs``:
    finalists of one model together, over one dense prefix cache) on the run's item draw
    (``items.run_draw``: RUN_DIR/items.parquet, written before any evaluation, reused on resume);
    cached per job under RUN_DIR/evals/<eval_key>.json (+ .items.parquet, its per-item predictions),
    lm-eval's results files under RUN_DIR/lm_eval, every job's items together in
    RUN_DIR/eval_items.parquet. Finalists are evaluated in shares of at most ``eval.share``, each
    share's rows saved when it ends (a killed run keeps every finished share). ``broker``: the pool's
    scorers evaluate the shares (Broker.with_model), on the replicas that did the search; a share
    whose scorer died is run once more. Else here, on a model loaded once.

    ``contrasts`` (compare's pre-registered pairs: name, left_key, right_key, by eval_key) with
    ``eval.looks``: adaptive evaluation (``looks.Design``): look by look, only the models of open
    contrasts get the look's new items; the decisions go to RUN_DIR/looks.json and result.json
    (``adaptive``). Every look resumes from the per-item rows: nothing already in a job's
    .items.parquet is evaluated again. ``on_look(j, n)``: called after look j (0-based, n items per
    model) is evaluated and tested, e.g. to commit a long run's data as it goes; ``on_share(keys)``:
    called after each share's rows and numbers are saved."""
    from ghostsearch.data import items as item_draw
    from ghostsearch.stats.looks import Design

    (run_dir / "evals").mkdir(exist_ok=True)
    draw = item_draw.run_draw(cfg.eval, run_dir, cfg.eval.tasks, cfg.data_dir, held_out)
    jobs_by_key = _jobs_by_key(cfg, jobs, held_out)
    keys = list(jobs_by_key)
    tested = _tested_contrasts(contrasts, keys)
    planned = _planned_looks(cfg, tested, len(draw))
    adaptive = planned is not None
    looks = list(planned) if planned is not None else [len(draw)]
    design = Design(looks, tested, spending=cfg.eval.spending, margin=cfg.eval.margin) if adaptive else None
    run = _Evaluator(cfg, run_dir, jobs_by_key, held_out, progress, broker, draw, on_share, perplexity_last=adaptive)
    if design is None:
        run.extend(keys, looks[0])
        if on_look is not None:
            on_look(0, looks[0])
    else:
        _adaptive_looks(cfg, run_dir, run, design, keys, draw, on_look)
    run.perplexities(keys)  # adaptive runs: after the looks (the verdicts need only the items)
    run.close()
    _collect_items(run_dir, keys)
    return {k: run.numbers[k] for k in keys}


def _jobs_by_key(cfg: Config, jobs: list[tuple[list[int], str]], held_out) -> dict[str, tuple[list[int], str]]:
    """Each distinct job by its eval key (the first of jobs that share one), in the jobs' order."""
    out: dict[str, tuple[list[int], str]] = {}
    for removed, method in jobs:
        out.setdefault(eval_key(removed, method, cfg, held_out), (list(removed), method))
    return out


def _tested_contrasts(contrasts, keys: list[str]) -> list:
    """The contrasts to test (a pair of one model with itself is not), each naming evaluated models."""
    from ghostsearch.stats.looks import as_contrast

    tested = [as_contrast(c) for c in contrasts or [] if not getattr(c, "same", False)]
    missing = sorted({k for c in tested for k in (c.left_key, c.right_key)} - set(keys))
    if missing:
        raise GhostsearchError(
            f"compare.contrasts name models that are not evaluated ({missing}); contrast finalists of this run"
        )
    return tested


def _planned_looks(cfg: Config, contrasts: list, n_draw: int) -> list[int] | None:
    """eval.looks when there are contrasts to test (adaptive evaluation), checked against the engine,
    the tasks and the draw's size; None for a fixed evaluation."""
    planned = cfg.eval.looks if contrasts else None
    if planned is None:
        return None
    from ghostsearch.evaluation.native import NATIVE_TASKS

    if cfg.eval.engine != "native" or any(t not in NATIVE_TASKS for t in cfg.eval.tasks):
        raise GhostsearchError(
            "eval.looks needs per-item rows of every task: eval.engine=native and only the "
            "eight commonsense tasks in eval.tasks"
        )
    if planned[-1] > n_draw:
        raise GhostsearchError(
            f"eval.looks ends at {planned[-1]} items but the draw has {n_draw}; set eval.max_items to the last look"
        )
    return planned


def _adaptive_looks(cfg: Config, run_dir: Path, run: _Evaluator, design, keys: list[str], draw, on_look) -> None:
    """Look by look: the models of open contrasts get the look's items, the contrasts are tested, and
    the decisions recorded (:func:`_record_looks`) before ``on_look``; stops when every contrast is
    decided. A resumed run replays the looks it recorded before (the decisions are a function of the
    rows): those are neither recorded again nor reported, so looks.json never steps back."""
    recorded = _looks_recorded(run_dir, cfg, design)
    looks = design.looks
    for j, n in enumerate(looks):
        run.extend(keys if j == 0 else sorted(design.open_keys()), n)
        design.test(j, {k: run.correct(k) for k in design.open_keys()}, draw.order[:n])
        if j + 1 >= recorded:
            _record_looks(run_dir, cfg, design, run, keys, j + 1)  # before on_look: a commit of the look holds it
            if on_look is not None:
                on_look(j, n)
        if design.finished():
            break
    if j + 1 < recorded:  # cannot happen with the same rows; never leave it stale
        _record_looks(run_dir, cfg, design, run, keys, j + 1)


def _looks_recorded(run_dir: Path, cfg: Config, design) -> int:
    """How many looks RUN_DIR/looks.json holds for this design (the same looks, spending, margin and
    contrasts; else 0)."""
    f = run_dir / "looks.json"
    if not f.exists():
        return 0
    before = json.loads(f.read_text())
    same = (before.get("looks"), before.get("spending"), before.get("margin")) == (
        design.looks,
        cfg.eval.spending,
        design.margin,
    ) and [c.get("contrast") for c in before.get("contrasts", [])] == [c.name for c in design.contrasts]
    return before.get("looks_run", 0) if same else 0


def _record_looks(run_dir: Path, cfg: Config, design, run: _Evaluator, keys: list[str], looks_run: int) -> None:
    """RUN_DIR/looks.json, and result.json's ``adaptive`` where result.json exists, after a look."""
    looks = design.looks
    used = {k: run.items_used(k) for k in keys}
    summary = {
        "looks": looks,
        "looks_run": looks_run,
        "spending": cfg.eval.spending,
        "alpha": design.alpha,
        "margin": design.margin,
        "fixed_items_per_model": looks[-1],
        "items_per_model": used,
        "items_total": sum(used.values()),
        "fixed_items_total": looks[-1] * len(keys),
        "contrasts": [r.to_dict() for r in design.table(used, looks_run)],
    }
    write_json_atomic(run_dir / "looks.json", summary)
    res_path = run_dir / "result.json"
    if res_path.exists():
        write_json_atomic(res_path, {**json.loads(res_path.read_text()), "adaptive": summary})


class _Evaluator:
    """The per-job state of evaluate_finalists: numbers (evals/<key>.json), per-item rows
    (evals/<key>.items.parquet); ``extend(keys, n)`` brings each of them to the first n items of the
    draw, evaluating only what its rows lack (perplexities once). ``perplexity_last`` (adaptive runs,
    native engine): a job's first evaluation is its items alone, and ``perplexities(keys)`` measures
    the perplexities of every job that lacks them after the looks, so that the looks, which decide
    the contrasts, do not wait behind perplexity (WikiText-2 under the paper protocol costs several
    looks' worth of items per model on a CPU)."""

    def __init__(
        self, cfg, run_dir, jobs, held_out, progress, broker, draw, on_share=None, perplexity_last: bool = False
    ):
        from tqdm.auto import tqdm

        self.cfg, self.run_dir, self.jobs, self.held_out, self.broker, self.draw = (
            cfg,
            run_dir,
            jobs,
            held_out,
            broker,
            draw,
        )
        self.numbers: dict[str, FinalistNumbers] = {}
        self.rows: dict[str, list[ItemRow]] = {}
        self.model: tuple | None = None  # (model, tokenizer), loaded at the first local evaluation
        self.on_share = on_share
        self.perplexity_last = perplexity_last and self.native_only()
        for key in jobs:
            f, fi = run_dir / "evals" / f"{key}.json", run_dir / "evals" / f"{key}.items.parquet"
            self.rows[key] = read_item_rows(fi) if fi.exists() else []
            if f.exists():
                self.numbers[key] = FinalistNumbers.from_dict(json.loads(f.read_text()))
        self.bar = tqdm(
            total=len(jobs), initial=len(self.numbers), desc="downstream eval", unit="model", disable=not progress
        )

    def items_used(self, key: str) -> int:
        return len({r.item for r in self.rows[key]})

    def correct(self, key: str) -> dict:
        return {r.item: float(r.correct) for r in self.rows[key]}

    def extend(self, keys: list[str], n: int) -> None:
        """Brings every job of ``keys`` to the first n items of the draw. Native-only runs evaluate only
        the items a job's rows lack (zero-shot only); otherwise a job whose numbers are for fewer items
        is evaluated again on all n."""
        want = self.draw.first(n)
        groups: dict[tuple, list[str]] = {}
        for key in keys:
            old = self.numbers.get(key)
            if (old is None and not self.perplexity_last) or not self.native_only():
                if old is not None and old.items_used == n:
                    continue
                need, fresh = want, True
            else:
                have = {r.item for r in self.rows[key]}
                need = {t: [d for d in ds if (t, d) not in have] for t, ds in want.items()}
                fresh = False
                if not any(need.values()):
                    if old is None or old.items_used != len(have):  # rows written, numbers not (interrupted)
                        self.save(key, self.merged(key))
                    continue
            groups.setdefault((fresh, tuple((t, tuple(v)) for t, v in need.items())), []).append(key)
        for (fresh, need), share_keys in groups.items():
            self.evaluate(share_keys, {t: list(v) for t, v in need}, fresh)

    def lacks_perplexity(self, key: str) -> bool:
        old = self.numbers.get(key, FinalistNumbers())
        return any(name not in old.perplexity for name in self.cfg.eval.perplexity)

    def perplexities(self, keys: list[str]) -> None:
        """Measures eval.perplexity for every job of ``keys`` whose numbers lack it (after the looks of
        a ``perplexity_last`` run; nothing otherwise), in shares, each share's numbers saved as it ends."""
        todo = [k for k in keys if self.lacks_perplexity(k)] if self.perplexity_last else []
        if todo:
            self.evaluate(todo, {t: [] for t in self.cfg.eval.tasks}, fresh=False, perplexity=True)

    def native_only(self) -> bool:
        from ghostsearch.evaluation.native import NATIVE_TASKS

        return self.cfg.eval.engine == "native" and all(t in NATIVE_TASKS for t in self.cfg.eval.tasks)

    def evaluate(
        self, keys: list[str], items: dict[str, list[int]], fresh: bool, perplexity: bool | None = None
    ) -> None:
        """Evaluates jobs ``keys`` on ``items`` in shares; ``fresh``: their rows and numbers are replaced
        (else the new rows are added); ``perplexity`` (default: ``fresh``): perplexities measured too."""
        from ghostsearch.evaluation.evaluate import evaluate_finalist_specs

        ppl = fresh if perplexity is None else perplexity
        self.last_items = items
        specs = {k: self.jobs[k] for k in keys}
        if self.broker is not None:
            n = len(ray.get(self.broker.pool_status.remote()).actors)
            pending = {}

            def submit(share, attempt):
                ref = self.broker.with_model.remote(
                    evaluate_finalist_specs, self.cfg, [specs[k] for k in share], list(self.held_out), False, items, ppl
                )
                pending[ref] = (share, attempt)

            for share in _shares(keys, specs, n, self.cfg.eval.share):
                submit(share, 1)
            while pending:
                ready, _ = ray.wait(list(pending), num_returns=1)
                share, attempt = pending.pop(ready[0])
                try:
                    res = ray.get(ready[0])
                except ray.exceptions.RayActorError:
                    if attempt > 1:
                        raise
                    submit(share, attempt + 1)  # the scorer restarts (max_restarts=-1): its share once more
                    continue
                self.finish(share, res, fresh)
        else:
            if self.model is None:
                from ghostsearch.model.models import load_configured

                self.model = load_configured(self.cfg)  # split like the scorers (placement)
            model, tok = self.model
            for share in _shares(keys, specs, 1, self.cfg.eval.share):
                self.finish(
                    share,
                    evaluate_finalist_specs(
                        model, tok, self.cfg, [specs[k] for k in share], self.held_out, not self.bar.disable, items, ppl
                    ),
                    fresh,
                )

    def finish(self, share: list[str], res: tuple[list[FinalistNumbers], list[ItemRow]], fresh: bool) -> None:
        from ghostsearch.evaluation.native import write_item_rows

        results, rows = res
        for i, key in enumerate(share):
            removed, method = self.jobs[key]
            new = [replace(r, finalist=0, recovery=method, key=key) for r in rows if r.finalist == i]
            self.rows[key] = new if fresh else self.rows[key] + new
            if fresh or new:  # a perplexity pass adds no rows: the file on disk already holds them
                write_item_rows(self.rows[key], self.run_dir / "evals" / f"{key}.items.parquet")
            if fresh:
                numbers = finalist_numbers(self.cfg, self.run_dir / "lm_eval", removed, method, results[i])
                numbers = numbers.merged(FinalistNumbers(items_used=sum(len(v) for v in self.last_items.values())))
            else:  # the new rows added; perplexities measured now (perplexities()) or as first measured
                first = results[i].without_lm_eval() if key not in self.numbers else FinalistNumbers()
                numbers = first.merged(self.merged(key), results[i].perplexities())
            self.save(key, numbers)
        last = self.numbers[share[-1]].mean_acc
        self.bar.set_postfix(last="" if last is None else last)
        if self.on_share is not None:
            self.on_share(list(share))

    def save(self, key: str, numbers: FinalistNumbers) -> None:
        if key not in self.numbers:
            self.bar.update(1)
        # after the rows: marks the numbers
        write_json_atomic(self.run_dir / "evals" / f"{key}.json", numbers.to_dict())
        self.numbers[key] = numbers

    def merged(self, key: str) -> FinalistNumbers:
        """The job's numbers over all its rows (perplexities as first measured)."""
        from ghostsearch.evaluation.evaluate import summarize
        from ghostsearch.evaluation.native import accuracies

        tasks = list(self.cfg.eval.tasks)
        keep = self.numbers.get(key, FinalistNumbers()).without_accuracies(tasks)
        return keep.merged(
            summarize(accuracies(self.rows[key], tasks), tasks), FinalistNumbers(items_used=self.items_used(key))
        )

    def close(self) -> None:
        self.bar.close()


def _collect_items(run_dir: Path, keys: list[str]) -> None:
    """RUN_DIR/eval_items.parquet: the per-item predictions of every job, one table to audit
    which items a cut changed (column ``key`` = the job's eval_key)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    parts = [run_dir / "evals" / f"{k}.items.parquet" for k in keys]
    tables = [pq.read_table(p) for p in parts if p.exists()]
    if tables:
        write_parquet_atomic(run_dir / "eval_items.parquet", pa.concat_tables(tables, promote_options="default"))


def checks(cfg: Config) -> None:
    """compare's own checks before any Ray work: every repair fits the model's blocks, every task is there."""
    from ghostsearch.evaluation.evaluate import check_tasks

    check_repairs(cfg, "compare.recovery", cfg.compare.recovery)
    check_tasks(cfg.eval.tasks, cfg.data_dir)


def compare(cfg: Config, address: str | None = None, progress: bool = True) -> Path:
    """`ghostsearch compare`: the grid's cells on one pool (``runner.Run``: checks, data plan, RUN_DIR,
    pool, identity, result.json, cleanup), then the finalists evaluated on the pool's scorers, then
    comparison.parquet and the report."""
    from ghostsearch.stats.contrasts import resolve_contrasts
    from ghostsearch.study.report import comparison_table, write_report

    cells = grid(cfg)
    # every config error, every dataset resolved, evaluation sets present and disjoint from calibration,
    # before an hour of searching
    run = Run(
        cfg,
        "compare",
        cells,
        address=address,
        matched=cfg.compare.budget == "matched",
        evaluate=True,
        repair=any(m != "none" for m in cfg.compare.recovery),
        check=lambda: checks(cfg),
        contrasts=list(cfg.compare.contrasts),
    )
    data_plan = run.data_plan
    cfg = cfg.evaluating(data_plan.perplexity)  # eval.perplexity as the data plan resolved it here
    if cfg.compare.contrasts:  # what this size can decide, said before any model work
        import logging

        from ghostsearch.stats.contrasts import power_lines

        n_items = cfg.eval.looks[-1] if cfg.eval.looks else cfg.eval.max_items
        for line in power_lines(cfg.contrasts(), n_items):
            logging.getLogger(__name__).info(line)
    held_out = data_plan.held_out
    with run:  # the pre-registered contrasts go into result.json first, before any cell runs
        broker, run_dir = run.broker, run.dir
        resumed = sum((run_dir / "cells" / f"{c.name}.json").exists() for c in cells)
        results = run_cells(
            cfg, broker, run_dir, cells, run.n_blocks, progress, on_cell=lambda r: run.outputs.cell(r.to_dict())
        )  # the trackers take the JSON form
        obj = cfg.objective_spec(cells[0].objective, cells[0].seed)
        stats = {name: ray.get(broker.statistic.remote(obj, name)) for name in ("similarity", "block_influence")}
        run.finish(
            results,
            resumed=resumed,
            wall_seconds=time.monotonic() - run.t0,  # this invocation
            cells_resumed=resumed,
        )
        # the finalists are evaluated on the same replicas, one share per scorer, before the pool goes
        pairs = resolve_contrasts(
            cfg.contrasts(), results, lambda removed, method: eval_key(removed, method, cfg, held_out)
        )
        evals = evaluate_finalists(
            cfg,
            run_dir,
            finalist_jobs(cfg, [r.removed for r in results]),
            held_out,
            progress,
            broker=broker,
            contrasts=pairs,
        )
        run.disconnect()  # the pool released, its CPUs/GPUs free for the report

        def numbers(removed, method) -> FinalistNumbers:
            key = eval_key(removed, method, cfg, held_out)
            return replace(evals[key], eval_key=key)

        dense = numbers([], "none")
        per_cell = {(r.cell, m): numbers(r.removed, m) for r in results for m in cfg.compare.recovery}
        table = comparison_table(cfg, results, per_cell, dense, data_plan)
        write_parquet_atomic(run_dir / "comparison.parquet", table)
        write_report(run_dir, table, stats, cfg, data_plan)
        for (cell, method), finalist in per_cell.items():
            run.outputs.finalist(cell, method, finalist)
    return run_dir
