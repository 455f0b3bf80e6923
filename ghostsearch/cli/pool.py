"""``ghostsearch pool up|down|status``: a named scorer pool that outlives one job. ``pool ceiling``: the pool's
ceiling on this cluster, measured with stand-in scorers (pool/standin.py, docs/pool.md)."""

from __future__ import annotations

import os

from ghostsearch.cli.common import positive_int, print_json
from ghostsearch.core.errors import GhostsearchError


def add(sub) -> None:
    sp = sub.add_parser(
        "pool", help="a named scorer pool that outlives one job: up | down | status; its ceiling on this cluster"
    )
    sp.add_argument(
        "action",
        choices=["up", "down", "status", "ceiling"],
        help="start, stop or inspect the pool; ceiling: evaluations/s of N stand-in scorers against the ideal",
    )
    sp.add_argument("config", nargs="?", help="YAML config (pool up, pool ceiling)")
    sp.add_argument("overrides", nargs="*", help="key=value overrides (pool up, pool ceiling)")
    sp.add_argument("--name", default=None, help="pool name (default: pool.name or 'ghostsearch')")
    sp.add_argument("--address", default=None, help="Ray cluster address (default: $RAY_ADDRESS)")
    c = sp.add_argument_group("pool ceiling (stand-in scorers: no model, their cost slept)")
    c.add_argument("--actors", default=None, help="pool sizes to measure, e.g. 2,4,8 (default: pool.actors)")
    c.add_argument("--row-ms", type=float, default=0.05, help="a stand-in's ms per calibration row per candidate")
    c.add_argument("--call-ms", type=float, default=2.0, help="a stand-in's ms per scorer call")
    c.add_argument("--seconds", type=float, default=2.0, help="the throughput batch's length at the ideal rate")
    c.add_argument("--blocks", type=positive_int, default=None, help="the model's blocks (default: its config's)")
    c.add_argument("--no-search", action="store_true", help="throughput only, not the config's searcher")
    c.add_argument(
        "--floor",
        type=int,
        default=0,
        metavar="LOOKS",
        help="also LOOKS bare rounds of a look through Ray alone (no ghostsearch code): Ray's own floor",
    )
    c.add_argument("--profile", action="store_true", help="cProfile the broker and the driver over the throughput")


def run(args) -> None:
    import ray

    from ghostsearch.config import load_config
    from ghostsearch.pool.pool import find_pool, pool_exists, stop_pool
    from ghostsearch.pool.session import PoolSession

    if args.action == "ceiling":
        ceiling(args)
        return
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


def ceiling(args) -> None:
    """``pool ceiling [CONFIG] [key=value ...]``: the ceiling table, each part's numbers as a JSON line first."""
    import tempfile

    from ghostsearch.config import load_config
    from ghostsearch.model.models import model_info
    from ghostsearch.pool.standin import Cost, Profiles, ceiling, ceiling_table, parse_actors

    overrides = list(args.overrides or [])
    config = args.config
    if config and "=" in config and not os.path.exists(config):  # `pool ceiling k=4`: no CONFIG, overrides only
        overrides, config = [config, *overrides], None
    if args.address:
        overrides.append(f"pool.address={args.address}")
    cfg = load_config(config, overrides)
    actors = parse_actors(args.actors or str(cfg.pool.actors))
    if args.row_ms < 0 or args.call_ms < 0 or args.row_ms + args.call_ms <= 0 or args.seconds <= 0 or args.floor < 0:
        raise GhostsearchError("--row-ms and --call-ms must be >= 0 with a positive sum, --seconds > 0, --floor >= 0")
    n_blocks = args.blocks or model_info(cfg.model, cfg.trust_remote_code)[0]
    if n_blocks - len(set(cfg.search.protected)) < cfg.k + 1:
        raise GhostsearchError(f"k={cfg.k} leaves too few of the model's {n_blocks} blocks to search")
    with tempfile.TemporaryDirectory(prefix="gs-ceiling-") as tmp:
        rows = ceiling(
            cfg,
            actors,
            Cost(args.row_ms, args.call_ms),
            n_blocks,
            seconds=args.seconds,
            search=not args.no_search,
            floor=args.floor,
            profile=Profiles() if args.profile else None,
            tmp=tmp,
            say=print_json,
        )
    print(ceiling_table(rows), flush=True)
