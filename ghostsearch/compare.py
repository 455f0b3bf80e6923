"""`ghostsearch compare`: a grid of searchers x objectives x k x seeds on ONE shared scoring pool.

Cells run concurrently (``compare.concurrent`` at a time), each as its own Ray task process on
the driver node (DEAP draws from the process-global ``random``, so no two searchers share a
process), all evaluating through the same broker: shared cache, per-searcher accounting. A
finished cell writes RUN_DIR/cells/<cell>.json; an interrupted compare skips finished cells and
replays the others from the ledger. The finalists are then repaired (``recovery.method``) and
evaluated downstream; RUN_DIR/comparison.parquet and the report come last.
"""
from __future__ import annotations

import hashlib
import itertools
import json
import time
from pathlib import Path

import ray

from ghostsearch.config import Config
from ghostsearch.errors import GhostsearchError
from ghostsearch.io import write_json_atomic, write_parquet_atomic
from ghostsearch import lmeval_results
from ghostsearch.outputs import RunOutputs
from ghostsearch.rundir import Ledger, cell_name
from ghostsearch.runner import build_searcher, run_cell


def grid(cfg: Config) -> list[dict]:
    c = cfg.compare
    searchers = [cfg.searcher] if c.searchers is None else c.searchers
    objectives = [cfg.objective] if c.objectives is None else c.objectives
    ks = [cfg.k] if c.ks is None else c.ks
    seeds = [cfg.seed] if c.seeds is None else c.seeds
    cells = [{"searcher": s, "objective": o, "k": k, "seed": sd}
             for o, k, sd, s in itertools.product(objectives, ks, seeds, searchers)]
    if not cells:
        raise GhostsearchError("the comparison grid is empty; set compare.searchers, compare.objectives, compare.ks")
    return cells


@ray.remote(num_cpus=0, max_retries=0)
def _cell_task(cfg: Config, broker, run_dir: str, cell: dict, n_blocks: int) -> dict:
    import random

    from ghostsearch.logs import quiet_libraries

    quiet_libraries()
    random.seed(cell["seed"])  # this process is this searcher's alone (DEAP uses the global random)
    res = run_cell(cfg, broker, Path(run_dir), n_blocks=n_blocks, progress=False,
                   matched=cfg.compare.budget == "matched", **cell)
    write_json_atomic(Path(run_dir) / "cells" / f"{res['cell']}.json", res)
    return res


def run_cells(cfg: Config, broker, run_dir: Path, cells: list[dict], n_blocks: int, progress: bool = True,
              on_cell=None) -> list[dict]:
    """Every cell (finished ones read back); ``on_cell(result)`` for each, as it finishes."""
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy
    from tqdm.auto import tqdm

    (run_dir / "cells").mkdir(exist_ok=True)
    done, todo = [], []
    for c in cells:
        f = run_dir / "cells" / f"{cell_name(**c)}.json"
        (done.append(json.loads(f.read_text())) if f.exists() else todo.append(c))
    for res in done if on_cell else ():
        on_cell(res)
    here = NodeAffinitySchedulingStrategy(ray.get_runtime_context().get_node_id(), soft=False)
    bar = tqdm(total=len(cells), initial=len(done), desc="cells", unit="cell", disable=not progress)
    pending = {}
    queue = list(todo)
    while queue or pending:
        while queue and len(pending) < max(1, cfg.compare.concurrent):
            c = queue.pop(0)
            ref = _cell_task.options(scheduling_strategy=here, name=f"cell:{cell_name(**c)}").remote(
                cfg, broker, str(run_dir), c, n_blocks)
            pending[ref] = c
        ready, _ = ray.wait(list(pending), num_returns=1)
        c = pending.pop(ready[0])
        try:
            res = ray.get(ready[0])
        except ray.exceptions.RayTaskError as e:
            cause = e.as_instanceof_cause()
            if isinstance(getattr(e, "cause", None), GhostsearchError):
                raise e.cause from None
            raise cause
        done.append(res)
        if on_cell:
            on_cell(res)
        bar.update(1)
        bar.set_postfix(last=f"{res['cell']}={res['value']:.4g}")
    bar.close()
    order = {cell_name(**c): i for i, c in enumerate(cells)}
    return sorted(done, key=lambda r: order.get(r["cell"], 1 << 30))


def eval_key(removed: list[int], method: str, cfg: Config, held_out=()) -> str:
    blob = json.dumps({"removed": list(removed), "method": method, "variant": cfg.recovery.variant,
                       "eval": cfg.to_dict()["eval"], "model": cfg.model, "dtype": cfg.dtype,
                       "held_out": sorted(held_out)}, sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


_LOADED: dict = {}  # per worker process: the base model, loaded once for every finalist it evaluates


def _evaluate_one(cfg: Config, removed: list[int], method: str, held_out=(), threads: int | None = None) -> dict:
    """Repair one finalist by ``method`` (``none``: only pruned) and evaluate it downstream."""
    import torch

    from ghostsearch.evaluate import evaluate_model
    from ghostsearch.models import load_model
    from ghostsearch.recovery.repair import repair

    if threads:
        torch.set_num_threads(threads)  # Ray reuses worker processes: set it every time
    key = (cfg.model, cfg.dtype, cfg.resolved_device())
    if key not in _LOADED:
        _LOADED.clear()
        _LOADED[key] = load_model(cfg.model, dtype=cfg.dtype, device=cfg.resolved_device(),
                                  trust_remote_code=cfg.trust_remote_code, revision=cfg.revision)
    model, tok = _LOADED[key]
    pruned = repair(model, tok, removed, cfg, method)
    raw: dict = {}
    res = evaluate_model(pruned, tok, cfg.eval, cfg.data_dir, held_out, raw)
    res["recovery"], res["lm_eval"] = method, raw
    return res


@ray.remote(max_retries=1)
def _eval_task(cfg: Config, removed: list[int], method: str, held_out, threads: int) -> dict:
    from ghostsearch.logs import quiet_libraries

    quiet_libraries()
    return _evaluate_one(cfg, removed, method, held_out, threads)


def finalist_jobs(cfg: Config, results: list[dict]) -> list[tuple[list[int], str]]:
    """(removed, recovery) to evaluate: the dense model once, then every distinct finalist under
    every method of compare.recovery."""
    jobs = [([], "none")]
    for r in results:
        for method in cfg.compare.recovery:
            if (list(r["removed"]), method) not in jobs:
                jobs.append((list(r["removed"]), method))
    return jobs


def evaluate_finalists(cfg: Config, run_dir: Path, jobs: list[tuple[list[int], str]], held_out=(),
                       progress: bool = True, distributed: bool = False) -> dict[str, dict]:
    """Repair and evaluate each (removed, method) job downstream; cached per job under
    RUN_DIR/evals/<eval_key>.json. ``distributed``: one Ray task per job, each with the resources
    of one scorer (a GPU, or pool.threads CPUs), spread over the cluster; else one by one here."""
    from tqdm.auto import tqdm

    out_dir = run_dir / "evals"
    out_dir.mkdir(exist_ok=True)
    todo, out = {}, {}
    for removed, method in jobs:
        key = eval_key(removed, method, cfg, held_out)
        f = out_dir / f"{key}.json"
        if f.exists():
            out[key] = json.loads(f.read_text())
        else:
            todo.setdefault(key, (removed, method))
    bar = tqdm(total=len(todo) + len(out), initial=len(out), desc="downstream eval", unit="model",
               disable=not progress)

    def finish(key, res):
        removed, method = todo[key]
        lmeval_results.write(run_dir / "lm_eval", res.pop("lm_eval", None),
                             lmeval_results.model_name(cfg.model, removed, method))
        write_json_atomic(out_dir / f"{key}.json", res)
        out[key] = res
        bar.update(1)

    if distributed and todo:
        from ghostsearch.pool.pool import resources

        cpus, gpus = resources(cfg)
        queue, pending = list(todo.items()), {}
        while queue or pending:  # at most pool.actors at once: the memory footprint of the pool just released
            while queue and len(pending) < cfg.pool.actors:
                key, (removed, method) = queue.pop(0)
                ref = _eval_task.options(num_cpus=cpus if not gpus else 1, num_gpus=gpus, name=f"eval:{key}").remote(
                    cfg, removed, method, list(held_out), cfg.pool.threads)
                pending[ref] = key
            ready, _ = ray.wait(list(pending), num_returns=1)
            finish(pending.pop(ready[0]), ray.get(ready[0]))
    else:
        for key, (removed, method) in todo.items():
            finish(key, _evaluate_one(cfg, removed, method, held_out))
    bar.close()
    return out


def compare(cfg: Config, address: str | None = None, progress: bool = True) -> Path:
    from ghostsearch.evaluate import check_tasks
    from ghostsearch.config import check_model_fit
    from ghostsearch.pool.pool import check_local_capacity, connect, find_pool, pool_identity, release_pool, start_pool
    from ghostsearch.rundir.layout import check_identity, check_run_dir, close_run_dir
    from ghostsearch.report import comparison_table, write_report

    from ghostsearch.dataplan import announce, plan

    cells = grid(cfg)
    n_blocks = check_model_fit(cfg)
    matched = cfg.compare.budget == "matched"
    for c in cells:  # every config error before the first evaluation
        build_searcher(cfg, c["searcher"], c["k"], c["seed"], n_blocks, matched=matched)
    check_tasks(cfg.eval.tasks, cfg.data_dir)
    check_run_dir(cfg)
    check_local_capacity(cfg, address or cfg.pool.address)  # no run directory for a local pool that cannot start
    # every dataset resolved, evaluation sets present and disjoint from calibration, before an hour of searching
    data_plan = plan(cfg, [c["objective"] for c in cells], evaluate=True,
                     repair=any(m != "none" for m in cfg.compare.recovery))
    announce(data_plan)
    held_out = data_plan["held_out"]
    outputs = RunOutputs(cfg, "compare")  # RUN_DIR (staged when out= is s3:// or gs://) and the trackers
    run_dir = outputs.dir
    started = connect(address or cfg.pool.address, dashboard=cfg.pool.dashboard)
    t0 = time.monotonic()
    try:
        broker = find_pool(cfg.pool.name) if cfg.pool.name else start_pool(cfg)
        objectives = dict.fromkeys(c["objective"] for c in cells)
        check_identity(run_dir, pool_identity(broker, cfg, [cfg.objective_spec(o) for o in objectives]))
        resumed = sum((run_dir / "cells" / f"{cell_name(**c)}.json").exists() for c in cells)
        results = run_cells(cfg, broker, run_dir, cells, n_blocks, progress, on_cell=outputs.cell)
        obj = cfg.objective_spec(cells[0]["objective"])
        stats = {name: ray.get(broker.statistic.remote(obj, name)) for name in ("similarity", "block_influence")}
        pool_status = ray.get(broker.status.remote())
        Ledger(run_dir).compact()
        if resumed < len(cells) or not (run_dir / "pool.json").exists():  # keep the pool that did the work
            write_json_atomic(run_dir / "pool.json", pool_status)
        write_json_atomic(run_dir / "result.json", {"searchers": {r["cell"]: r for r in results},
                                                    "wall_seconds": time.monotonic() - t0,  # this invocation
                                                    "cells_resumed": resumed, "data": data_plan})
        # our own pool is done: its resources go to the finalists' evaluation, spread over the
        # cluster; a named pool keeps its resources, so the finalists are evaluated here
        evals = evaluate_finalists(cfg, run_dir, finalist_jobs(cfg, results), held_out, progress,
                                   distributed=release_pool(broker))
    except BaseException:
        outputs.close(ok=False)
        close_run_dir(run_dir, ok=False)
        raise
    finally:
        if started:
            ray.shutdown()
    dense = evals[eval_key([], "none", cfg, held_out)]
    per_cell = {(r["cell"], m): evals[eval_key(r["removed"], m, cfg, held_out)]
                for r in results for m in cfg.compare.recovery}
    table = comparison_table(cfg, results, per_cell, dense, data_plan)
    write_parquet_atomic(run_dir / "comparison.parquet", table)
    write_report(run_dir, table, stats, cfg, data_plan)
    for (cell, method), numbers in per_cell.items():
        outputs.finalist(cell, method, numbers)
    outputs.close()
    close_run_dir(run_dir)
    return run_dir
