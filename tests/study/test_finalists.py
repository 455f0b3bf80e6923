"""Downstream evaluation of a compare's finalists: on the pool's scorers (one share per scorer,
Broker.with_model) the numbers and per-item predictions equal one pass in the driver; cached per job."""

from __future__ import annotations

import json

import pyarrow.parquet as pq
import pytest
import ray

from ghostsearch.config import load_config
from ghostsearch.study.compare import eval_key, evaluate_finalists, finalist_jobs

EVAL = [
    "eval.tasks=[arc_easy]",
    "eval.perplexity=[lambada]",
    "eval.ppl_seq_len=64",
    "eval.ppl_max_seq=2",
    "eval.limit=3",
    "eval.batch_size=4",
]


@pytest.fixture
def local_ray():
    from ghostsearch.pool.cluster import connect

    started = connect(None, dashboard=False, num_cpus=2)
    yield
    if started:
        ray.shutdown()


def test_on_the_pool_equals_local(tmp_path, tiny_model_dir, local_ray):
    from ghostsearch.pool.pool import release_pool, start_pool

    cfg = load_config(
        None,
        [
            f"model={tiny_model_dir}",
            "dtype=fp32",
            "device=cpu",
            "pool.actors=2",
            "pool.threads=1",
            "pool.dashboard=false",
            "compare.recovery=[ghosted]",
            "recovery.n_seq=2",
            "recovery.seq_len=64",
            "calibration.dataset=lambada",
            *EVAL,
        ],
    )
    finalists = [(1, 2), (3, 4), (1, 2)]
    here, there = tmp_path / "local", tmp_path / "pool"
    here.mkdir(), there.mkdir()
    jobs = finalist_jobs(cfg, finalists)
    assert jobs == [([], "none"), ([1, 2], "ghosted"), ([3, 4], "ghosted")]  # dense once, each distinct finalist once
    local = evaluate_finalists(cfg, here, jobs, progress=False)
    broker = start_pool(cfg)
    spread = evaluate_finalists(cfg, there, jobs, progress=False, broker=broker)
    assert len(local) == len(spread) == 3
    for key, res in local.items():
        got = spread[key].to_dict()
        assert set(got) == set(res.to_dict())
        for name, v in res.to_dict().items():
            assert got[name] == (pytest.approx(v, rel=1e-4) if isinstance(v, float) else v), name
        assert json.loads((there / "evals" / f"{key}.json").read_text()) == got
    assert local[eval_key([1, 2], "ghosted", cfg)] != local[eval_key([3, 4], "ghosted", cfg)]
    # per-item predictions of every job, the same wherever they ran; lm-eval results files per model
    a, b = (pq.read_table(d / "eval_items.parquet").to_pylist() for d in (here, there))
    key = lambda r: (r["key"], r["task"], r["doc"])  # noqa: E731
    assert sorted(map(key, a)) == sorted(map(key, b)) and len(a) == 3 * 3
    assert {r["key"] for r in a} == set(local) and {r["recovery"] for r in a} == {"none", "ghosted"}
    pa_, pb = {key(r): r["pred"] for r in a}, {key(r): r["pred"] for r in b}
    assert pa_ == pb
    assert len(list((there / "lm_eval").rglob("results_*.json"))) == 3
    # cached per finalist: a rerun evaluates nothing, even with the pool gone
    release_pool(broker)
    assert evaluate_finalists(cfg, there, jobs, progress=False, broker=None) == spread
    # what does not change a number does not invalidate the cache
    fast = load_config(
        None,
        [
            f"model={tiny_model_dir}",
            "dtype=fp32",
            "device=cpu",
            "compare.recovery=[ghosted]",
            "recovery.n_seq=2",
            "recovery.seq_len=64",
            "calibration.dataset=lambada",
            *EVAL,
            "eval.engine=lm-eval",
            "eval.cache_gib=1",
            "eval.batch_size=2",
        ],
    )
    assert all(eval_key(r, m, fast) == eval_key(r, m, cfg) for r, m in jobs)
    more = load_config(
        None,
        [
            f"model={tiny_model_dir}",
            "dtype=fp32",
            "device=cpu",
            "compare.recovery=[ghosted]",
            "recovery.n_seq=4",
            "recovery.seq_len=64",
            "calibration.dataset=lambada",
            *EVAL,
        ],
    )
    assert eval_key([1, 2], "ghosted", more) != eval_key([1, 2], "ghosted", cfg)  # the repair's data changed
    assert eval_key([], "none", more) == eval_key([], "none", cfg)
