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
from ghostsearch.rundir import Ledger, cell_name, open_run_dir


def build_searcher(cfg: Config, name: str, k: int, seed: int, n_blocks: int, run_dir: Path | None = None,
                   cell: str | None = None):
    from ghostsearch.search import Budget, Space, get_searcher, make_searcher

    params = dict(cfg.search.params.get(name) or {})
    budget = params.pop("budget", cfg.search.budget)  # search.params.<searcher>.budget overrides search.budget
    cls = get_searcher(name)
    if run_dir is not None and "storage" in {f for f in getattr(cls.Params, "__dataclass_fields__", {})}:
        params.setdefault("storage", str(run_dir / f"optuna-{cell or name}.log"))
    space = Space(n_blocks, k, protected_blocks(cfg, n_blocks))
    return make_searcher(name, space, seed=seed, budget=Budget(budget, cfg.search.time_budget),
                         params=params)


class Progress:
    """A bar per searcher: evaluations done, best so far, rate."""

    def __init__(self, total: float | None, desc: str, enabled: bool = True):
        from tqdm.auto import tqdm

        self.bar = tqdm(total=total, desc=desc, unit="eval", disable=not enabled, dynamic_ncols=True,
                        mininterval=0.5)
        self.best = float("inf")

    def __call__(self, row: dict) -> None:
        if row["fidelity"] >= 1.0 and row["value"] < self.best:
            self.best = row["value"]
        self.bar.update(row["fidelity"])
        self.bar.set_postfix(best=f"{self.best:.4g}", cached="y" if row["cached"] else "n", refresh=False)

    def close(self):
        self.bar.close()


def run_cell(cfg: Config, broker, run_dir: Path, *, searcher: str, objective: str, k: int, seed: int,
             n_blocks: int, progress: bool = True) -> dict:
    """Run one searcher on one objective/k/seed through the pool; ledger rows tagged with the cell name."""
    from ghostsearch.pool.pool import PoolClient
    from ghostsearch.search import run

    cell = cell_name(searcher, objective, k, seed)
    s = build_searcher(cfg, searcher, k, seed, n_blocks, run_dir, cell)
    ledger = Ledger(run_dir)
    client = PoolClient(broker, cfg.objective_spec(objective), ledger, cell, seed, cfg.model, cfg.dtype)
    client.load_known(run_dir)
    bar = Progress(s.budget.evaluations, cell, enabled=progress)
    client.on_result = bar
    t0 = time.monotonic()
    try:
        run(s, client, oracle=client)
    finally:
        bar.close()
        ledger.close()
    removed, value = s.result()
    if removed is None:
        raise GhostsearchError(f"{cell} produced no answer within its budget; raise search.budget or search.time_budget")
    return {"cell": cell, "searcher": searcher, "objective": objective, "k": k, "seed": seed,
            "removed": list(removed), "value": value, "evaluations": client.evaluations,
            "budget_used": s.used, "cache_hits": client.cache_hits, "wall_seconds": time.monotonic() - t0,
            "history": s.history}


def search(cfg: Config, address: str | None = None, progress: bool = True) -> dict:
    """`ghostsearch search`: the configured searcher on the pool; writes RUN_DIR."""
    import ray

    from ghostsearch.models import model_depth
    from ghostsearch.pool.pool import connect, find_pool, start_pool

    address = address or cfg.pool.address
    n_blocks = model_depth(cfg.model, cfg.trust_remote_code)
    build_searcher(cfg, cfg.searcher, cfg.k, cfg.seed, n_blocks)  # all config errors before any Ray work
    run_dir = open_run_dir(cfg, "search")
    started = connect(address, dashboard=cfg.pool.dashboard)
    try:
        broker = find_pool(cfg.pool.name) if cfg.pool.name else start_pool(cfg)
        res = run_cell(cfg, broker, run_dir, searcher=cfg.searcher, objective=cfg.objective, k=cfg.k,
                       seed=cfg.seed, n_blocks=n_blocks, progress=progress)
        write_json_atomic(run_dir / "pool.json", ray.get(broker.status.remote()))
        result = {"searchers": {res["cell"]: res}}
        write_json_atomic(run_dir / "result.json", result)
        Ledger(run_dir).compact()
        return result
    finally:
        if started:
            ray.shutdown()
