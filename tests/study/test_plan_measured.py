"""`plan` against measured runs: the evaluations it predicts are the ones a real search on the pool
spends (a tiny random Llama of 12 blocks, one actor on a local Ray): greedy's and the one-shot
searchers' (oneshot, shortgpt, streamline, lorp, fastblock) exactly; a budget
(ga, bo, cbo) at most, and within 10% (ga stops when its next screen-and-promote generation does
not fit what is left: 45 of 46 here). The nine searches share one named pool (one scorer started
once); each draws its own calibration sequences (calibration.seed), so no search finds another's
values in the pool's shared cache or warm-starts from them: each spends its evaluations as on a
pool of its own."""

from __future__ import annotations

import pytest

from ghostsearch.config import load_config
from ghostsearch.study.plan import evaluations
from tests.study.timing import timing


@pytest.mark.slow
def test_planned_evaluations_equal_measured(smollm2_tokenizer_dir, ray_local, tmp_path):
    from transformers import AutoTokenizer

    from ghostsearch.pool.pool import start_pool, stop_pool
    from ghostsearch.run.runner import search
    from tests.conftest import tiny_model

    model_dir = tmp_path / "tiny12"  # 12 blocks: C(12, 2) = 66 sets, more than any budget below
    tiny_model("llama", 12).save_pretrained(model_dir, safe_serialization=True)
    AutoTokenizer.from_pretrained(smollm2_tokenizer_dir).save_pretrained(model_dir)
    base = {
        "model": str(model_dir),
        "dtype": "fp32",
        "device": "cpu",
        "calibration.dataset": "lambada",
        "calibration.n_seq": 4,
        "calibration.seq_len": 32,
        "k": 2,
        "pool.actors": 1,
        "pool.dashboard": False,
    }
    cases = [
        ("greedy", {}, "exact"),
        ("ga", {}, "budget"),
        ("cbo", {"search.budget": 17}, "budget"),
        ("bo", {"search.budget": 19}, "budget"),
        ("oneshot", {}, "exact"),
        ("shortgpt", {}, "exact"),
        ("streamline", {}, "exact"),
        ("lorp", {}, "exact"),
        ("fastblock", {}, "exact"),
    ]
    start_pool(load_config(None, [f"{k}={v}" for k, v in base.items()]), name="planned")
    keys = set()  # the key of the pool's shared cache: one of its own per search
    for seed, (searcher, extra, kind) in enumerate(cases):
        items = {
            **base,
            **extra,
            "searcher": searcher,
            "out": str(tmp_path / searcher),
            "pool.name": "planned",
            "calibration.seed": seed,
        }
        cfg = load_config(None, [f"{k}={v}" for k, v in items.items()])
        keys.add(cfg.objective_spec().key())
        planned, planned_kind = evaluations(cfg, searcher, 2, 12)
        result = search(cfg, progress=False)
        (cell,) = result["cells"].values()
        assert planned_kind == kind
        used = cell["budget_used"]
        if searcher == "greedy":  # exactly n + (n - 1) evaluations
            assert used == planned == 12 + 11, (searcher, used, planned)
        elif kind == "exact":  # oneshot: 12 singles + the 2-set; fastblock: its 4 best windows; the rest one set
            assert used == planned == {"oneshot": 13, "fastblock": 4}.get(searcher, 1), (searcher, used, planned)
        else:  # a budget is spent up to what its last generation / batch can afford, never over
            assert 0.9 * planned <= used <= planned + 1e-9, (searcher, used, planned)
    assert len(keys) == len(cases)
    stop_pool("planned")


@timing
@pytest.mark.slow
def test_planned_seconds_per_evaluation_within_30_percent(smollm2):
    """`plan --measure` (two random blocks and the head of SmolLM2's architecture, timed here) against
    greedy's first-step evaluations on the real SmolLM2, timed in the same process right after: the
    quick search's calibration (8 x 128 lambada), fp32, at the actors' pool.threads (1), as the plan
    times it. (Whole runs against the plan: bench/plan_check.py and docs/benchmarks.md; on this
    shared CPU the load between two commands moves the rate, so the test compares within one process.)"""
    import time

    from ghostsearch.model.stack import Stack
    from ghostsearch.scoring import Scorer
    from ghostsearch.study.plan import plan_run

    model, tok = smollm2
    cfg = load_config(
        "configs/smollm2-quick.yaml", ["searcher=greedy", "k=2", "pool.actors=1", "dtype=fp32", "device=cpu"]
    )
    sc = Scorer(Stack(model), tok)
    key = sc.prepare(cfg.objective_spec())
    p = plan_run(cfg, measure=True, time_start=False)  # the forwards' rate only (no pool started)
    (cell,) = p.cells
    planned = cell.flops / p.rate
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(cfg.pool.threads)  # as a scorer actor runs, and as plan --measure times it
    t0 = time.perf_counter()
    js = (2, 8, 14, 20, 26)  # spread over the depth: 15 blocks on average, the plan assumes (30 - 2) / 2 = 14
    for j in js:
        sc.score(key, (j,))
    measured = (time.perf_counter() - t0) / len(js)
    torch.set_num_threads(threads)
    assert 0.7 <= planned / measured <= 1.3, (planned, measured)
