"""``ghostsearch target CONFIG``: the largest k that keeps a stated quality (the config's ``target:``
block), searched, repaired and certified (docs/target.md); its last line says what was certified."""

from __future__ import annotations

from ghostsearch.cli.common import add_config_command


def add(sub) -> None:
    sp = add_config_command(
        sub, "target", "the largest k that keeps target.quality at target.level (certified); writes RUN_DIR"
    )
    sp.add_argument("--address", default=None, help="Ray cluster address (default: $RAY_ADDRESS or a local Ray)")
    sp.add_argument("--no-progress", action="store_true", help="no progress bars")


def run(args) -> None:
    from ghostsearch.config import load_config
    from ghostsearch.study.target import target

    cfg = load_config(args.config, args.overrides)
    block = target(cfg, address=args.address, progress=not args.no_progress)
    print(f"RUN_DIR: {cfg.out} (result.json's target block, report.md)")
    print(block["statement"], flush=True)
