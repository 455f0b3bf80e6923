"""`ghostsearch target` end to end on SmolLM2, as a new user runs it: a subprocess whose environment
has no HF_* variable and no data directory, in a folder with no ../shared beside it (the model and
LAMBADA come from the wheels). configs/target-quick.yaml made smaller (ks 1-2, a few windows, small
calibrations): the last line names the certified k, result.json's target block records it with its
bound, level and items; a rerun resumes (the search from the ledger, every window's NLL from
RUN_DIR/target/values) and computes nothing again."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.cli.test_first_hour import fresh_env

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
QUICK = ROOT / "configs" / "target-quick.yaml"
SMALL = [
    "target.ks=[1,2]",
    "target.looks=[8,16]",
    "target.quality.max_ratio=1.5",
    "calibration.n_seq=4",
    "calibration.seq_len=64",
    "recovery.n_seq=8",
    "recovery.seq_len=128",
    "eval.ppl_seq_len=64",
    "pool.actors=1",
]


def target(home: Path, out: Path) -> subprocess.CompletedProcess:
    p = subprocess.run(
        [sys.executable, "-m", "ghostsearch", "target", str(QUICK), f"out={out}", *SMALL, "--no-progress"],
        cwd=home,
        env=fresh_env(),
        capture_output=True,
        text=True,
        timeout=1800,  # minutes on an idle 2-core machine; the speed measurement is slow on a loaded one
    )
    assert p.returncode == 0 and "Traceback" not in p.stderr, p.stderr[-3000:]
    return p


def test_target_quick_certifies_and_resumes(tmp_path):
    home = tmp_path / "work"
    home.mkdir()
    assert not (tmp_path / "shared").exists()
    out = tmp_path / "run"
    p = target(home, out)
    last = p.stdout.strip().splitlines()[-1]
    block = json.loads((out / "result.json").read_text())["target"]
    k = block["certified_k"]
    assert k >= 1, last  # k = 1 with Ghosted is far inside a 1.5x perplexity ratio
    assert last.startswith(f"Certified: remove k={k} blocks {block['removed']} with ghosted; ppl_lambada ratio ")
    assert "P(true drop > target) <= 0.05, for this repair fit and these data." in last
    assert block["level"] == 0.95 and block["upper"] < block["delta"] and block["items_used"] in (8, 16)
    assert len(block["removed"]) == k and set(block["path"]["1"]) < set(block["path"]["2"])  # greedy's path
    assert isinstance(block["speed"], (dict, str))  # measured, or why not (one line)
    assert "# ghostsearch target" in (out / "report.md").read_text()
    assert block["items_computed_now"] > 0
    # the rerun: nothing evaluated again, the same answer
    p2 = target(home, out)
    again = json.loads((out / "result.json").read_text())["target"]
    assert again["items_computed_now"] == 0
    assert (again["certified_k"], again["estimate"]) == (k, block["estimate"])
    assert p2.stdout.strip().splitlines()[-1] == last
