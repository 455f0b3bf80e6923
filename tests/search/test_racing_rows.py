"""One look of a race scores all its survivors at once (Scorer.score_rows_many): blocks they all run
go through the model once, stacked; every candidate's per-row losses equal scoring it alone."""

from __future__ import annotations

import pytest

from ghostsearch.model.stack import Stack
from ghostsearch.objectives import CalibrationSpec, ObjectiveSpec
from ghostsearch.scoring import Scorer
from tests.conftest import tiny_model


@pytest.mark.parametrize("objective, dataset", [("perplexity", "lambada"), ("margin", "arc_easy")])
def test_a_look_for_all_survivors_equals_each_alone(objective, dataset, smollm2_tokenizer_dir, data_dir):
    from transformers import AutoTokenizer

    model = tiny_model("llama", n_layers=6)
    sc = Scorer(Stack(model), AutoTokenizer.from_pretrained(smollm2_tokenizer_dir))
    key = sc.prepare(ObjectiveSpec.make(objective, CalibrationSpec(dataset, 10, 32, 0, data_dir, micro_batch=4)))
    items = [((1, 3), (1,)), ((1, 4), (1,)), ((0, 5), None), ((2, 3), None), ((1, 2), (1,))]  # different starts
    sc.score_rows_many(key, items, [7, 0, 5])
    assert not sc.prepared[key].runs  # the prefix (1,) ran on the look's rows only: no run of every row kept
    for rows in ([7, 0, 5], [9], list(range(10))):
        many = sc.score_rows_many(key, items, rows)
        alone = [sc.score_rows(key, r, rows, p) for r, p in items]
        for m, a in zip(many, alone):
            assert m.sums == pytest.approx(a.sums, rel=1e-5, abs=1e-6) and m.counts == a.counts
        assert len({tuple(round(s, 4) for s in m.sums) for m in many}) == len(items)  # candidates differ
