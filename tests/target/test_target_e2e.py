"""`ghostsearch target` end to end, as a new user runs it: a subprocess whose environment has no HF_*
variable and no data directory, in a folder with no ../shared beside it (LAMBADA and the tasks come
from the wheels). configs/target-quick.yaml on the tiny random Llama of tests/conftest.py (6 blocks,
loads in milliseconds; SmolLM2's own run is configs/target-quick.yaml, timed apart) with ks 1-2, a
few windows and small calibrations, so that the whole recipe runs in CI's time: a real search on a
local Ray (greedy's nested path), the repair fitted, the looks certified, the speed measured.

Perplexity: the last line names the certified k, result.json's target block records it with its
bound, level and items; a rerun of the finished run is answered from RUN_DIR without Ray (its
environment names an unreachable Ray, which any ray.init would refuse) and returns the same block; a
rerun that RUN_DIR does not answer but whose search is finished there starts no Ray either (the sets
from the ledger, every window's NLL from RUN_DIR/target/values) and computes nothing again.
Accuracy (mean_acc, max_drop): the same recipe on 0/1 items of two tasks, the tasks as strata, asked
of a copy of that run directory (another metric on a finished search: no Ray).

One local Ray start for the module (``searched``: the first run); every other run here is answered
from its run directory's search."""

from __future__ import annotations

import json
import shutil
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
    "target.looks=[16,32]",  # the least first look (certify.MIN_FIRST_LOOK)
    "calibration.n_seq=4",
    "calibration.seq_len=32",
    "recovery.n_seq=8",
    "recovery.seq_len=64",
    "eval.ppl_seq_len=64",
    "pool.actors=1",
]
PPL = ["target.quality.max_ratio=1.5", "target.tries=2"]  # the speed-up run below is a second test on its items
ACC = [
    "target.quality.metric=mean_acc",
    "target.quality.max_ratio=null",
    "target.quality.max_drop=0.3",
    "eval.tasks=[arc_easy,piqa]",
]


NO_RAY = {"RAY_ADDRESS": "127.0.0.1:9"}  # nothing listens there: connecting to Ray fails at once


def target(home: Path, out: Path, model: str, over: list[str], env: dict | None = None) -> subprocess.CompletedProcess:
    p = subprocess.run(
        [sys.executable, "-m", "ghostsearch", "target", str(QUICK), f"model={model}", f"out={out}", *SMALL, *over]
        + ["--no-progress"],
        cwd=home,
        env={**fresh_env(), **(env or {})},
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert p.returncode == 0 and "Traceback" not in p.stderr, p.stderr[-3000:]
    return p


@pytest.fixture
def home(tmp_path) -> Path:
    d = tmp_path / "work"
    d.mkdir()
    assert not (tmp_path / "shared").exists()
    return d


@pytest.fixture(scope="module")
def searched(tiny_model_dir, tmp_path_factory) -> tuple[Path, str]:
    """The perplexity target run from scratch (a local Ray, the search on it), once for the module: its
    run directory as it left it (each test works on a copy) and the command's last line."""
    base = tmp_path_factory.mktemp("target-e2e")
    (base / "work").mkdir()
    out = base / "run"
    p = target(base / "work", out, tiny_model_dir, PPL)
    assert "no Ray started" not in p.stderr  # nothing to answer from: the search ran on the pool
    return out, p.stdout.strip().splitlines()[-1]


def test_target_quick_certifies_and_resumes(tiny_model_dir, home, tmp_path, searched):
    out = tmp_path / "run"
    shutil.copytree(searched[0], out)
    last = searched[1]
    block = json.loads((out / "result.json").read_text())["target"]
    k = block["certified_k"]
    assert k >= 1, last  # a random tiny model: removing a block moves its perplexity little
    assert last.startswith(f"Certified: remove k={k} blocks {block['removed']} with ghosted; ppl_lambada ratio ")
    assert "P(true drop > target) <= 0.05, together with every test this run directory's account holds" in last
    assert block["level"] == 0.95 and block["upper"] < block["delta"] and block["items_used"] in (16, 32)
    assert block["level_each"] == pytest.approx(0.975) and block["account"]["tries_left"] == 1  # tries: 2
    assert len(block["removed"]) == k and set(block["path"]["1"]) < set(block["path"]["2"])  # greedy's path
    assert isinstance(block["speed"], dict) and block["speed"]["rows"], block["speed"]  # measured
    assert "# ghostsearch target" in (out / "report.md").read_text()
    assert block["items_computed_now"] > 0
    # the rerun of the finished run: answered from RUN_DIR, no Ray (an unreachable RAY_ADDRESS would fail
    # any connection), no model; the same block, result.json untouched
    before = (out / "result.json").read_bytes()
    p1 = target(home, out, tiny_model_dir, PPL, env=NO_RAY)
    assert "already holds this target's answer" in p1.stderr, p1.stderr[-2000:]
    assert p1.stdout.strip().splitlines()[-1] == last and (out / "result.json").read_bytes() == before
    # a rerun RUN_DIR does not answer (a block as a run of an older version wrote it, without config_key)
    # whose search is finished there: no Ray either (NO_RAY), the search's sets from the ledger, the kept
    # values read back, nothing evaluated again, the same answer
    res = json.loads(before)
    del res["target"]["config_key"]
    (out / "result.json").write_text(json.dumps(res))
    p2 = target(home, out, tiny_model_dir, PPL, env=NO_RAY)
    assert "no Ray started" in p2.stderr and "already holds this target's answer" not in p2.stderr, p2.stderr[-2000:]
    again = json.loads((out / "result.json").read_text())["target"]
    assert again["items_computed_now"] == 0 and again["config_key"] == block["config_key"]
    assert (again["certified_k"], again["estimate"]) == (k, block["estimate"])
    assert p2.stdout.strip().splitlines()[-1] == last
    # NO_RAY does stop any Ray: where RUN_DIR does not answer the search (its identity.json moved away) the
    # same rerun goes to Ray, and fails on the unreachable address
    (out / "identity.json").rename(out / "identity.moved")
    p_no = subprocess.run(
        [sys.executable, "-m", "ghostsearch", "target", str(QUICK), f"model={tiny_model_dir}", f"out={out}"]
        + [*SMALL, *PPL, "--no-progress"],
        cwd=home,
        env={**fresh_env(), **NO_RAY},
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert p_no.returncode != 0 and "127.0.0.1:9" in p_no.stderr, p_no.stderr[-2000:]
    (out / "identity.moved").rename(out / "identity.json")
    # a speed-up instead of a quality (target.speedup): timed here, resolved to the least k that reaches it,
    # searched along the same ledger, its quality reported; its rerun reads the k back, without Ray
    p3 = target(home, out, tiny_model_dir, [*PPL, "target.speedup=1.1"])
    fast = json.loads((out / "result.json").read_text())["target"]
    ks = fast["speedup"]
    assert [v["k"] for v in fast["ks"]] == [ks["k"]] and len(fast["removed"]) == ks["k"]
    assert ks["measured"][str(ks["k"])] >= 1.1 > max([ks["measured"][str(j)] for j in range(1, ks["k"])] or [0])
    last3 = p3.stdout.strip().splitlines()[-1]
    assert last3.startswith(f"Speed-up: remove k={ks['k']} blocks {fast['removed']} with ghosted for "), last3
    p4 = target(home, out, tiny_model_dir, [*PPL, "target.speedup=1.1"], env=NO_RAY)
    assert p4.stdout.strip().splitlines()[-1] == last3
    # a third test on these items (another repair): the account holds two of target.tries=2, so it is refused
    # in one line before any work (no Ray: NO_RAY would fail it otherwise), result.json untouched (issue 47)
    held = (out / "result.json").read_bytes()
    p5 = subprocess.run(
        [sys.executable, "-m", "ghostsearch", "target", str(QUICK), f"model={tiny_model_dir}", f"out={out}"]
        + [*SMALL, *PPL, "target.recovery=none", "--no-progress"],
        cwd=home,
        env={**fresh_env(), **NO_RAY},
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert p5.returncode == 2 and "would spend the level twice" in p5.stderr, p5.stderr[-2000:]
    assert "127.0.0.1:9" not in p5.stderr and (out / "result.json").read_bytes() == held
    tests = json.loads((out / "target" / "account.json").read_text())["tests"]
    assert [t["repairs"] for t in tests] == [["ghosted"], ["ghosted"]] and all(
        t["alpha"] == pytest.approx(0.025) for t in tests
    )


def test_target_on_an_accuracy_certifies_with_items_used(tiny_model_dir, home, tmp_path, searched):
    """mean_acc with max_drop (issue 36): a random tiny model answers at chance with or without a block
    (on 8 items its answers did not change at all), so a drop of 0.3 is certified at k >= 1 on 16 or 32
    items of two tasks, with a positive upper bound even when no answer changed (certify.null_se: a
    drop of 0.3 would need disagreements, and so variance). Asked of the perplexity run's directory (its
    account's tries fixed at 2 there): the search is finished, so no Ray (NO_RAY); the repair fitted and
    every item evaluated here."""
    out = tmp_path / "run"
    shutil.copytree(searched[0], out)
    p = target(home, out, tiny_model_dir, [*ACC, "target.tries=2"], env=NO_RAY)
    assert "no Ray started" in p.stderr, p.stderr[-2000:]
    last = p.stdout.strip().splitlines()[-1]
    block = json.loads((out / "result.json").read_text())["target"]
    k = block["certified_k"]
    assert k >= 1, last
    assert last.startswith(f"Certified: remove k={k} blocks {block['removed']} with ghosted; mean_acc drop "), last
    assert block["metric"] == "mean_acc" and block["target"] == {"max_drop": 0.3} and block["delta"] == 0.3
    assert 0 < block["upper"] < 0.3 and block["items_used"] in (16, 32) and block["items_computed_now"] > 0
    values = sorted((out / "target" / "values" / "mean_acc").glob("*.json"))
    assert len(values) >= 2  # the dense model and every k judged
    for f in values:
        vals = json.loads(f.read_text())["values"]
        assert set(vals) <= {0.0, 1.0} and len(vals) in (16, 32)
