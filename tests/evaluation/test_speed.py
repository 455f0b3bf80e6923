"""ghostsearch.evaluation.speed on a tiny random Llama: exact parameter counts (against a physically pruned
copy), the repair's operators counted and timed, the record's shape. Timings themselves are not
asserted beyond being positive (the machine is shared)."""

from __future__ import annotations

import json

import pytest
import torch

from ghostsearch.core.errors import GhostsearchError
from ghostsearch.evaluation.speed import (
    SpeedReport,
    measure_speed,
    pruned_params,
    speed_markdown,
    speed_table,
    weight_bytes,
)
from ghostsearch.model.stack import physically_prune
from ghostsearch.recovery.base import Operators
from tests.conftest import tiny_model


@pytest.fixture(scope="module")
def model():
    return tiny_model("llama", 6, vocab=512)


def test_pruned_params_is_the_exported_models_count(model):
    for removed in [(), (0,), (1, 2), (0, 5, 3)]:
        exported = physically_prune(model, removed)
        assert pruned_params(model, removed) == sum(p.numel() for p in exported.parameters())
    assert pruned_params(model, (1, 2)) < pruned_params(model, (1,)) < pruned_params(model)
    ops = Operators("ghosted", "dense", (1, 2), 6, {3: torch.zeros(64, 64)}, [])
    assert pruned_params(model, (1, 2), ops) == pruned_params(model, (1, 2)) + 64 * 64
    folded = Operators("replaceme", "cosine", (1, 2), 6, {3: torch.zeros(64, 64)}, [])
    assert pruned_params(model, (1, 2), folded) == pruned_params(model, (1, 2))
    with pytest.raises(GhostsearchError, match="out of range"):
        pruned_params(model, (7,))


def test_measure_speed_dense_first_pruned_and_repaired(model):
    ops = Operators("ghosted", "dense", (1, 2), 6, {3: 0.01 * torch.randn(64, 64)}, [])
    rep = measure_speed(model, [(1, 2), (4,)], repairs=[ops], batches=(2, 1), seq_len=8, decode_tokens=2, repeats=2)
    assert isinstance(rep, SpeedReport) and rep.batches == (1, 2)
    assert [(r.removed, r.recovery) for r in rep.rows] == [
        ((), "none"),
        ((1, 2), "none"),
        ((4,), "none"),
        ((1, 2), "ghosted"),
    ]
    dense, k2, k1, gh = rep.rows
    assert dense.params == sum(p.numel() for p in model.parameters()) and dense.ideal_speedup == 1.0
    assert k2.params == pruned_params(model, (1, 2)) and k2.ideal_speedup == pytest.approx(6 / 4)
    assert gh.params == k2.params + 64 * 64 and gh.weight_bytes == k2.weight_bytes + 64 * 64 * 4
    assert dense.weight_bytes == weight_bytes(model) > k2.weight_bytes
    for r in rep.rows:
        assert {(t.phase, t.batch) for t in r.throughput} == {(p, b) for p in ("prefill", "decode") for b in (1, 2)}
        assert all(
            t.tokens_per_s > 0 and t.tokens_per_s_lo <= t.tokens_per_s <= t.tokens_per_s_hi for t in r.throughput
        )
        assert all(t.speedup_lo <= t.speedup <= t.speedup_hi for t in r.throughput)
        assert r.peak_bytes is not None and r.peak_bytes > r.weight_bytes  # the KV cache on top
    assert all(t.speedup == 1.0 for t in dense.throughput)
    # the KV cache of the pruned model is smaller by the removed blocks' share
    assert dense.peak_bytes - dense.weight_bytes > k2.peak_bytes - k2.weight_bytes
    assert rep.row((2, 1)) is k2 and rep.row((1, 2), "ghosted") is gh and rep.row((0,)) is None
    d = json.loads(json.dumps(rep.to_dict()))
    assert d["rows"][1]["removed"] == [1, 2] and d["rows"][1]["k"] == 2 and d["peak_method"] == rep.peak_method
    assert set(k2.flat()) >= {"prefill_b1_tps", "decode_b2_speedup", "decode_b2_speedup_hi", "params"}
    table = speed_table(rep)
    assert table.splitlines()[1].startswith("dense") and "k=2 + ghosted" in table and "1.50x" in table
    md = speed_markdown(rep).splitlines()  # bench/speed.py's table: the same cells as the plain one
    assert len(md) == 2 + len(rep.rows) and md[0].startswith("| model | removed |") and "| prefill b2 |" in md[0]
    for line, r in zip(md[2:], rep.rows):
        cells = [c.strip() for c in line.strip("|").split("|")]
        assert cells[0] == r.label and cells[-1] == f"{r.ideal_speedup:.2f}x"
        assert all(c in table for c in cells[5:9])
    assert model.training is False and len(model.model.layers) == 6  # the dense model is left as it was


def test_measure_speed_refuses_bad_settings_before_work(model):
    with pytest.raises(GhostsearchError, match="--batch"):
        measure_speed(model, [(1,)], batches=(0,))
    with pytest.raises(GhostsearchError, match="out of range"):
        measure_speed(model, [(9,)])
    with pytest.raises(GhostsearchError, match="fitted on a 30-block"):
        measure_speed(model, [], repairs=[Operators("ghosted", "dense", (1,), 30, {}, [])])
