"""Where a quick search's fixed cost goes: every step a `ghostsearch search` takes before and after
its searcher, timed in order in one process (the cold interpreter first, in a subprocess).

  python bench/startup.py [--config configs/smollm2-quick.yaml] [--actors 2]

Prints one line per step (seconds, share of the total): a cold `import ghostsearch.cli`, then torch,
transformers and ray imports, the config checks (model config, searcher), the data plan, Ray's
start (ray.init of a local Ray), the pool (actors load the model and prepare the calibration data),
the identity check (model digest, calibration token digests), the dense value, Ray's shutdown, and
the cached rerun's own check (runner.answered: reads result.json, identity.json and the ledger).
No searcher runs: what is left of a search's wall time is its evaluations. The numbers depend on
the machine's load (state it); compare steps within one run.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time

import benchenv  # noqa: F401  (the repository on sys.path, offline HF, ../shared/data as the data directory)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--config", default="configs/smollm2-quick.yaml")
    ap.add_argument("--actors", type=int, default=None, help="pool.actors (default: the config's)")
    a = ap.parse_args()
    steps: list[tuple[str, float]] = []

    def step(name: str, t0: float) -> float:
        now = time.perf_counter()
        steps.append((name, now - t0))
        return now

    t = time.perf_counter()
    subprocess.run([sys.executable, "-c", "import ghostsearch.cli.main"], check=True)
    t = step("cold interpreter + import ghostsearch.cli.main (subprocess)", t)
    import torch  # noqa: F401

    t = step("import torch", t)
    import transformers  # noqa: F401

    t = step("import transformers", t)
    import ray

    t = step("import ray", t)
    from ghostsearch.config import build_searcher, check_model_fit, load_config
    from ghostsearch.core.errors import GhostsearchError
    from ghostsearch.data.dataplan import plan
    from ghostsearch.pool.client import PoolClient
    from ghostsearch.pool.session import PoolSession
    from ghostsearch.run.runner import answered
    from ghostsearch.rundir import Ledger

    out = tempfile.mkdtemp(prefix="startup-bench-")
    over = [f"out={out}/run", "pool.dashboard=false"] + ([f"pool.actors={a.actors}"] if a.actors else [])
    cfg = load_config(a.config, over)
    t = step("import ghostsearch's pool/runner modules + load the config", t)
    n_blocks = check_model_fit(cfg)
    build_searcher(cfg, cfg.searcher, cfg.k, cfg.seed, n_blocks)
    t = step("config checks (model config, searcher)", t)
    plan(cfg, [cfg.objective], evaluate=False, repair=False)
    t = step("data plan (which data, from where)", t)
    session = PoolSession(cfg)  # the run's session, one step at a time
    for attempt in range(3):  # Ray gives its node 30 s to start: a loaded machine can miss it
        try:
            session.connect()
            break
        except GhostsearchError:
            if attempt == 2:
                raise
    t = step(f"ray.init (a local Ray; {attempt + 1} attempt(s))", t)
    with session:
        broker = session.start()
        ray.get(broker.pool_status.remote())
        t = step(f"start the pool ({cfg.pool.actors} actors: load the model, each)", t)
        spec = cfg.objective_spec()
        session.identity([spec])
        t = step("identity (model digest, calibration data prepared + digested)", t)
        from pathlib import Path

        Path(cfg.out).mkdir(parents=True)
        client = PoolClient(broker, spec, Ledger(cfg.out), "bench", 0, cfg.model, cfg.dtype, k=cfg.k)
        client.dense_value()
        t = step("dense value (one evaluation)", t)
        session.release()
        t = step("release the pool + ray.shutdown", t)
    answered(cfg, "nothing")
    step("cached rerun check (runner.answered)", t)
    total = sum(s for _, s in steps)
    print(f"fixed cost of a search, {a.config} ({cfg.pool.actors} actors, torch threads {cfg.pool.threads}):")
    for name, s in steps:
        print(f"  {s:7.2f} s  {100 * s / total:5.1f}%  {name}")
    print(f"  {total:7.2f} s  total")


if __name__ == "__main__":
    main()
