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
from ghostsearch.rundir import Ledger, cell_name, open_run_dir
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
    res = run_cell(cfg, broker, Path(run_dir), n_blocks=n_blocks, progress=False, **cell)
    write_json_atomic(Path(run_dir) / "cells" / f"{res['cell']}.json", res)
    return res


def run_cells(cfg: Config, broker, run_dir: Path, cells: list[dict], n_blocks: int, progress: bool = True) -> list[dict]:
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy
    from tqdm.auto import tqdm

    (run_dir / "cells").mkdir(exist_ok=True)
    done, todo = [], []
    for c in cells:
        f = run_dir / "cells" / f"{cell_name(**c)}.json"
        (done.append(json.loads(f.read_text())) if f.exists() else todo.append(c))
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
        bar.update(1)
        bar.set_postfix(last=f"{res['cell']}={res['value']:.4g}")
    bar.close()
    order = {cell_name(**c): i for i, c in enumerate(cells)}
    return sorted(done, key=lambda r: order.get(r["cell"], 1 << 30))


def eval_key(removed: list[int], method: str, cfg: Config) -> str:
    blob = json.dumps({"removed": removed, "method": method, "variant": cfg.recovery.variant,
                       "eval": cfg.to_dict()["eval"], "model": cfg.model, "dtype": cfg.dtype}, sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


_LOADED: dict = {}  # per worker process: the base model, loaded once for every finalist it evaluates


def _evaluate_one(cfg: Config, removed: list[int], threads: int | None = None) -> dict:
    """Repair one finalist (cfg.recovery.method) and evaluate it downstream."""
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
                                  trust_remote_code=cfg.trust_remote_code)
    model, tok = _LOADED[key]
    pruned = repair(model, tok, removed, cfg)
    res = evaluate_model(pruned, tok, cfg.eval, cfg.data_dir)
    res["recovery"] = cfg.recovery.method
    return res


@ray.remote(max_retries=1)
def _eval_task(cfg: Config, removed: list[int], threads: int) -> dict:
    from ghostsearch.logs import quiet_libraries

    quiet_libraries()
    return _evaluate_one(cfg, removed, threads)


def evaluate_finalists(cfg: Config, run_dir: Path, results: list[dict], progress: bool = True,
                       distributed: bool = False) -> dict[str, dict]:
    """Repair each distinct finalist and evaluate it downstream; cached per finalist under
    RUN_DIR/evals/<key>.json. ``distributed``: one Ray task per finalist, each with the resources
    of one scorer (a GPU, or pool.threads CPUs), spread over the cluster; else one by one here."""
    from tqdm.auto import tqdm

    out_dir = run_dir / "evals"
    out_dir.mkdir(exist_ok=True)
    todo, out = {}, {}
    for r in results:
        key = eval_key(r["removed"], cfg.recovery.method, cfg)
        f = out_dir / f"{key}.json"
        if f.exists():
            out[key] = json.loads(f.read_text())
        else:
            todo.setdefault(key, r["removed"])
    bar = tqdm(total=len(todo) + len(out), initial=len(out), desc="downstream eval", unit="model",
               disable=not progress)

    def finish(key, res):
        write_json_atomic(out_dir / f"{key}.json", res)
        out[key] = res
        bar.update(1)

    if distributed and todo:
        from ghostsearch.pool.pool import resources

        cpus, gpus = resources(cfg)
        queue, pending = list(todo.items()), {}
        while queue or pending:  # at most pool.actors at once: the memory footprint of the pool just released
            while queue and len(pending) < cfg.pool.actors:
                key, removed = queue.pop(0)
                ref = _eval_task.options(num_cpus=cpus if not gpus else 1, num_gpus=gpus,
                                         name=f"eval:{key}").remote(cfg, removed, cfg.pool.threads)
                pending[ref] = key
            ready, _ = ray.wait(list(pending), num_returns=1)
            finish(pending.pop(ready[0]), ray.get(ready[0]))
    else:
        for key, removed in todo.items():
            finish(key, _evaluate_one(cfg, removed))
    bar.close()
    return out


def compare(cfg: Config, address: str | None = None, progress: bool = True) -> Path:
    from ghostsearch.evaluate import check_tasks
    from ghostsearch.models import model_depth
    from ghostsearch.pool.pool import connect, find_pool, release_pool, start_pool
    from ghostsearch.report import comparison_table, write_report

    cells = grid(cfg)
    n_blocks = model_depth(cfg.model, cfg.trust_remote_code)
    for c in cells:  # every config error before the first evaluation
        build_searcher(cfg, c["searcher"], c["k"], c["seed"], n_blocks)
    check_tasks(cfg.eval.tasks, cfg.data_dir)
    from ghostsearch import data

    for name in cfg.eval.perplexity:  # evaluation corpora must exist before an hour of searching
        data.load_texts(name, "validation" if name == "c4" else None, data_dir=cfg.data_dir)
    run_dir = open_run_dir(cfg, "compare")
    started = connect(address or cfg.pool.address, dashboard=cfg.pool.dashboard)
    t0 = time.monotonic()
    try:
        broker = find_pool(cfg.pool.name) if cfg.pool.name else start_pool(cfg)
        resumed = sum((run_dir / "cells" / f"{cell_name(**c)}.json").exists() for c in cells)
        results = run_cells(cfg, broker, run_dir, cells, n_blocks, progress)
        obj = cfg.objective_spec(cells[0]["objective"])
        stats = {name: ray.get(broker.statistic.remote(obj, name)) for name in ("similarity", "block_influence")}
        pool_status = ray.get(broker.status.remote())
        Ledger(run_dir).compact()
        if resumed < len(cells) or not (run_dir / "pool.json").exists():  # keep the pool that did the work
            write_json_atomic(run_dir / "pool.json", pool_status)
        write_json_atomic(run_dir / "result.json", {"searchers": {r["cell"]: r for r in results},
                                                    "wall_seconds": time.monotonic() - t0,  # this invocation
                                                    "cells_resumed": resumed})
        # our own pool is done: its resources go to the finalists' evaluation, spread over the
        # cluster; a named pool keeps its resources, so the finalists are evaluated here
        evals = evaluate_finalists(cfg, run_dir, results, progress, distributed=release_pool(broker))
    finally:
        if started:
            ray.shutdown()
    table = comparison_table(cfg, results, {r["cell"]: evals[eval_key(r["removed"], cfg.recovery.method, cfg)]
                                            for r in results})
    write_parquet_atomic(run_dir / "comparison.parquet", table)
    write_report(run_dir, table, stats, cfg)
    return run_dir
