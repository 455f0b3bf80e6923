"""Run directories and the search recipe.

RUN_DIR/config.yaml (resolved) · env.json · ledger/ (Parquet parts) · result.json.
Rerunning the same command on the same run directory resumes: the searcher replays
deterministically (same seed) and every candidate already in the ledger is answered from it,
so no ledgered candidate is scored again.
"""
from __future__ import annotations

import json
import os
import platform
import subprocess
import time
from pathlib import Path

from ghostsearch.config import Config, load_config, protected_blocks, save_config
from ghostsearch.errors import GhostsearchError


def open_run_dir(cfg: Config, kind: str) -> Path:
    """Create RUN_DIR or check that an existing one was written by the same config."""
    out = Path(cfg.out)
    cfg_file = out / "config.yaml"
    if cfg_file.exists():
        old = load_config(str(cfg_file))
        if old.fingerprint() != cfg.fingerprint():
            raise GhostsearchError(
                f"run directory {out} was written by a different config; choose another out= or delete {out}")
    elif out.exists() and any(out.iterdir()):
        raise GhostsearchError(f"{out} exists and is not a ghostsearch run directory; choose another out=")
    out.mkdir(parents=True, exist_ok=True)
    save_config(cfg, cfg_file)
    write_env(out, kind)
    return out


def write_env(out: Path, kind: str) -> None:
    import torch

    def ver(mod):
        try:
            return __import__(mod).__version__
        except Exception:  # noqa: BLE001
            return None

    try:
        commit = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True,
                                cwd=Path(__file__).parent, timeout=5).stdout.strip() or None
    except Exception:  # noqa: BLE001
        commit = None
    env = {"kind": kind, "time": time.time(), "python": platform.python_version(), "platform": platform.platform(),
           "git_commit": commit, "cpu_count": os.cpu_count(),
           "cuda": torch.cuda.is_available(),
           "devices": [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())],
           "versions": {m: ver(m) for m in ("torch", "transformers", "ray", "optuna", "deap", "pyarrow", "lm_eval")}}
    (out / "env.json").write_text(json.dumps(env, indent=2))


def write_json_atomic(path: Path, data) -> None:
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(json.dumps(data, indent=2, default=float))
    os.replace(tmp, path)


def model_depth(cfg: Config) -> int:
    """Number of decoder blocks, from the model's config only (no weights loaded)."""
    from transformers import AutoConfig

    from ghostsearch.models import model_path

    path, _ = model_path(cfg.model)
    try:
        c = AutoConfig.from_pretrained(path, trust_remote_code=cfg.trust_remote_code)
    except Exception as e:  # noqa: BLE001
        raise GhostsearchError(f"cannot read the config of model {cfg.model!r}: {str(e).splitlines()[0]}") from None
    c = getattr(c, "text_config", None) or c
    return int(c.num_hidden_layers)


def build_searcher(cfg: Config, name: str, k: int, seed: int, n_blocks: int, run_dir: Path | None = None,
                   cell: str | None = None):
    from ghostsearch.search.base import Budget, Space, get_searcher, make_searcher

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
    from ghostsearch.pool.ledger import Ledger
    from ghostsearch.pool.pool import PoolClient, objective_spec
    from ghostsearch.search.base import run

    cell = f"{searcher}-{objective}-k{k}-s{seed}"
    s = build_searcher(cfg, searcher, k, seed, n_blocks, run_dir, cell)
    ledger = Ledger(run_dir)
    client = PoolClient(broker, objective_spec(cfg, objective), ledger, cell, seed, cfg.model, cfg.dtype)
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
            "history": s.history, **({"extra": s.report()} if hasattr(s, "report") else {})}


def search(cfg: Config, address: str | None = None, progress: bool = True) -> dict:
    """`ghostsearch search`: the configured searcher on the pool; writes RUN_DIR."""
    import ray

    from ghostsearch.pool.pool import connect, find_pool, start_pool

    address = address or cfg.pool.address
    n_blocks = model_depth(cfg)
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
        from ghostsearch.pool.ledger import Ledger

        Ledger(run_dir).compact()
        return result
    finally:
        if started:
            ray.shutdown()
