"""``ghostsearch score CONFIG --remove 3,7,12``: one removed set scored; one JSON line."""

from __future__ import annotations

from ghostsearch.cli.common import add_config_command, parse_remove, positive_int, print_json


def add(sub) -> None:
    sp = add_config_command(sub, "score", "score one removed set; prints one JSON line")
    sp.add_argument("--remove", required=True, help="comma-separated block indices, e.g. 3,7,12 ('' = dense)")
    sp.add_argument("--threads", type=positive_int, default=None, help="torch threads (default: torch's)")


def run(args) -> None:
    from ghostsearch.config import check_model_fit, load_config
    from ghostsearch.model.stack import check_removed
    from ghostsearch.recovery.aware import prepare
    from ghostsearch.scoring import scorer_from_config

    cfg = load_config(args.config, args.overrides)
    removed = parse_remove(args.remove)
    if len(removed) != len(set(removed)):  # cheap checks before loading the model
        check_removed(removed, 10**9)
    check_removed(removed, check_model_fit(cfg))  # range and context before the weights load
    sc = scorer_from_config(cfg, threads=args.threads)
    blocks = check_removed(removed, sc.stack.n_blocks)
    r = sc.score(prepare(sc, cfg.objective_spec()), blocks)
    print_json(
        {
            "objective": cfg.objective,
            "removed": list(blocks),
            "value": r.value,
            "tokens": r.tokens,
            "seconds": round(r.seconds, 4),
        }
    )
