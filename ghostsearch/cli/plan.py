"""``ghostsearch plan CONFIG [key=value ...]``: a run's evaluations, FLOPs, memory per actor, wall
time and device-hours, from the configs alone (no weights loaded; ghostsearch/study/plan.py)."""

from __future__ import annotations

from ghostsearch.cli.common import add_config_command


def add(sub) -> None:
    sp = add_config_command(sub, "plan", "what a run will cost, before it starts (no weights loaded)")
    sp.add_argument(
        "--model-config",
        default=None,
        help="the model's config.json or its directory (offline: plan a hub model without the hub; a hub id "
        "with a config in configs/models/ needs none), or 'hub' to read the hub's config instead of the shipped one",
    )
    sp.add_argument(
        "--measure",
        action="store_true",
        help="time two blocks and the head at the run's dtype on this device (else pool.device_tflops), "
        "and, on a local run, its fixed costs for real: a fresh process's imports and checks, "
        "Ray and the pool, probe cells, for compare two finalist shares and the report",
    )
    sp.add_argument(
        "--command",
        choices=("search", "compare", "target"),
        default=None,
        help="the command to plan (default: target when the config states target.quality's bound, target.params "
        "or target.speedup; compare when it names a grid; else search)",
    )


def run(args) -> None:
    from ghostsearch.config import load_config
    from ghostsearch.core.errors import GhostsearchError
    from ghostsearch.study.plan import format_plan, format_target_plan, plan_run, plan_target, target_stated

    cfg = load_config(args.config, args.overrides)
    if args.command == "target" or (args.command is None and target_stated(cfg)):
        tp = plan_target(cfg, args.model_config, args.measure)
        p = tp.search
        print(format_target_plan(cfg, tp))
    else:
        p = plan_run(cfg, args.model_config, args.measure, command=args.command)
        print(format_plan(cfg, p))
    if not p.fits:
        from ghostsearch.model.memplan import fixes

        raise GhostsearchError(
            f"this run does not fit: one scorer needs {p.memory.line()}; fix: {fixes(cfg, p.shape, p.memory)}"
        )
