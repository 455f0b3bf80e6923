"""`ghostsearch plan`: evaluations from the configs alone, and its one-line refusals (exit 2)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from ghostsearch.config import load_config
from ghostsearch.study.plan import evaluations

ROOT = Path(__file__).resolve().parents[2]
M70 = str(ROOT / "configs/models/meta-llama/Llama-3.1-70B")
M8 = str(ROOT / "configs/models/meta-llama/Llama-3.1-8B")


def test_evaluations_by_hand():
    cfg = load_config(str(ROOT / "configs/llama3.1-8b-paper.yaml"))
    # 32 blocks, 0 and 31 protected: 30 free; greedy at k=8 scores 30 + 29 + ... + 23
    assert evaluations(cfg, "greedy", 8, 32) == (sum(range(23, 31)), "exact")
    # race: auto (the default) races greedy from 32 calibration rows: its exact cost is then at most
    assert evaluations(cfg, "greedy", 8, 32, rows=32) == (sum(range(23, 31)), "budget")
    assert evaluations(cfg, "greedy", 8, 32, rows=16) == (sum(range(23, 31)), "exact")
    exact = load_config(str(ROOT / "configs/llama3.1-8b-paper.yaml"), ["search.params.greedy.race=false"])
    assert evaluations(exact, "greedy", 8, 32, rows=32) == (sum(range(23, 31)), "exact")
    assert evaluations(cfg, "cbo", 8, 32) == (212.0, "budget")  # compare.budget: matched
    single = load_config(None, ["searcher=ga", "search.budget=50"])
    assert evaluations(single, "ga", 6, 30) == (50.0, "budget")


def test_bad_plans_are_one_line_exit_2():
    env = dict(os.environ, HF_HUB_OFFLINE="1")
    cases = [
        (
            ["configs/llama3.1-70b-paper.yaml", "pool.gpus_per_actor=1", "pool.actors=8", "--model-config", M70],
            "this run does not fit: one scorer needs 222.05 GiB",
        ),
        (
            ["configs/llama3.1-70b-paper.yaml", "pool.gpus_per_actor=16", "--model-config", M70],
            "pool.gpus_per_actor=16 is more than the cluster's 8 GPUs",
        ),
        (
            ["configs/llama3.1-8b-paper.yaml", "pool.gpus_per_actor=2.5", "--model-config", M8],
            "pool.gpus_per_actor=2.5: a model is split over whole GPUs",
        ),
    ]
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "ghostsearch", "plan", *args],
            cwd=ROOT,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for args, _ in cases
    ]
    for p, (_, want) in zip(procs, cases):
        out, err = p.communicate(timeout=300)
        assert p.returncode == 2, err[-1000:]
        lines = err.strip().splitlines()
        assert len(lines) == 1 and want in lines[0], err
        assert "fix:" in lines[0] or "use an integer" in lines[0] or "lower it" in lines[0]


def test_paper_plan_prints_a_table():
    out = subprocess.run(
        [sys.executable, "-m", "ghostsearch", "plan", "configs/llama3.1-8b-paper.yaml", "--model-config", M8],
        cwd=ROOT,
        env=dict(os.environ, HF_HUB_OFFLINE="1"),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr[-1000:]
    assert "greedy     perplexity    8    0          212 budget" in out.stdout  # 32 rows: race: auto races it
    assert "GPU-hours" in out.stdout and "memory per actor" in out.stdout


@pytest.mark.parametrize("bad", ["pool.cluster_gpus=-1", "pool.device_tflops=0"])
def test_bad_plan_keys(bad):
    from ghostsearch.core.errors import GhostsearchError

    with pytest.raises(GhostsearchError, match=bad.split("=")[0]):
        load_config(None, [bad])
