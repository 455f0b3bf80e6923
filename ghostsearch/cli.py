"""The ``ghostsearch`` command. Errors a user can cause print one line (no traceback unless --debug)."""
from __future__ import annotations

import argparse
import json
import os
import sys

from ghostsearch.errors import GhostsearchError


def _quiet_libraries() -> None:
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    try:
        import transformers

        transformers.utils.logging.set_verbosity_error()
        transformers.utils.logging.disable_progress_bar()
    except Exception:  # noqa: BLE001
        pass


def _parse_remove(text: str) -> list[int]:
    try:
        return [int(x) for x in text.split(",") if x.strip() != ""]
    except ValueError:
        raise GhostsearchError(f"--remove {text!r} is not a comma-separated list of block indices, e.g. 3,7,12") from None


def cmd_score(args) -> None:
    from ghostsearch.config import calibration_spec, load_config
    from ghostsearch.scoring import check_removed, scorer_from_config

    cfg = load_config(args.config, args.overrides)
    removed = _parse_remove(args.remove)
    if len(removed) != len(set(removed)):  # cheap checks before loading the model
        check_removed(removed, 10**9)
    sc = scorer_from_config(cfg, threads=args.threads)
    removed = check_removed(removed, sc.stack.n_blocks)
    key = sc.prepare(cfg.objective, calibration_spec(cfg), cfg.objective_params)
    r = sc.score(key, removed)
    print(json.dumps({"objective": cfg.objective, "removed": list(removed), "value": r["value"],
                      "tokens": r["tokens"], "seconds": round(r["seconds"], 4)}))


def cmd_search(args) -> None:
    from ghostsearch.config import load_config
    from ghostsearch.runs import search

    cfg = load_config(args.config, args.overrides)
    res = search(cfg, address=args.address, progress=not args.no_progress)
    for cell, r in res["searchers"].items():
        print(json.dumps({"cell": cell, "removed": r["removed"], "value": r["value"],
                          "evaluations": r["evaluations"], "wall_seconds": round(r["wall_seconds"], 2),
                          "out": cfg.out}))


def cmd_compare(args) -> None:
    from ghostsearch.compare import compare
    from ghostsearch.config import load_config

    cfg = load_config(args.config, args.overrides)
    if args.limit is not None:
        cfg.eval.limit = args.limit
    run_dir = compare(cfg, address=args.address, progress=not args.no_progress)
    print(json.dumps({"out": str(run_dir), "comparison": str(run_dir / "comparison.parquet"),
                      "report": str(run_dir / "report.md")}))


def cmd_pool(args) -> None:
    import ray

    from ghostsearch.config import load_config
    from ghostsearch.pool.pool import connect, find_pool, start_pool, stop_pool

    if args.action == "up":
        if not args.config:
            raise GhostsearchError("pool up needs a CONFIG: ghostsearch pool up CONFIG pool.name=NAME")
        cfg = load_config(args.config, args.overrides)
        name = args.name or cfg.pool.name or "ghostsearch"
        address = args.address or cfg.pool.address or os.environ.get("RAY_ADDRESS")
        if not address:  # a pool on a Ray that dies with this process would outlive nothing
            raise GhostsearchError("pool up needs a running Ray cluster: `ray start --head`, then pass --address "
                                   "or set RAY_ADDRESS")
        connect(address, dashboard=cfg.pool.dashboard)
        try:
            find_pool(name)
            raise GhostsearchError(f"a pool named {name!r} is already up; use it, or `ghostsearch pool down --name {name}`")
        except GhostsearchError as e:
            if "already up" in str(e):
                raise
        broker = start_pool(cfg, name=name, detached=True)
        print(json.dumps({"pool": name, "actors": ray.get(broker.ready.remote())}))
        return
    if not (args.address or os.environ.get("RAY_ADDRESS")):
        raise GhostsearchError(f"pool {args.action} needs the cluster's address: --address or RAY_ADDRESS")
    connect(args.address, dashboard=False)
    name = args.name or "ghostsearch"
    if args.action == "down":
        print(json.dumps({"pool": name, "removed": stop_pool(name)}))
    else:
        print(json.dumps(ray.get(find_pool(name).status.remote()), default=str))


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="ghostsearch", description="Depth-pruning search for LLMs on Ray.")
    p.add_argument("--debug", action="store_true", help="show tracebacks")
    sub = p.add_subparsers(dest="cmd", required=True)

    def with_config(name, help_):
        sp = sub.add_parser(name, help=help_)
        sp.add_argument("config", help="YAML config (see configs/)")
        sp.add_argument("overrides", nargs="*", help="key=value overrides, e.g. k=6 calibration.n_seq=16")
        return sp

    sp = with_config("score", "score one removed set; prints one JSON line")
    sp.add_argument("--remove", required=True, help="comma-separated block indices, e.g. 3,7,12 ('' = dense)")
    sp.add_argument("--threads", type=int, default=None)
    sp.set_defaults(func=cmd_score)
    sp = with_config("search", "run the configured searcher on the scoring pool; writes RUN_DIR")
    sp.add_argument("--address", default=None, help="Ray cluster address (default: $RAY_ADDRESS or a local Ray)")
    sp.add_argument("--no-progress", action="store_true")
    sp.set_defaults(func=cmd_search)

    sp = with_config("compare", "a grid of searchers x objectives x k x seeds on one pool, evaluated downstream")
    sp.add_argument("--address", default=None)
    sp.add_argument("--limit", type=int, default=None, help="examples per downstream task (quick runs)")
    sp.add_argument("--no-progress", action="store_true")
    sp.set_defaults(func=cmd_compare)

    sp = sub.add_parser("pool", help="a named scorer pool that outlives one job: up | down | status")
    sp.add_argument("action", choices=["up", "down", "status"])
    sp.add_argument("config", nargs="?", help="YAML config (pool up)")
    sp.add_argument("overrides", nargs="*")
    sp.add_argument("--name", default=None, help="pool name (default: pool.name or 'ghostsearch')")
    sp.add_argument("--address", default=None)
    sp.set_defaults(func=cmd_pool)

    for extra in EXTRA_COMMANDS:
        extra(sub, with_config)
    return p


EXTRA_COMMANDS: list = []


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    parser = build_parser()
    args, extra = parser.parse_known_args(argv)
    # key=value overrides may come after flags too: `search CONFIG --no-progress k=6`
    stray = [a for a in extra if a.startswith("-") or "=" not in a or not hasattr(args, "overrides")]
    if stray:
        parser.error(f"unrecognized arguments: {' '.join(stray)}")
    if extra:
        args.overrides = list(args.overrides or []) + extra
    _quiet_libraries()
    try:
        args.func(args)
    except GhostsearchError as e:
        if args.debug:
            raise
        print(f"ghostsearch: error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("ghostsearch: interrupted", file=sys.stderr)
        return 130
    return 0


EXTRA_COMMANDS.append(__import__("ghostsearch.eval_cli", fromlist=["register"]).register)  # ghostsearch eval
from ghostsearch.recovery import cli as _recovery_cli  # noqa: E402,F401  (recover, export)

if __name__ == "__main__":
    sys.exit(main())
