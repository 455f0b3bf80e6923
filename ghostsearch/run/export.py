"""``ghostsearch export``'s work, in its steps: what to export (``source``: a run directory's best
finalist or ``--remove``; a ``ghostsearch target`` run's certified set with its certified repair; a
config with ``--remove``), every check before the data and the model (``check``: the removed set,
the repair, the GGUF format, the data), then the model loaded, the repair fitted and the directory
written (``write``: ``recovery.export.export`` and ``recovery.gguf``). The command line parses and
prints (cli/export.py).

It lives in run/, beside ``recover``, not in recovery/: choosing what to export reads a run directory
and a config, which sit above the repair operators; the writing itself is recovery/'s."""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ghostsearch.config import Config
from ghostsearch.core.errors import GhostsearchError
from ghostsearch.recovery import RECOVERY

log = logging.getLogger("ghostsearch")


@dataclass(frozen=True)
class Source:
    """What one export writes: the settings it loads and fits with (a run directory's: the search's
    dtype and threads), the removed blocks, the repair, the objectives whose calibration the card
    records (from a run directory), and a target run's certificate (None when this export is not
    what it certified; ``note`` then says why, for the card)."""

    cfg: Config
    removed: list[int]
    method: str
    objectives: list[str]
    threads: int | None
    cert: dict | None
    note: str | None = None


def source(
    src: Path, overrides: list[str], remove: list[int] | None, method: str | None, threads: int | None
) -> Source:
    """What to export from ``src`` (a run directory or a config file; ``remove``: --remove's blocks,
    None when not given), refused in one line when it names nothing to export."""
    from ghostsearch.config import load_config
    from ghostsearch.rundir import finalists, run_config, scoring_settings

    cert = target_block(src) if src.is_dir() else None
    if cert is not None and not cert.get("certified_k") and remove is None:
        raise GhostsearchError(
            f"{src} is a target run that certified no k ({str(cert.get('statement', '')).split(';')[0]}); "
            "pass --remove 3,4,5 --method M to export a set without a certificate"
        )
    if method is None and not (cert and cert.get("certified_k")):
        raise GhostsearchError(f"export needs --method, one of: {', '.join(RECOVERY.names())}")
    chosen: str = method or (cert or {})["recovery"]
    if not src.is_dir():
        if remove is None:
            raise GhostsearchError(
                f"export from a config file needs --remove, e.g. --remove 3,4,5 ({src} is not a run directory)"
            )
        return Source(load_config(str(src), overrides), remove, chosen, [], threads, None)
    cfg, threads = scoring_settings(src, run_config(src, overrides), threads)  # the search's dtype and threads
    if remove is not None:
        removed = remove
    elif cert is not None:
        removed = list(cert["removed"])
    else:
        removed = list(finalists(src)[0][1])
    objectives = list(dict.fromkeys([cfg.objective] + list(cfg.compare.objectives or [])))
    note = None
    if cert and cert.get("certified_k"):
        if sorted(removed) != sorted(cert["removed"]) or chosen != cert["recovery"]:
            note = (
                f"The run's certificate is for removing {cert['removed']} with {cert['recovery']}; this export "
                f"({sorted(removed)} with {chosen}) is not covered by it."
            )
            log.warning("export: warning: %s", note)
            cert = None
    return Source(cfg, removed, chosen, objectives, threads, cert, note)


def check(s: Source, fmt: str) -> None:
    """Every refusal before the data and the model: a repeated or out-of-range block, a repair this
    model cannot take, a GGUF this export cannot be, missing data (the data plan, announced)."""
    from ghostsearch.config import check_model_fit, check_repairs
    from ghostsearch.data.dataplan import announce, plan
    from ghostsearch.model.stack import check_removed
    from ghostsearch.recovery import gguf

    check_removed(s.removed, check_model_fit(s.cfg))
    check_repairs(s.cfg, "--method", [s.method])
    gguf.check(s.cfg.model, s.cfg.trust_remote_code, s.method, fmt)  # a hooked repair, a family llama.cpp lacks
    announce(plan(s.cfg, s.objectives, evaluate=False, repair=s.method != "none"))


def write(s: Source, out: str, force: bool, fmt: str) -> dict:
    """Load the model, fit the repair, write the directory (and the GGUF file); what was written."""
    import torch
    from tqdm.auto import tqdm

    from ghostsearch.core.logs import progress_enabled
    from ghostsearch.model.models import load_configured
    from ghostsearch.model.stack import Stack, check_removed
    from ghostsearch.recovery import gguf
    from ghostsearch.recovery.export import MARKER, export, remote_code
    from ghostsearch.recovery.repair import fit

    if s.threads:
        torch.set_num_threads(s.threads)
    bar = tqdm(total=3, desc="export: load model", unit="step", disable=not progress_enabled())
    model, tok = load_configured(s.cfg)
    blocks = check_removed(s.removed, Stack(model).n_blocks)
    bar.update(1)
    bar.set_description(f"export: fit {s.method}")
    ops = fit(model, tok, blocks, s.cfg, s.method)
    bar.update(1)
    bar.set_description(f"export: write {out}")
    info = {**card_info(s.cfg, s.method, s.objectives), "certificate": s.cert, "certificate_note": s.note}
    path = export(model, blocks, s.method, ops, out, force=force, tokenizer=tok, info=info)
    gguf_file = gguf.write_export(path, fmt, s.cfg.model)
    bar.update(1)
    bar.close()
    return {
        "out": str(path),
        "method": s.method,
        "removed": list(blocks),
        "blocks": Stack(model).n_blocks - len(blocks),
        "certified": s.cert is not None,
        **({"gguf": str(gguf_file)} if gguf_file else {}),
        "load": f"AutoModelForCausalLM.from_pretrained({str(path)!r}"
        + (", trust_remote_code=True)" if remote_code(path) else ")"),
        "warnings": json.loads((path / MARKER).read_text()).get("warnings", []),
    }


def export_model(
    src: Path,
    overrides: list[str],
    out: str,
    *,
    remove: list[int] | None = None,
    method: str | None = None,
    force: bool = False,
    threads: int | None = None,
    fmt: str = "safetensors",
) -> dict:
    """``ghostsearch export``: the target directory checked, then ``source``, ``check``, ``write``."""
    from ghostsearch.recovery.export import check_target

    check_target(out, force)  # before any model work
    s = source(src, overrides, remove, method, threads)
    check(s, fmt)
    return write(s, out, force, fmt)


def card_info(cfg: Config, method: str, objectives=()) -> dict:
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
    searched: list[dict[str, Any]] = [
        {"objective": o, **{f: getattr(cfg.calibration_spec(o), f) for f in fields}} for o in objectives
    ]
    data = {
        "repair": None if rec.identity else {f: getattr(spec, f) for f in fields},
        "search": searched,
        "data_dir": cfg.data_dir,
    }
    search = "; ".join(
        f"{s['objective']} on {s['dataset']}, {s['n_seq']} sequences x {s['seq_len']} tokens (seed {s['seed']})"
        for s in searched
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
