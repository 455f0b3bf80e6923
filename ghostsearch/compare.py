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
    from ghostsearch.logs import quiet_libraries

    quiet_libraries()
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


EVAL_RESULT_KEYS = ("tasks", "perplexity", "limit", "ppl_seq_len", "ppl_max_seq", "protocol")
# what a finalist's numbers depend on; eval.engine (native = lm-eval by the parity tests), batch_size
# and cache_gib change only how fast they come, so changing them keeps every cached evaluation


def eval_key(removed: list[int], method: str, cfg: Config, held_out=()) -> str:
    ev = cfg.to_dict()["eval"]
    blob = json.dumps({"removed": list(removed), "method": method, "variant": cfg.recovery.variant,
                       "recovery": {k: v for k, v in cfg.to_dict()["recovery"].items() if k != "method"}
                       if method != "none" else None,
                       "eval": {k: ev[k] for k in EVAL_RESULT_KEYS}, "model": cfg.model, "revision": cfg.revision,
                       "dtype": cfg.dtype, "held_out": sorted(held_out)}, sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def finalist_jobs(cfg: Config, results: list[dict]) -> list[tuple[list[int], str]]:
    """(removed, recovery) to evaluate: the dense model once, then every distinct finalist under
    every method of compare.recovery."""
    jobs = [([], "none")]
    for r in results:
        for method in cfg.compare.recovery:
            if (list(r["removed"]), method) not in jobs:
                jobs.append((list(r["removed"]), method))
    return jobs


SHARE = 8  # finalists per share at most: the progress bar moves and the scorers balance, for one
#            extra dense pass per share (about 1/SHARE of the share's work)


def _shares(keys: list[str], todo: dict, n: int) -> list[list[str]]:
    """``keys`` in at least n shares (one per scorer) of at most SHARE, each spanning first cuts
    early to late (sorted by first removed block, dealt round-robin) so that every share's dense
    prefix cache is used alike."""
    keys = sorted(keys, key=lambda k: (min(todo[k][0], default=-1), todo[k][1]))
    n = max(n, -(-len(keys) // SHARE))
    return [s for s in (keys[i::n] for i in range(n)) if s]


def evaluate_finalists(cfg: Config, run_dir: Path, jobs: list[tuple[list[int], str]], held_out=(),
                       progress: bool = True, broker=None) -> dict[str, dict]:
    """Repair and evaluate each (removed, method) job downstream (``evaluate.evaluate_finalist_specs``:
    finalists of one model together, over one dense prefix cache); cached per job under
    RUN_DIR/evals/<eval_key>.json (+ .items.parquet, its per-item predictions), lm-eval's results
    files under RUN_DIR/lm_eval, every job's items together in RUN_DIR/eval_items.parquet.
    ``broker``: the pool's scorers evaluate them (Broker.with_model), in shares of at most SHARE
    finalists, on the replicas that did the search; a share whose scorer died is run once more. Else here, on a
    model loaded once."""
    from tqdm.auto import tqdm

    from ghostsearch.evaluate import evaluate_finalist_specs
    from ghostsearch.evaluation_native import write_item_rows

    out_dir = run_dir / "evals"
    out_dir.mkdir(exist_ok=True)
    todo, out, keys = {}, {}, []
    for removed, method in jobs:
        key = eval_key(removed, method, cfg, held_out)
        keys.append(key)
        f = out_dir / f"{key}.json"
        if f.exists():
            out[key] = json.loads(f.read_text())
        else:
            todo.setdefault(key, (list(removed), method))
    bar = tqdm(total=len(todo) + len(out), initial=len(out), desc="downstream eval", unit="model",
               disable=not progress)

    def finish(share: list[str], res: tuple[list[dict], list[dict]]) -> None:
        results, rows = res
        for i, key in enumerate(share):
            removed, method = todo[key]
            numbers = dict(results[i])
            lmeval_results.write(run_dir / "lm_eval", numbers.pop("lm_eval", None),
                                 lmeval_results.model_name(cfg.model, removed, method))
            items = [dict(r, finalist=0, recovery=method, key=key) for r in rows if r["finalist"] == i]
            write_item_rows(items, out_dir / f"{key}.items.parquet")
            write_json_atomic(out_dir / f"{key}.json", numbers)  # last: it marks the job done
            out[key] = numbers
        bar.update(len(share))
        bar.set_postfix(last=numbers.get("mean_acc", ""))

    if broker is not None and todo:
        n = len(ray.get(broker.status.remote())["actors"])
        pending = {}

        def submit(share, attempt):
            ref = broker.with_model.remote(evaluate_finalist_specs, cfg, [todo[k] for k in share], list(held_out))
            pending[ref] = (share, attempt)

        for share in _shares(list(todo), todo, n):
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
            finish(share, res)
    elif todo:
        from ghostsearch.models import load_model

        model, tok = load_model(cfg.model, dtype=cfg.dtype, device=cfg.resolved_device(),
                                trust_remote_code=cfg.trust_remote_code, revision=cfg.revision)
        share = list(todo)
        finish(share, evaluate_finalist_specs(model, tok, cfg, [todo[k] for k in share], held_out, progress))
    bar.close()
    _collect_items(run_dir, list(dict.fromkeys(keys)))
    return out


def _collect_items(run_dir: Path, keys: list[str]) -> None:
    """RUN_DIR/eval_items.parquet: the per-item predictions of every job, one table to audit
    which items a cut changed (column ``key`` = the job's eval_key)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    parts = [run_dir / "evals" / f"{k}.items.parquet" for k in keys]
    tables = [pq.read_table(p) for p in parts if p.exists()]
    if tables:
        write_parquet_atomic(run_dir / "eval_items.parquet", pa.concat_tables(tables, promote_options="default"))


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
        specs = {}  # one per objective (and per cell seed with compare.calibration_seeds), in grid order
        for c in cells:
            spec = cfg.objective_spec(c["objective"], c["seed"])
            specs.setdefault(spec.key(), spec)
        check_identity(run_dir, pool_identity(broker, cfg, list(specs.values())))
        resumed = sum((run_dir / "cells" / f"{cell_name(**c)}.json").exists() for c in cells)
        results = run_cells(cfg, broker, run_dir, cells, n_blocks, progress, on_cell=outputs.cell)
        obj = cfg.objective_spec(cells[0]["objective"], cells[0]["seed"])
        stats = {name: ray.get(broker.statistic.remote(obj, name)) for name in ("similarity", "block_influence")}
        pool_status = ray.get(broker.status.remote())
        Ledger(run_dir).compact()
        if resumed < len(cells) or not (run_dir / "pool.json").exists():  # keep the pool that did the work
            write_json_atomic(run_dir / "pool.json", pool_status)
        write_json_atomic(run_dir / "result.json", {"searchers": {r["cell"]: r for r in results},
                                                    "wall_seconds": time.monotonic() - t0,  # this invocation
                                                    "cells_resumed": resumed, "data": data_plan})
        # the finalists are evaluated on the same replicas, one share per scorer, before the pool goes
        evals = evaluate_finalists(cfg, run_dir, finalist_jobs(cfg, results), held_out, progress, broker=broker)
        release_pool(broker)
    except BaseException:
        outputs.close(ok=False)
        close_run_dir(run_dir, ok=False)
        raise
    finally:
        if started:
            ray.shutdown()
    def numbers(removed, method):
        key = eval_key(removed, method, cfg, held_out)
        return {**evals[key], "eval_key": key}

    dense = numbers([], "none")
    per_cell = {(r["cell"], m): numbers(r["removed"], m) for r in results for m in cfg.compare.recovery}
    table = comparison_table(cfg, results, per_cell, dense, data_plan)
    write_parquet_atomic(run_dir / "comparison.parquet", table)
    write_report(run_dir, table, stats, cfg, data_plan)
    for (cell, method), numbers in per_cell.items():
        outputs.finalist(cell, method, numbers)
    outputs.close()
    close_run_dir(run_dir)
    return run_dir
