"""A look's LM head runs once for the candidates scored together (Objective.row_losses_many): a look has
few rows per micro-batch, and a head multiplying 1-2 rows costs ~25% more a row than one multiplying a
micro-batch's (issue 49). The per-row losses stay each candidate's own."""

from __future__ import annotations

import pytest

from ghostsearch.model.stack import Stack
from ghostsearch.objectives import CalibrationSpec, ObjectiveSpec
from ghostsearch.scoring import Scorer
from tests.conftest import tiny_model

pytestmark = pytest.mark.slow  # ~3-5 s: three objectives prepared (the fast lane's budget is 2 s)


@pytest.mark.parametrize("objective, stacked", [("perplexity", True), ("kl", True), ("margin", False)])
def test_a_look_runs_the_head_once_for_its_candidates(objective, stacked, smollm2_tokenizer_dir, data_dir):
    from transformers import AutoTokenizer

    model = tiny_model("llama", n_layers=4)
    sc = Scorer(Stack(model), AutoTokenizer.from_pretrained(smollm2_tokenizer_dir))
    dataset = "arc_easy" if objective == "margin" else "lambada"
    key = sc.prepare(ObjectiveSpec.make(objective, CalibrationSpec(dataset, 8, 16, 0, data_dir, micro_batch=4)))
    items = [((1, 3), (1,)), ((1, 2), (1,)), ((0, 2), None), ((2, 3), None)]
    rows = [6, 1]  # one row in each of the two micro-batches
    heads = []
    logits = sc.stack.logits
    sc.stack.logits = lambda x, *a, **kw: (heads.append(x.shape[0]), logits(x, *a, **kw))[1]  # type: ignore[method-assign]
    many = sc.score_rows_many(key, items, rows)
    sc.stack.logits = logits  # type: ignore[method-assign]
    # stacked: one head call per micro-batch for the 4 candidates; else one per candidate and micro-batch
    assert len(heads) == (2 if stacked else 8)
    for m, (r, p) in zip(many, items):
        alone = sc.score_rows(key, r, rows, p)
        assert m.sums == pytest.approx(alone.sums, rel=1e-5, abs=1e-6) and m.counts == alone.counts
    assert len({tuple(round(s, 4) for s in m.sums) for m in many}) == len(items)  # candidates differ
