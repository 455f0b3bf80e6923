"""``ghostsearch search CONFIG``: the configured searcher on the scoring pool; writes RUN_DIR."""

from __future__ import annotations

from ghostsearch.cli.common import add_config_command, print_json


def add(sub) -> None:
    sp = add_config_command(sub, "search", "run the configured searcher on the scoring pool; writes RUN_DIR")
    sp.add_argument("--address", default=None, help="Ray cluster address (default: $RAY_ADDRESS or a local Ray)")
    sp.add_argument("--no-progress", action="store_true", help="no progress bar")


def run(args) -> None:
    from ghostsearch.config import load_config
    from ghostsearch.run.runner import search

    cfg = load_config(args.config, args.overrides)
    res = search(cfg, address=args.address, progress=not args.no_progress)
    for cell, r in res["cells"].items():  # result.json's cells (CellResult.to_dict)
        change = r["relative_change"]
        print_json(
            {
                "cell": cell,
                "removed": r["removed"],
                "value": r["value"],
                "dense_value": r["dense_value"],
                "relative_change": None if change is None else round(change, 4),
                "evaluations": r["evaluations"],
                "wall_seconds": round(r["wall_seconds"], 2),
                "out": cfg.out,
            }
        )
