"""scripts/setup.sh prints each step's duration as it ends (issue 48: six lines in 13 minutes on a busy
machine, none saying which step took the time): its own step() run on two commands."""

from __future__ import annotations

import subprocess
from pathlib import Path

SETUP = Path(__file__).resolve().parents[1] / "scripts" / "setup.sh"


def test_each_setup_step_says_how_long_it_took():
    text = SETUP.read_text()
    step = text[text.index("step() {") : text.index("\n}\n", text.index("step() {")) + 3]
    p = subprocess.run(
        ["bash", "-c", step + 'LOG=/dev/null; step "one" sleep 1; step "two" false'],
        capture_output=True,
        text=True,
        timeout=30,
    )
    lines = p.stderr.splitlines()
    assert p.returncode == 1 and lines[:2] == ["setup: one", "setup:   done in 1 s (1 s in all)"], p.stderr
    assert lines[2] == "setup: two" and lines[3].startswith("setup: failed after 0 s: false"), p.stderr
