"""A run directory: what ghostsearch writes there and how it reads it back.

RUN_DIR/config.yaml (resolved config) · env.json (machine, versions) · ledger/ (every evaluation)
· result.json (one entry per cell) · compare adds cells/, evals/, comparison.parquet, report.*.
A run directory is opened once per run (``open_run_dir``); rerunning the same config resumes it.
"""
from __future__ import annotations

import json
import os
import platform
import subprocess
import time
from pathlib import Path

from ghostsearch.config import Config, load_config, save_config
from ghostsearch.errors import GhostsearchError
from ghostsearch.io import write_text_atomic


def cell_name(searcher: str, objective: str, k: int, seed: int) -> str:
    """The one name of a (searcher, objective, k, seed) cell: ledger rows, result.json, cells/*.json."""
    return f"{searcher}-{objective}-k{k}-s{seed}"


def open_run_dir(cfg: Config, kind: str) -> Path:
    """Create RUN_DIR or check that an existing one was written by the same config."""
    out = Path(cfg.out)
    cfg_file = out / "config.yaml"
    if cfg_file.exists():
        old = load_config(str(cfg_file))
        if old.fingerprint() != cfg.fingerprint():
            raise GhostsearchError(
                f"run directory {out} was written by a different config; choose another out= or delete {out}")
    elif out.exists() and any(out.iterdir()):
        raise GhostsearchError(f"{out} exists and is not a ghostsearch run directory; choose another out=")
    out.mkdir(parents=True, exist_ok=True)
    save_config(cfg, cfg_file)
    write_env(out, kind)
    return out


def write_env(out: Path, kind: str) -> None:
    import torch

    def ver(mod):
        try:
            return __import__(mod).__version__
        except Exception:  # noqa: BLE001
            return None

    try:
        commit = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True,
                                cwd=Path(__file__).parent, timeout=5).stdout.strip() or None
    except Exception:  # noqa: BLE001
        commit = None
    env = {"kind": kind, "time": time.time(), "python": platform.python_version(), "platform": platform.platform(),
           "git_commit": commit, "cpu_count": os.cpu_count(),
           "cuda": torch.cuda.is_available(),
           "devices": [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())],
           "versions": {m: ver(m) for m in ("torch", "transformers", "ray", "optuna", "deap", "pyarrow", "lm_eval")}}
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
        out = [(name, tuple(sorted(c["removed"])), float(c["value"]))
               for name, c in json.loads(path.read_text())["searchers"].items()]
    except (ValueError, KeyError, TypeError, AttributeError) as e:
        raise GhostsearchError(f"{path} is not a ghostsearch result ({e}); re-run the search") from None
    if not out:
        raise GhostsearchError(f"{path} has no searcher results; finish the search first")
    return out


def finalists(run_dir: Path) -> list[tuple[str, tuple[int, ...], float]]:
    """The cells' removed sets, best (lowest) value first, each removed set once."""
    seen, out = set(), []
    for name, removed, value in sorted(cells(run_dir), key=lambda c: (c[2], c[0])):
        if removed not in seen:
            seen.add(removed)
            out.append((name, removed, value))
    return out
