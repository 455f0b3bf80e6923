"""Racing through the real pool: race: auto races greedy on 32 calibration rows and scores it exactly
on 16 (result.json says which); each look's rows for every survivor go to the broker in one call,
whose per-row losses equal scoring each candidate alone; the raced answer is exact greedy's."""

from __future__ import annotations

import json

import pytest

from ghostsearch.config import load_config
from ghostsearch.rundir.ledger import read_ledger

pytestmark = pytest.mark.slow


def _cfg(model_dir, out, n_seq, **over):
    items = {
        "model": model_dir,
        "dtype": "fp32",
        "device": "cpu",
        "objective": "perplexity",
        "calibration.dataset": "lambada",
        "calibration.n_seq": n_seq,
        "calibration.seq_len": 16,
        "k": 2,
        "searcher": "greedy",
        "seed": 0,
        "out": str(out),
        "pool.actors": 2,
        "pool.threads": 1,
        "pool.dashboard": False,
        **over,
    }
    return load_config(None, [f"{k}={v}" for k, v in items.items()])


def test_race_auto_through_the_pool(tiny_model_dir, tmp_path, ray_local):
    from ghostsearch.pool.pool import start_pool
    from ghostsearch.run.runner import run_cell

    cfg = _cfg(tiny_model_dir, tmp_path / "run", 32)
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    broker = start_pool(cfg)
    n = ray_local.get(broker.ready.remote())[0]["n_blocks"]
    raced = run_cell(
        cfg, broker, run_dir, searcher="greedy", objective="perplexity", k=2, seed=0, n_blocks=n, progress=False
    )
    rep = raced.race
    assert rep is not None and {k: rep[k] for k in ("setting", "used", "rows", "cut", "bound")} == {
        "setting": "auto",
        "used": "raced",
        "rows": 32,
        "cut": 0,
        "bound": "t",
    }
    assert rep["races"] == 2 and rep["exact_races"] in (0, 1)  # the first race measures the looks: raced
    kept = run_dir / "looks" / f"{raced.cell}.json"  # race: auto's estimate, kept for a resume once made
    assert kept.exists() == (rep["look_costs"] is not None)
    if kept.exists():
        assert json.loads(kept.read_text()) == rep["look_costs"]
    rows = [r for r in read_ledger(run_dir).to_pylist() if r["cell"] == raced.cell]
    assert any(r["partial"] for r in rows) and all(len(r["row_losses"]) for r in rows)
    # a look's block, scored by the broker for many candidates at once, equals each candidate alone
    block = next(r for r in rows if r["partial"])
    spec = cfg.objective_spec()
    alone = ray_local.get(broker.evaluate.remote(spec, [], 0.0, None, "check", rows=(0, 1, 2, 3))).score.sums
    many = [
        r.score.sums
        for r in ray_local.get(broker.rows.remote(spec, [([], None), (block["removed"], None)], (0, 1, 2, 3), "check"))
    ]
    assert many[0] == pytest.approx(alone, rel=1e-5) and many[1] != many[0]
    exact_cfg = _cfg(tiny_model_dir, tmp_path / "run", 32, **{"search.params.greedy.race": "false"})
    exact = run_cell(
        exact_cfg, broker, run_dir, searcher="greedy", objective="perplexity", k=2, seed=1, n_blocks=n, progress=False
    )
    assert exact.race is not None and exact.race["used"] == "exact" and exact.removed == raced.removed
    assert exact.value == pytest.approx(raced.value, rel=1e-5) and raced.budget_used < exact.budget_used
