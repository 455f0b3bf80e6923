"""A run directory: what ghostsearch writes there and how it reads it back.

RUN_DIR/config.yaml (resolved config) · env.json (machine, versions) · identity.json (what
determines a value: model content, resolved dtype and device, CPU threads in bf16/fp16,
calibration token ids) · ledger/
(every evaluation) · result.json (``cells``: one entry per cell, by cell name) · .lock (the driver
holding it) · compare adds cells/, evals/, comparison.parquet, report.*. A run directory is
opened once per run (``open_run_dir``, after validation and once the pool has its resources);
rerunning the same config resumes it. ``result_cells`` reads result.json's cells, also from a run
directory written before ``searchers`` was renamed ``cells`` (``read_cells``: as CellResults).
"""

from __future__ import annotations

import json
import logging
import math
import os
import platform
import shutil
import subprocess
import time
from pathlib import Path

from ghostsearch.config import Config, load_config, save_config
from ghostsearch.core.errors import GhostsearchError
from ghostsearch.core.io import check_writable, write_text_atomic
from ghostsearch.rundir import lock
from ghostsearch.rundir.cell import CellResult
from ghostsearch.rundir.ledger import compact, read_ledger


def check_run_dir(cfg: Config, out: str | Path | None = None) -> Path:
    """Every reason ``out=`` (or ``out``, its local staging directory) cannot be this run's
    directory, checked before any work; writes nothing."""
    if out is None and "://" in str(cfg.out):
        return Path(cfg.out)  # a URI: its local staging directory is checked when opened
    out = Path(out or cfg.out).expanduser()
    if out.is_symlink() and not out.exists():  # mkdir would fail on it with a traceback, after the checks
        raise GhostsearchError(
            f"out={cfg.out} is a symbolic link to {os.readlink(out)}, which does not exist; create that "
            "directory, or choose another out="
        )
    for parent in [out, *out.parents]:
        if parent.exists() and not parent.is_dir():
            where = "is a file" if parent == out else f"is under {parent}, which is a file"
            raise GhostsearchError(f"out={cfg.out} {where}; choose a directory for the run")
    for d in (out, out / "ledger", out / "ledger" / "_journal"):  # a read-only or full disk: before any work
        if d == out or d.is_dir():
            check_writable(
                d,
                f"out={cfg.out}:",
                "make it writable, or choose another out="
                + ("" if d == out else " (a copy of the run directory resumes there)"),
            )
    cfg_file = out / "config.yaml"
    if cfg_file.exists():
        try:
            old = load_config(str(cfg_file))
        except GhostsearchError:
            raise GhostsearchError(f"{cfg_file} is not a valid ghostsearch config; choose another out=") from None
        if old.fingerprint() != cfg.fingerprint():
            raise GhostsearchError(
                f"run directory {out} was written by a different config; choose another out= or delete {out}"
            )
    elif out.exists() and any(out.iterdir()):
        raise GhostsearchError(f"{out} exists and is not a ghostsearch run directory; choose another out=")
    check_run_files(out)
    if (out / lock.LOCK_FILE).exists() and not lock.held(out):  # another driver on it: refuse before starting anything
        lock.acquire(out)
        lock.release(out)
    return out


def check_run_files(out: Path) -> None:
    """The run directory's own JSON files a resumed run reads (identity.json, result.json) hold what
    ghostsearch wrote there: one line before any work, not after the pool has started (issue 48: a
    garbage identity.json was found 280 s in). Reads only."""
    ident = out / "identity.json"
    if ident.exists():
        read_identity(ident)
    res = out / "result.json"
    if res.exists():
        try:
            data = json.loads(res.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            data = None
        if not isinstance(data, dict):
            raise GhostsearchError(
                f"{res} is not a JSON object (damaged or edited); restore it, or delete it and rerun (the ledger "
                "keeps every evaluation: the rerun replays them and writes it again)"
            )


def open_run_dir(cfg: Config, kind: str, out: str | Path | None = None) -> Path:
    """Create RUN_DIR (``out``, default ``cfg.out``) or resume it (same config), lock it for this
    driver, write config.yaml and env.json, and compact the ledger (quarantining corrupt parts).
    ``close_run_dir`` at the end releases it, and removes it again if this run created it and
    failed before ledgering anything (no half-made run directory)."""
    out = check_run_dir(cfg, out)
    created = not out.exists()
    out.mkdir(parents=True, exist_ok=True)
    try:
        lock.acquire(out)
    except BaseException:
        if created:
            shutil.rmtree(out, ignore_errors=True)
        raise
    if created:
        _CREATED.add(out.resolve())
    try:
        save_config(cfg, out / "config.yaml")
        write_env(out, kind)
        compact(out)
    except BaseException:
        close_run_dir(out, ok=False)
        raise
    return out


_CREATED: set = set()


def close_run_dir(run_dir: Path, ok: bool = True) -> None:
    """Release RUN_DIR's lock; after a failure, remove it if this run created it and nothing was ledgered."""
    run_dir = Path(run_dir)
    fresh = run_dir.resolve() in _CREATED
    _CREATED.discard(run_dir.resolve())
    if not ok and fresh and run_dir.is_dir() and not len(read_ledger(run_dir)):
        shutil.rmtree(run_dir, ignore_errors=True)
    lock.release(run_dir)


def resumed_dtype(cfg: Config, out: Path) -> str | None:
    """The dtype a run directory's values were computed in (identity.json), for scorers that would
    otherwise resolve ``dtype: auto`` on their own machine: a resumed run keeps it, so its ledger
    never mixes precisions (a run started on an AVX2-only CPU, fp32, resumed on a CPU with native
    bf16). Said once when it differs from what auto is on this machine. None when the config's dtype
    is explicit (identity.json then refuses a mismatch) or nothing is recorded yet."""
    from ghostsearch.model.models import resolve_dtype

    path = Path(out) / "identity.json"
    if cfg.dtype != "auto" or not path.exists():
        return None
    recorded = read_identity(path).get("dtype")
    if recorded is None:
        return None
    here = str(resolve_dtype("auto", cfg.resolved_device())).replace("torch.", "")
    if recorded != here:
        logging.getLogger(__name__).warning(
            f"resuming {out} in {recorded}, the dtype its values were computed in (dtype auto is {here} here)"
        )
    return str(recorded)


def read_identity(path: Path) -> dict:
    """identity.json as a mapping; one line when it is not one (a hand edit or a damaged disk)."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (ValueError, UnicodeDecodeError):
        data = None
    if not isinstance(data, dict):
        raise GhostsearchError(
            f"{path} is not a JSON object (damaged or edited); restore it, or delete it and rerun "
            "(the run then records it anew, without checking the ledger's values against it)"
        )
    return data


def scoring_settings(run_dir: Path, cfg: Config, threads: int | None = None) -> tuple[Config, int | None]:
    """The one thread count and dtype rule of every command that scores a run's sets again
    (recover, eval and export of a run directory): the dtype the run's values were computed in
    (identity.json; ``dtype: auto`` resolves the same here) and, on a CPU, the thread count of the
    search's scorers (identity.json's ``cpu_threads``, else ``pool.threads``), because bf16/fp16
    values move with the thread count (bench/dtype.py: up to 1.3% on SmolLM2). An explicit
    ``threads`` wins, said in one line when the values then may differ from the search's.
    Returns (config to load the model with, torch threads; None on a GPU)."""
    import dataclasses

    dtype = resumed_dtype(cfg, run_dir)
    if dtype is not None:
        cfg = dataclasses.replace(cfg, dtype=dtype)
    if cfg.resolved_device() != "cpu":
        return cfg, threads
    path = Path(run_dir) / "identity.json"
    recorded = read_identity(path).get("cpu_threads") if path.exists() else None
    search = recorded or cfg.pool.threads
    if threads is not None and threads != search and recorded is not None:
        logging.getLogger(__name__).warning(
            f"--threads {threads}: the search's {read_identity(path).get('dtype')} values were scored with {search} "
            f"thread(s) and such values move with the thread count; expect them to differ slightly "
            f"(drop --threads to use {search})"
        )
    return cfg, threads or search


def check_identity(out: Path, identity: dict) -> None:
    """What determines a value (model content, resolved dtype and device, the scorers' thread count
    where bf16/fp16 runs on a CPU, calibration token ids per objective key) must match what the run
    directory was written with; then it is recorded."""
    path = out / "identity.json"
    old = read_identity(path) if path.exists() else {}
    for key in ("model", "dtype", "device"):
        if key in old and old[key] != identity.get(key):
            why = " (dtype auto is bf16 on GPUs and on CPUs with native bf16, else fp32)" if key == "dtype" else ""
            raise GhostsearchError(
                f"run directory {out} holds values computed with {key} {old[key]!r}, this run "
                f"has {identity.get(key)!r}{why}; resume where they match or choose another out="
            )
    if "cpu_threads" in old and old["cpu_threads"] != identity.get("cpu_threads"):
        raise GhostsearchError(
            f"run directory {out} holds {old['dtype']} values scored by {old['cpu_threads']}-thread CPU "
            f"scorers, this run's have {identity.get('cpu_threads')}, and such values move with the thread "
            f"count; resume with pool.threads={old['cpu_threads']} or choose another out="
        )
    calib = dict(old.get("calibration", {}))
    for spec, digest in identity.get("calibration", {}).items():
        if calib.get(spec, digest) != digest:
            raise GhostsearchError(
                f"run directory {out} was scored on other calibration data for {spec} (token "
                f"ids {calib[spec][:12]} != {digest[:12]}: a different data_dir or tokenizer?); "
                "choose another out="
            )
        calib[spec] = digest
    write_text_atomic(path, json.dumps({**old, **identity, "calibration": calib}, indent=2))


def ghostsearch_version() -> dict:
    """The installed version, the git commit when .git is there, else the commit the package was
    built from (pip's direct_url.json for a VCS install, or ghostsearch/BUILD written by an image build)."""
    from importlib import metadata

    out: dict[str, str | None] = {"version": None, "git_commit": None, "build": None}
    try:
        dist = metadata.distribution("ghostsearch")
        out["version"] = dist.version
        direct = json.loads(dist.read_text("direct_url.json") or "{}")
        out["build"] = (direct.get("vcs_info") or {}).get("commit_id")
    except (metadata.PackageNotFoundError, ValueError):
        pass
    build_file = Path(__file__).parents[1] / "BUILD"
    if build_file.exists():
        out["build"] = build_file.read_text().strip() or out["build"]
    try:
        out["git_commit"] = (
            subprocess.run(
                ["git", "rev-parse", "HEAD"], capture_output=True, text=True, cwd=Path(__file__).parent, timeout=5
            ).stdout.strip()
            or None
        )
    except (OSError, subprocess.SubprocessError):
        pass
    return out


def write_env(out: Path, kind: str) -> None:
    import torch

    from ghostsearch.model.models import cpu_has_native_bf16

    def ver(mod):
        try:
            return __import__(mod).__version__
        except Exception:  # noqa: BLE001
            return None

    gs = ghostsearch_version()
    env = {
        "kind": kind,
        "time": time.time(),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "ghostsearch": gs["version"],
        "git_commit": gs["git_commit"],
        "build": gs["build"],
        "cpu_count": os.cpu_count(),
        "cpu_native_bf16": cpu_has_native_bf16(),  # dtype auto is bf16 on such a CPU (docs/benchmarks.md)
        "cuda": torch.cuda.is_available(),
        "devices": [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())],
        "versions": {m: ver(m) for m in ("torch", "transformers", "ray", "optuna", "deap", "pyarrow", "lm_eval")},
    }
    write_text_atomic(out / "env.json", json.dumps(env, indent=2))


def run_config(run_dir: Path, overrides=None) -> Config:
    """The config a run directory was written with."""
    if not (Path(run_dir) / "config.yaml").exists():
        raise GhostsearchError(f"{run_dir} has no config.yaml; point at a run directory written by ghostsearch search")
    return load_config(str(Path(run_dir) / "config.yaml"), overrides)


def cells(run_dir: Path) -> list[tuple[str, tuple[int, ...], float]]:
    """(cell, removed, value) of every cell in RUN_DIR/result.json, in the file's order."""
    path = Path(run_dir) / "result.json"
    if not path.exists():
        raise GhostsearchError(f"{path} does not exist; run `ghostsearch search` into {run_dir} first")
    try:
        out = [
            (name, tuple(sorted(_block_list(c["removed"]))), _finite(c["value"]))
            for name, c in result_cells(json.loads(path.read_text())).items()
        ]
    except (ValueError, KeyError, TypeError, AttributeError) as e:
        raise GhostsearchError(
            f"{path} is not a ghostsearch result ({e}); rerun the search into {run_dir} (its ledger answers "
            "every evaluation again, and result.json is rewritten)"
        ) from None
    if not out:
        raise GhostsearchError(f"{path} has no searcher results; finish the search first")
    return out


def _block_list(removed) -> list[int]:
    if not isinstance(removed, list) or not all(isinstance(i, int) and not isinstance(i, bool) for i in removed):
        raise ValueError(f"removed {removed!r} is not a list of block indices")
    return removed


def _finite(value) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ValueError(f"value {value!r} is not a finite number")
    return float(value)


def result_cells(result: dict) -> dict:
    """result.json's cells by cell name: key ``cells``, or ``searchers`` in a run directory written
    before the rename (the committed ones under docs/results/ among them)."""
    return result["cells"] if "cells" in result else result["searchers"]


def read_cells(result: dict) -> dict[str, CellResult]:
    """result.json's cells by cell name, as CellResults (:func:`result_cells`: either key)."""
    return {name: CellResult.from_dict(c) for name, c in result_cells(result).items()}


def finalists(run_dir: Path) -> list[tuple[str, tuple[int, ...], float]]:
    """The cells' removed sets, best (lowest) value first, each removed set once."""
    seen, out = set(), []
    for name, removed, value in sorted(cells(run_dir), key=lambda c: (c[2], c[0])):
        if removed not in seen:
            seen.add(removed)
            out.append((name, removed, value))
    return out
