"""The search recipe: one cell (searcher x objective x k x seed) run on the scoring pool, and
``ghostsearch search`` (one cell into a run directory).

Rerunning the same command on the same run directory resumes: the searcher replays
deterministically (same seed) and every candidate already in the ledger is answered from it,
so no ledgered candidate is scored again.
"""
from __future__ import annotations

import time
from pathlib import Path

from ghostsearch.config import Config, protected_blocks
from ghostsearch.errors import GhostsearchError
from ghostsearch.io import write_json_atomic
from ghostsearch.outputs import RunOutputs
from ghostsearch.rundir import Ledger, cell_name


def budget_driven(cls, space, params) -> bool:
    """A searcher that runs until its budget is spent (ga, bo, cbo), unlike one that ends by itself."""
    return cls.default_budget(space, cls.parse_params(params)) is not None


def build_searcher(cfg: Config, name: str, k: int, seed: int, n_blocks: int, run_dir: Path | None = None,
                   cell: str | None = None, matched: bool = False):
    """The searcher of one cell. ``matched`` (compare.budget=matched): a budget-driven searcher
    gets exactly greedy's cost at this k (greedy_cost), so searchers compare at equal cost."""
    from ghostsearch.search import Budget, Space, get_searcher, make_searcher
    from ghostsearch.search.common import greedy_cost

    params = dict(cfg.search.params.get(name) or {})
    budget = params.pop("budget", cfg.search.budget)  # search.params.<searcher>.budget overrides search.budget
    cls = get_searcher(name)
    if run_dir is not None:
        params = cls.run_params(params, run_dir, cell or name)  # files the searcher keeps in RUN_DIR
    space = Space(n_blocks, k, protected_blocks(cfg, n_blocks))
    if matched and budget_driven(cls, space, params):
        if budget is not None:
            raise GhostsearchError(f"compare.budget=matched sets {name}'s budget to greedy's cost; drop search.budget / "
                                   f"search.params.{name}.budget, or set compare.budget=own")
        budget = float(greedy_cost(space))
        need = cls.min_budget(space, cls.parse_params(params))
        if budget < need:
            raise GhostsearchError(f"compare.budget=matched gives {name} greedy's cost at k={k} ({budget:g} evaluations) "
                                   f"but {name} needs at least {need:g} to give an answer; use compare.budget=own or a larger k")
    return make_searcher(name, space, seed=seed, budget=Budget(budget, cfg.search.time_budget),
                         params=params)


class Progress:
    """A bar per searcher: evaluations done, rate, and the searcher's best so far (``told``: the
    value its history records, so the bar and result.json's history agree). Each evaluation's
    finishing time (seconds since the cell started) is kept by removed set for the history."""

    def __init__(self, total: float | None, desc: str, enabled: bool = True):
        from tqdm.auto import tqdm

        self.bar = tqdm(total=total, desc=desc, unit="eval", disable=not enabled, dynamic_ncols=True,
                        mininterval=0.5)
        self.t0 = time.monotonic()
        self.finished: dict[tuple[int, ...], float] = {}  # removed set -> seconds when its evaluation finished
        self.best, self.cached = float("inf"), "n"

    def __call__(self, row: dict) -> None:
        self.finished[tuple(row["removed"])] = time.monotonic() - self.t0
        self.cached = "y" if row["cached"] else "n"
        self.bar.update(row.get("cost") or row["fidelity"])  # a race block costs its rows only
        self.bar.set_postfix(best=f"{self.best:.4g}", cached=self.cached, refresh=False)

    def told(self, best: float) -> None:
        self.best = best
        self.bar.set_postfix(best=f"{self.best:.4g}", cached=self.cached)

    def close(self):
        self.bar.close()


def warm_start(run_dir: Path, cell: str, client, n: int) -> list[tuple[int, ...]]:
    """The warm-start sets of a cell: the n best k-sets of the shared cache when the cell first
    started, kept in RUN_DIR/warm/<cell>.json so that a resumed cell replays the same start."""
    import json

    f = run_dir / "warm" / f"{cell}.json"
    if not f.exists():
        f.parent.mkdir(exist_ok=True)
        write_json_atomic(f, [{"removed": r, "value": v} for r, v in client.best_known(n)])
    return [tuple(e["removed"]) for e in json.loads(f.read_text())]


def run_cell(cfg: Config, broker, run_dir: Path, *, searcher: str, objective: str, k: int, seed: int,
             n_blocks: int, progress: bool = True, matched: bool = False) -> dict:
    """Run one searcher on one objective/k/seed through the pool; ledger rows tagged with the cell name."""
    from ghostsearch.pool.pool import PoolClient
    from ghostsearch.search import run

    cell = cell_name(searcher, objective, k, seed)
    s = build_searcher(cfg, searcher, k, seed, n_blocks, run_dir, cell, matched=matched)
    ledger = Ledger(run_dir)
    client = PoolClient(broker, cfg.objective_spec(objective, seed), ledger, cell, seed, cfg.model, cfg.dtype, k=k,
                        sources={"perplexity": cfg.calibration_spec("perplexity")})  # text statistics (lorp)
    client.load_known(run_dir)
    if getattr(s.params, "warm_start", False):
        s.warm = warm_start(run_dir, cell, client, s.params.warm_n)
    bar = Progress(s.budget.evaluations, cell, enabled=progress)
    client.on_result = bar
    t0 = bar.t0
    stamps: list[float] = []  # per history entry: when that candidate's own evaluation finished

    def on_told(candidates) -> None:
        now = time.monotonic() - t0
        stamps.extend(bar.finished.get(tuple(c.removed), now) for c in candidates)
        bar.told(s.best_value)

    try:
        run(s, client, oracle=client, on_told=on_told)
        dense = client.dense_value()  # the reference, on the same calibration data
    finally:
        bar.close()
        ledger.close()
    removed, value = s.result()
    if removed is None:
        raise GhostsearchError(f"{cell} produced no answer within its budget; raise search.budget or search.time_budget")
    return {"cell": cell, "searcher": searcher, "objective": objective, "k": k, "seed": seed,
            "removed": list(removed), "value": value, "evaluations": client.evaluations,
            "budget_used": s.used, "cache_hits": client.cache_hits, "wall_seconds": time.monotonic() - t0,
            "history": [{"budget_used": u, "seconds": t, "best_value": v if v != float("inf") else None}
                        for (u, v), t in zip(s.history, stamps)],
            "model": {"name": cfg.model, "blocks": n_blocks, "dtype": cfg.dtype},
            "direction": "lower is better", "dense_value": dense,
            "relative_change": (value - dense) / abs(dense) if dense else None,
            "budget_mode": "matched" if matched else "own", "budget": s.budget.evaluations,
            "warm_start": [list(w) for w in getattr(s, "warm", [])],
            "race": s.race_report()}  # raced or exact (race: auto), rows, candidates cut without the bound


def search(cfg: Config, address: str | None = None, progress: bool = True) -> dict:
    """`ghostsearch search`: the configured searcher on the pool; writes RUN_DIR."""
    import ray

    from ghostsearch.config import check_model_fit
    from ghostsearch.pool.pool import check_local_capacity, connect, find_pool, pool_identity, start_pool
    from ghostsearch.rundir.layout import check_identity, check_run_dir, close_run_dir

    address = address or cfg.pool.address
    from ghostsearch.dataplan import announce, plan

    n_blocks = check_model_fit(cfg)
    build_searcher(cfg, cfg.searcher, cfg.k, cfg.seed, n_blocks)  # all config errors before any Ray work
    check_run_dir(cfg)
    check_local_capacity(cfg, address)  # no run directory for a local pool that cannot start
    data_plan = plan(cfg, [cfg.objective], evaluate=False, repair=False)
    announce(data_plan)
    outputs = RunOutputs(cfg, "search")  # RUN_DIR (staged when out= is s3:// or gs://) and the trackers
    run_dir, started, ok = outputs.dir, False, False
    try:
        started = connect(address, dashboard=cfg.pool.dashboard)
        broker = find_pool(cfg.pool.name) if cfg.pool.name else start_pool(cfg)
        check_identity(run_dir, pool_identity(broker, cfg, [cfg.objective_spec()]))
        res = run_cell(cfg, broker, run_dir, searcher=cfg.searcher, objective=cfg.objective, k=cfg.k,
                       seed=cfg.seed, n_blocks=n_blocks, progress=progress)
        outputs.cell(res)
        write_json_atomic(run_dir / "pool.json", ray.get(broker.status.remote()))
        result = {"cells": {res["cell"]: res}, "data": data_plan}
        write_json_atomic(run_dir / "result.json", result)
        Ledger(run_dir).compact()
        ok = True
        return result
    finally:
        outputs.close(ok)
        close_run_dir(run_dir, ok)
        if started:
            ray.shutdown()
