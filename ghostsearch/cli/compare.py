"""``ghostsearch compare CONFIG``: searchers x objectives x k x seeds on one pool, evaluated downstream."""

from __future__ import annotations

from ghostsearch.cli.common import add_config_command, print_json


def add(sub) -> None:
    sp = add_config_command(
        sub, "compare", "a grid of searchers x objectives x k x seeds on one pool, evaluated downstream"
    )
    sp.add_argument("--address", default=None, help="Ray cluster address (default: $RAY_ADDRESS or a local Ray)")
    sp.add_argument("--limit", type=int, default=None, help="examples per downstream task (quick runs)")
    sp.add_argument("--no-progress", action="store_true", help="no progress bars")


def run(args) -> None:
    from ghostsearch.config import load_config
    from ghostsearch.study.compare import compare

    overrides = list(args.overrides) + ([f"eval.limit={args.limit}"] if args.limit is not None else [])
    cfg = load_config(args.config, overrides)
    run_dir = compare(cfg, address=args.address, progress=not args.no_progress)
    print_json(
        {"out": str(run_dir), "comparison": str(run_dir / "comparison.parquet"), "report": str(run_dir / "report.md")}
    )
