"""Downstream evaluation of a compare's finalists: spread over the cluster as Ray tasks (after the
pool is released) gives the same numbers as evaluating them one by one in the driver."""
from __future__ import annotations

import json

import pytest
import ray

from ghostsearch.compare import eval_key, evaluate_finalists, finalist_jobs
from ghostsearch.config import load_config

EVAL = ["eval.tasks=[arc_easy]", "eval.perplexity=[lambada]", "eval.ppl_seq_len=64", "eval.ppl_max_seq=2",
        "eval.limit=3", "eval.batch_size=4"]


@pytest.fixture
def local_ray():
    from ghostsearch.pool.pool import connect

    started = connect(None, dashboard=False, num_cpus=2)
    yield
    if started:
        ray.shutdown()


def test_distributed_equals_local(tmp_path, tiny_model_dir, local_ray):
    cfg = load_config(None, [f"model={tiny_model_dir}", "dtype=fp32", "device=cpu", "pool.actors=2",
                             "compare.recovery=[ghosted]", "recovery.n_seq=2", "recovery.seq_len=64",
                             "calibration.dataset=lambada", *EVAL])
    results = [{"cell": "a", "removed": [1, 2]}, {"cell": "b", "removed": [3, 4]}, {"cell": "c", "removed": [1, 2]}]
    here, there = tmp_path / "local", tmp_path / "distributed"
    here.mkdir(), there.mkdir()
    jobs = finalist_jobs(cfg, results)
    assert jobs == [([], "none"), ([1, 2], "ghosted"), ([3, 4], "ghosted")]  # dense once, each distinct finalist once
    local = evaluate_finalists(cfg, here, jobs, progress=False, distributed=False)
    spread = evaluate_finalists(cfg, there, jobs, progress=False, distributed=True)
    assert len(local) == len(spread) == 3
    for key, res in local.items():
        assert set(spread[key]) == set(res)
        for name, v in res.items():
            assert spread[key][name] == (pytest.approx(v, rel=1e-4) if isinstance(v, float) else v), name
        assert json.loads((there / "evals" / f"{key}.json").read_text()) == spread[key]
    assert local[eval_key([1, 2], "ghosted", cfg)] != local[eval_key([3, 4], "ghosted", cfg)]
    # cached per finalist: a rerun evaluates nothing (no Ray task would run: nothing is pending)
    ray.shutdown()
    assert evaluate_finalists(cfg, there, jobs, progress=False, distributed=True) == spread
