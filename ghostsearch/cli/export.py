"""``ghostsearch export (RUN_DIR | CONFIG --remove 3,4,5) --method M --out DIR [--force]``: a
pruned (and repaired) model directory; from a run directory the best finalist unless --remove, and
from a ``ghostsearch target`` run directory its certified set, repaired with the certified repair
(``--method`` then defaults to it) and the certificate written into the model card."""

from __future__ import annotations

import json
import logging
from pathlib import Path

from ghostsearch.cli.common import parse_remove, positive_int, print_json
from ghostsearch.core.errors import GhostsearchError
from ghostsearch.recovery import RECOVERY

log = logging.getLogger("ghostsearch")


def add(sub) -> None:
    sp = sub.add_parser("export", help="write a pruned (and repaired) model directory")
    sp.add_argument("source", help="a run directory, or a YAML config with --remove")
    sp.add_argument("overrides", nargs="*", help="key=value config overrides")
    sp.add_argument("--remove", default=None, help="comma-separated block indices, e.g. 3,4,5")
    sp.add_argument(
        "--method",
        choices=RECOVERY.names(),
        default=None,
        help="repair to apply before writing (required, except from a target run: its certified repair)",
    )
    sp.add_argument("--out", required=True, help="the model directory to write")
    sp.add_argument(
        "--force",
        action="store_true",
        help="replace --out if it is a previous ghostsearch export (never a run directory or another directory)",
    )
    sp.add_argument("--threads", type=positive_int, default=None, help="torch threads (default: torch's)")
    sp.add_argument(
        "--format",
        choices=("safetensors", "gguf", "gguf-f32"),
        default="safetensors",
        help="gguf / gguf-f32: also write DIR/model-f16.gguf / model-f32.gguf for llama.cpp (plain exports only)",
    )


def run(args) -> Path:
    import torch
    from tqdm.auto import tqdm

    from ghostsearch.config import load_config
    from ghostsearch.core.logs import progress_enabled
    from ghostsearch.model.models import load_configured
    from ghostsearch.model.stack import Stack, check_removed
    from ghostsearch.recovery.export import MARKER, check_target, export, remote_code
    from ghostsearch.recovery.repair import fit
    from ghostsearch.rundir import finalists, run_config

    src, out = Path(args.source), args.out
    check_target(out, args.force)  # before any model work
    threads = args.threads
    cert = target_block(src) if src.is_dir() else None
    if cert is not None and not cert.get("certified_k") and args.remove is None:
        raise GhostsearchError(
            f"{src} is a target run that certified no k ({str(cert.get('statement', '')).split(';')[0]}); "
            "pass --remove 3,4,5 --method M to export a set without a certificate"
        )
    if args.method is None and not (cert and cert.get("certified_k")):
        raise GhostsearchError(f"export needs --method, one of: {', '.join(RECOVERY.names())}")
    method: str = args.method or (cert or {})["recovery"]
    note = None
    if src.is_dir():
        from ghostsearch.rundir import scoring_settings

        cfg, threads = scoring_settings(src, run_config(src, args.overrides), args.threads)  # the search's dtype
        if args.remove is not None:
            removed = parse_remove(args.remove)
        elif cert is not None:
            removed = list(cert["removed"])
        else:
            removed = list(finalists(src)[0][1])
        objectives = list(dict.fromkeys([cfg.objective] + list(cfg.compare.objectives or [])))
        if cert and cert.get("certified_k"):
            covered = sorted(removed) == sorted(cert["removed"]) and method == cert["recovery"]
            if not covered:
                note = (
                    f"The run's certificate is for removing {cert['removed']} with {cert['recovery']}; this export "
                    f"({sorted(removed)} with {method}) is not covered by it."
                )
                log.warning("export: warning: %s", note)
                cert = None
    else:
        if args.remove is None:
            raise GhostsearchError(
                f"export from a config file needs --remove, e.g. --remove 3,4,5 ({src} is not a run directory)"
            )
        cfg, removed = load_config(str(src), args.overrides), parse_remove(args.remove)
        objectives = []
    from ghostsearch.config import check_model_fit, check_repairs

    check_removed(removed, check_model_fit(cfg))  # a repeated or out-of-range block: before the data and the model
    check_repairs(cfg, "--method", [method])
    from ghostsearch.recovery import gguf

    # a hooked repair or a family llama.cpp's writer lacks: one line, now
    gguf.check(cfg.model, cfg.trust_remote_code, method, args.format)
    from ghostsearch.data.dataplan import announce, plan

    announce(plan(cfg, objectives, evaluate=False, repair=method != "none"))  # missing data: one line, now
    if threads:
        torch.set_num_threads(threads)
    bar = tqdm(total=3, desc="export: load model", unit="step", disable=not progress_enabled())
    model, tok = load_configured(cfg)
    blocks = check_removed(removed, Stack(model).n_blocks)
    bar.update(1)
    bar.set_description(f"export: fit {method}")
    ops = fit(model, tok, blocks, cfg, method)
    bar.update(1)
    bar.set_description(f"export: write {out}")
    path = export(
        model,
        blocks,
        method,
        ops,
        out,
        force=args.force,
        tokenizer=tok,
        info={**card_info(cfg, method, objectives), "certificate": cert, "certificate_note": note},
    )
    gguf_file = gguf.write_export(path, args.format, cfg.model)
    bar.update(1)
    bar.close()
    print_json(
        {
            "out": str(path),
            "method": method,
            "removed": list(blocks),
            "blocks": Stack(model).n_blocks - len(blocks),
            "certified": cert is not None,
            **({"gguf": str(gguf_file)} if gguf_file else {}),
            "load": f"AutoModelForCausalLM.from_pretrained({str(path)!r}"
            + (", trust_remote_code=True)" if remote_code(path) else ")"),
            "warnings": json.loads((path / MARKER).read_text()).get("warnings", []),
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
    search = "; ".join(
        f"{s['objective']} on {s['dataset']}, {s['n_seq']} sequences x {s['seq_len']} tokens (seed {s['seed']})"
        for s in data["search"]
    )
    return {
        "base_model": cfg.model,
        "variant": None if rec.identity else rec.variant,
        "calibration": calib,
        "search": search or None,
        "version": ghostsearch_version()["version"],
        "data": data,
    }


def target_block(run_dir: Path) -> dict | None:
    """result.json's ``target`` block of a ``ghostsearch target`` run (None for another run), with the
    run's held-out data (``data.held_out``) beside it for the model card."""
    try:
        res = json.loads((run_dir / "result.json").read_text())
    except (OSError, ValueError):
        return None
    block = res.get("target") if isinstance(res, dict) else None
    if not isinstance(block, dict):
        return None
    return {**block, "held_out": list((res.get("data") or {}).get("held_out") or [])}
