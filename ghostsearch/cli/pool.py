"""``ghostsearch pool up|down|status``: a named scorer pool that outlives one job."""

from __future__ import annotations

import os

from ghostsearch.cli.common import print_json
from ghostsearch.core.errors import GhostsearchError


def add(sub) -> None:
    sp = sub.add_parser("pool", help="a named scorer pool that outlives one job: up | down | status")
    sp.add_argument("action", choices=["up", "down", "status"], help="start, stop or inspect the pool")
    sp.add_argument("config", nargs="?", help="YAML config (pool up)")
    sp.add_argument("overrides", nargs="*", help="key=value overrides (pool up)")
    sp.add_argument("--name", default=None, help="pool name (default: pool.name or 'ghostsearch')")
    sp.add_argument("--address", default=None, help="Ray cluster address (default: $RAY_ADDRESS)")


def run(args) -> None:
    import ray

    from ghostsearch.config import load_config
    from ghostsearch.pool.pool import find_pool, pool_exists, stop_pool
    from ghostsearch.pool.session import PoolSession

    if args.action == "up":
        if not args.config:
            raise GhostsearchError("pool up needs a CONFIG: ghostsearch pool up CONFIG pool.name=NAME")
        cfg = load_config(args.config, args.overrides)
        name = args.name or cfg.pool.name or "ghostsearch"
        address = args.address or cfg.pool.address or os.environ.get("RAY_ADDRESS")
        if not address:  # a pool on a Ray that dies with this process would outlive nothing
            raise GhostsearchError(
                "pool up needs a running Ray cluster: `ray start --head`, then pass --address or set RAY_ADDRESS"
            )
        session = PoolSession(cfg, address).connect()  # a cluster's Ray: the session started none
        if pool_exists(name):
            raise GhostsearchError(
                f"a pool named {name!r} is already up; use it, or `ghostsearch pool down --name {name}`"
            )
        broker = session.start(name=name, detached=True)  # outlives this process: not released
        print_json({"pool": name, "actors": ray.get(broker.ready.remote())})
        return
    if not (args.address or os.environ.get("RAY_ADDRESS")):
        raise GhostsearchError(f"pool {args.action} needs the cluster's address: --address or RAY_ADDRESS")
    PoolSession(None, args.address).connect()  # no config: Ray only, no pool of this process's own
    name = args.name or "ghostsearch"
    if args.action == "down":
        print_json({"pool": name, "removed": stop_pool(name)})
    else:
        print_json(ray.get(find_pool(name).pool_status.remote()).to_dict())
