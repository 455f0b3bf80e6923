"""`ghostsearch plan` on a machine with no hub and no HF_HUB_OFFLINE (a user's fresh machine): a hub
model that is not cached fails at once, in one line that names the fix, instead of the hub client's
five retries (about 25 s of "Retrying in 8s"); a model whose config ships in configs/models/ needs no hub."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def plan_without_hub(tmp_path, *args: str) -> subprocess.CompletedProcess:
    """``ghostsearch plan`` with no HF_HUB_OFFLINE and a hub that refuses at once (a bound port that
    never listens), from another working directory, with an empty Hugging Face cache."""
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))  # bound, never listening: the "hub" refuses at once
        env = {
            k: v
            for k, v in os.environ.items()
            if k not in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE", "TRANSFORMERS_OFFLINE")
        }
        env.update(HF_ENDPOINT=f"http://127.0.0.1:{closed.getsockname()[1]}", HF_HOME=str(tmp_path / "hf"))
        return subprocess.run(
            [sys.executable, "-m", "ghostsearch", "plan", *args],
            capture_output=True,
            text=True,
            env=env,
            cwd=tmp_path,
            timeout=300,
        )


def test_plan_of_a_shipped_model_config_needs_no_hub(tmp_path):
    """configs/llama3.1-8b-paper.yaml names meta-llama/Llama-3.1-8B, whose config ships in
    configs/models/: plan reads it from there, offline, without being told (issue 39)."""
    p = plan_without_hub(tmp_path, str(ROOT / "configs/llama3.1-8b-paper.yaml"))
    assert p.returncode == 0, p.stderr[-2000:]
    assert "Retrying" not in p.stderr, p.stderr[-2000:]
    assert p.stdout.startswith(
        "model meta-llama/Llama-3.1-8B (configs/models/meta-llama/Llama-3.1-8B): 32 blocks, hidden 4096"
    ), p.stdout[:300]


def test_plan_of_an_uncached_hub_model_without_a_hub_fails_in_one_line(tmp_path):
    p = plan_without_hub(
        tmp_path, str(ROOT / "configs/llama3.1-8b-paper.yaml"), "model=meta-llama/Llama-3.2-1B"
    )  # no config of it ships
    assert p.returncode == 2, p.stderr[-2000:]
    assert "Retrying" not in p.stderr, p.stderr[-2000:]  # the hub client was not asked to retry
    lines = [ln for ln in p.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("ghostsearch: error:") and "--model-config" in lines[0], lines
