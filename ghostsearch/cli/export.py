"""``ghostsearch export (RUN_DIR | CONFIG --remove 3,4,5) --method M --out DIR [--force]``: a
pruned (and repaired) model directory; from a run directory the best finalist unless --remove."""

from __future__ import annotations

from pathlib import Path

from ghostsearch.cli.common import parse_remove, positive_int, print_json
from ghostsearch.core.errors import GhostsearchError
from ghostsearch.recovery import RECOVERY


def add(sub) -> None:
    sp = sub.add_parser("export", help="write a pruned (and repaired) model directory")
    sp.add_argument("source", help="a run directory, or a YAML config with --remove")
    sp.add_argument("overrides", nargs="*", help="key=value config overrides")
    sp.add_argument("--remove", default=None, help="comma-separated block indices, e.g. 3,4,5")
    sp.add_argument("--method", choices=RECOVERY.names(), required=True, help="repair to apply before writing")
    sp.add_argument("--out", required=True, help="the model directory to write")
    sp.add_argument(
        "--force",
        action="store_true",
        help="replace --out if it is a previous ghostsearch export (never a run directory or another directory)",
    )
    sp.add_argument("--threads", type=positive_int, default=None, help="torch threads (default: torch's)")


def run(args) -> Path:
    import torch
    from tqdm.auto import tqdm

    from ghostsearch.config import load_config
    from ghostsearch.core.logs import progress_enabled
    from ghostsearch.model.models import load_configured
    from ghostsearch.model.stack import Stack, check_removed
    from ghostsearch.recovery.export import check_target, export
    from ghostsearch.recovery.repair import fit
    from ghostsearch.rundir import finalists, run_config

    src, out = Path(args.source), args.out
    check_target(out, args.force)  # before any model work
    threads = args.threads
    if src.is_dir():
        from ghostsearch.rundir import scoring_settings

        cfg, threads = scoring_settings(src, run_config(src, args.overrides), args.threads)  # the search's dtype
        removed = parse_remove(args.remove) if args.remove is not None else list(finalists(src)[0][1])
        objectives = list(dict.fromkeys([cfg.objective] + list(cfg.compare.objectives or [])))
    else:
        if args.remove is None:
            raise GhostsearchError(
                f"export from a config file needs --remove, e.g. --remove 3,4,5 ({src} is not a run directory)"
            )
        cfg, removed = load_config(str(src), args.overrides), parse_remove(args.remove)
        objectives = []
    from ghostsearch.config import check_model_fit, check_repairs

    check_removed(removed, check_model_fit(cfg))  # a repeated or out-of-range block: before the data and the model
    check_repairs(cfg, "--method", [args.method])
    from ghostsearch.rundir.dataplan import announce, plan

    announce(plan(cfg, objectives, evaluate=False, repair=args.method != "none"))  # missing data: one line, now
    if threads:
        torch.set_num_threads(threads)
    bar = tqdm(total=3, desc="export: load model", unit="step", disable=not progress_enabled())
    model, tok = load_configured(cfg)
    blocks = check_removed(removed, Stack(model).n_blocks)
    bar.update(1)
    bar.set_description(f"export: fit {args.method}")
    ops = fit(model, tok, blocks, cfg, args.method)
    bar.update(1)
    bar.set_description(f"export: write {out}")
    path = export(
        model,
        blocks,
        args.method,
        ops,
        out,
        force=args.force,
        tokenizer=tok,
        info=card_info(cfg, args.method, objectives),
    )
    bar.update(1)
    bar.close()
    print_json(
        {
            "out": str(path),
            "method": args.method,
            "removed": list(blocks),
            "blocks": Stack(model).n_blocks - len(blocks),
        }
    )
    return path


def card_info(cfg, method: str, objectives=()) -> dict:
    """What the model card and recovery.json say about where the export came from: the repair's
    data and (from a run directory, ``objectives``) the search's calibration data."""
    from ghostsearch.recovery.repair import recovery_from_config, repair_spec
    from ghostsearch.rundir.layout import ghostsearch_version

    rec = recovery_from_config(cfg, method)
    spec = repair_spec(cfg)
    calib = (
        None if rec.identity else (f"{spec.dataset}, {spec.n_seq} sequences x {spec.seq_len} tokens (seed {spec.seed})")
    )
    fields = ("dataset", "n_seq", "seq_len", "seed")
    data = {
        "repair": None if rec.identity else {f: getattr(spec, f) for f in fields},
        "search": [{"objective": o, **{f: getattr(cfg.calibration_spec(o), f) for f in fields}} for o in objectives]
        if objectives
        else [],
        "data_dir": cfg.data_dir,
    }
    return {
        "base_model": cfg.model,
        "variant": None if rec.identity else rec.variant,
        "calibration": calib,
        "version": ghostsearch_version()["version"],
        "data": data,
    }
