"""runner.Run, the recipe ``search`` and ``compare`` share: its one error path (leaving the ``with``
however it is left) closes the outputs, releases RUN_DIR (removed again when this run created it
and ledgered nothing, kept when it ledgered something) and stops the Ray it started; search's
result.json, pool.json and compacted ledger come from ``finish``. A tiny random model, a local Ray."""

from __future__ import annotations

import json

import pytest

from ghostsearch.config import load_config
from ghostsearch.core.errors import GhostsearchError
from ghostsearch.rundir import lock, read_ledger

pytestmark = pytest.mark.slow


def _cfg(tiny_model_dir, out, *extra):
    items = {
        "model": tiny_model_dir,
        "dtype": "fp32",
        "device": "cpu",
        "calibration.dataset": "lambada",
        "calibration.n_seq": 2,
        "calibration.seq_len": 32,
        "k": 2,
        "searcher": "oneshot",
        "out": str(out),
        "pool.actors": 1,
        "pool.threads": 1,
        "pool.dashboard": False,
    }
    return load_config(None, [f"{k}={v}" for k, v in items.items()] + list(extra))


@pytest.fixture
def no_ray(monkeypatch):
    import ray

    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    assert not ray.is_initialized()
    yield ray
    if ray.is_initialized():  # the test failed; leave no Ray to the next one
        ray.shutdown()


def test_search_writes_its_result_and_cleans_up(tiny_model_dir, tmp_path, no_ray):
    from ghostsearch.run.runner import search

    out = tmp_path / "run"
    res = search(_cfg(tiny_model_dir, out), progress=False)
    assert list(res) == ["cells", "data"] and list(res["cells"]) == ["oneshot-perplexity-k2-s0"]
    assert json.loads((out / "result.json").read_text()) == json.loads(json.dumps(res))
    assert json.loads((out / "pool.json").read_text())["actors"]
    assert not list((out / "ledger" / "_journal").glob("*")) and len(list((out / "ledger").glob("*.parquet"))) == 1
    assert not lock.held(out) and (out / lock.LOCK_FILE).read_text() == ""  # released: no holder
    assert not no_ray.is_initialized()


@pytest.mark.parametrize("kind", ["search", "compare"])
def test_a_failure_once_ray_is_up_takes_the_one_error_path(kind, tiny_model_dir, tmp_path, no_ray):
    """No pool of that name: RUN_DIR was opened and Ray started; both are undone."""
    from ghostsearch.run.runner import search
    from ghostsearch.study.compare import compare

    out = tmp_path / "run"
    cfg = _cfg(
        tiny_model_dir, out, "pool.name=nosuch", "eval.tasks=[]", "eval.perplexity=[lambada]", "compare.recovery=[none]"
    )
    with pytest.raises(GhostsearchError, match="no pool named 'nosuch'"):
        (search if kind == "search" else compare)(cfg, progress=False)
    assert not out.exists() and not no_ray.is_initialized()


def test_a_failure_after_ledgering_keeps_the_run_directory(tiny_model_dir, tmp_path, no_ray):
    from ghostsearch.run.runner import Run, run_cell
    from ghostsearch.rundir.cell import CellSpec

    out = tmp_path / "run"
    cfg = _cfg(tiny_model_dir, out)
    cell = CellSpec(searcher="oneshot", objective="perplexity", k=2, seed=0)
    run = Run(cfg, "search", [cell])
    assert not out.exists()  # constructing the recipe checks and writes nothing
    with pytest.raises(RuntimeError, match="after the cell"):
        with run:
            run_cell(cfg, run.broker, run.dir, n_blocks=run.n_blocks, progress=False, **cell.to_dict())
            raise RuntimeError("after the cell")
    assert len(read_ledger(out)) and not (out / "result.json").exists()
    assert not lock.held(out) and (out / lock.LOCK_FILE).read_text() == "" and not no_ray.is_initialized()
