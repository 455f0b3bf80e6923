"""`ghostsearch plan` on a machine with no hub and no HF_HUB_OFFLINE (a user's fresh machine): a hub
model that is not cached fails at once, in one line that names the fix, instead of the hub client's
five retries (about 25 s of "Retrying in 8s")."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_plan_of_an_uncached_hub_model_without_a_hub_fails_in_one_line(tmp_path):
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))  # bound, never listening: the "hub" refuses at once
        env = {
            k: v
            for k, v in os.environ.items()
            if k not in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE", "TRANSFORMERS_OFFLINE")
        }
        env.update(HF_ENDPOINT=f"http://127.0.0.1:{closed.getsockname()[1]}", HF_HOME=str(tmp_path / "hf"))
        p = subprocess.run(
            [sys.executable, "-m", "ghostsearch", "plan", str(ROOT / "configs/llama3.1-8b-paper.yaml")],
            capture_output=True,
            text=True,
            env=env,
            cwd=tmp_path,
            timeout=300,
        )
    assert p.returncode == 2, p.stderr[-2000:]
    assert "Retrying" not in p.stderr, p.stderr[-2000:]  # the hub client was not asked to retry
    lines = [ln for ln in p.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("ghostsearch: error:") and "--model-config" in lines[0], lines
