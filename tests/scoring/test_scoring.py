"""The Scorer: prefix-cached scoring equals fresh scoring and the physically pruned model; packed margin items
equal separate sequences; calibration sampling is seeded."""

from __future__ import annotations

import dataclasses
import math
import os

import pytest
import torch
import torch.nn.functional as F

from ghostsearch.core.errors import GhostsearchError
from ghostsearch.model.stack import Batch, Stack, physically_prune
from ghostsearch.objectives import CalibrationSpec, ObjectiveSpec
from ghostsearch.scoring import Scorer
from tests.conftest import tiny_model

# scripts/gpu-check.sh runs these exactness tests on a GPU, in fp32 and bf16
DEVICE = os.environ.get("GHOSTSEARCH_TEST_DEVICE", "cpu")
DTYPE = getattr(torch, os.environ.get("GHOSTSEARCH_TEST_DTYPE", "float32"))
REL = 1e-5 if DTYPE == torch.float32 else 3e-2


def _ref_logits(model, removed, ids, **kw):
    with torch.no_grad():
        return physically_prune(model, removed)(ids, **kw).logits.float()


@pytest.mark.parametrize("family", ["llama", "gemma3"])
def test_scorer_prefix_runs_equal_fresh(family):
    """A candidate served from an accepted set's prefix run equals one served from the dense cache,
    and both equal the physically pruned model's cross-entropy."""
    model = tiny_model(family, n_layers=6, vocab=512).to(DEVICE, DTYPE)

    sc = Scorer(Stack(model), tokenizer=None)
    ids = torch.randint(0, 512, (4, 32), generator=torch.Generator().manual_seed(1))
    from ghostsearch.objectives import OBJECTIVES
    from ghostsearch.objectives.perplexity import Perplexity

    class Fixed(Perplexity):  # perplexity over fixed random token batches (two micro-batches)
        name = "_ppl_fixed"

        def build(self, tokenizer, dtype=None):
            return [Batch(input_ids=ids[:2]), Batch(input_ids=ids[2:])]

    OBJECTIVES.add(Fixed.name, Fixed)
    try:
        key = sc.prepare(ObjectiveSpec.make("_ppl_fixed", CalibrationSpec("c4", 4, 32, 0)))
        for removed, prefix in [((2, 4), (2,)), ((1, 2, 4), (2,)), ((2, 3), None), ((5,), (2,))]:
            v = sc.score(key, removed, prefix=prefix).value
            lg = _ref_logits(model, removed, ids.to(DEVICE))
            ref = math.exp(F.cross_entropy(lg[:, :-1].reshape(-1, 512), ids[:, 1:].reshape(-1).to(DEVICE)).item())
            assert v == pytest.approx(ref, rel=REL), (removed, prefix)
        assert (2,) in sc.prepared[key].runs
        assert sc.score(key, (2, 4)).start == 4  # served from R=(2,)'s state entering block 4
    finally:
        OBJECTIVES.remove(Fixed.name)


@pytest.mark.slow
def test_margin_packing_equals_separate_sequences(smollm2, data_dir):
    """The packed margin (prompt once, answers masked apart) equals one sequence per answer."""
    from ghostsearch.data import corpora as data
    from ghostsearch.objectives.margin import tokenize_item

    model, tok = smollm2
    sc = Scorer(Stack(model), tok)
    key = sc.prepare(ObjectiveSpec.make("margin", CalibrationSpec("arc_easy", 6, 256, 3, data_dir)))
    ours = sc.score(key, (7, 20)).value
    items = data.sample_items(data.mc_items("arc_easy", data_dir), 6, 3, "arc_easy")
    pm = physically_prune(model, (7, 20))
    ms = []
    for it in items:
        p, answers = tokenize_item(tok, it)
        lps = []
        for a in answers:
            ids = torch.tensor([p + a])
            with torch.no_grad():
                lp = torch.log_softmax(pm(ids).logits.float()[0], -1)
            lps.append(sum(lp[len(p) - 1 + t, a[t]].item() for t in range(len(a))))
        ms.append(lps[it.gold] - max(v for j, v in enumerate(lps) if j != it.gold))
    assert ours == pytest.approx(-sum(ms) / len(ms), rel=1e-4, abs=1e-4)


def test_determinism_same_seed_same_tokens(smollm2_tokenizer_dir, data_dir):
    from transformers import AutoTokenizer

    from ghostsearch.data import corpora as data

    tok = AutoTokenizer.from_pretrained(smollm2_tokenizer_dir)
    ids = data.tokenize_corpus(tok, data.load_texts("lambada", data_dir=data_dir)[:400])
    a = data.sample_windows(ids, 8, 64, seed=3)
    b = data.sample_windows(ids, 8, 64, seed=3)
    c = data.sample_windows(ids, 8, 64, seed=4)
    assert torch.equal(a, b) and not torch.equal(a, c)
    with pytest.raises(GhostsearchError, match="fewer than"):
        data.sample_windows(ids[:100], 8, 64, seed=0)


@pytest.mark.parametrize("objective, dataset", [("perplexity", "lambada"), ("kl", "lambada"), ("margin", "arc_easy")])
def test_row_losses_in_any_order_add_up_to_the_value(objective, dataset, smollm2_tokenizer_dir, data_dir):
    """Racing's per-row losses: any rows, in any order and any grouping, across micro-batches, give
    the same per-row numbers, and all rows together give exactly the value ``score`` computes."""
    from transformers import AutoTokenizer

    model = tiny_model("llama", n_layers=6).to(DEVICE, DTYPE)
    sc = Scorer(Stack(model), AutoTokenizer.from_pretrained(smollm2_tokenizer_dir))
    cal = CalibrationSpec(dataset, 6, 32, 0, data_dir, micro_batch=4)  # two micro-batches: 4 + 2 rows
    spec = ObjectiveSpec.make(objective, cal)
    key = sc.prepare(spec)
    removed, prefix = (1, 3), (1,)
    whole = sc.score_rows(key, removed, [5, 0, 3, 1, 4, 2], prefix=prefix)
    parts = [sc.score_rows(key, removed, rows) for rows in ([2], [4, 1], [0, 3, 5])]
    by_row = dict(zip([5, 0, 3, 1, 4, 2], whole.sums))
    for rows, part in zip(([2], [4, 1], [0, 3, 5]), parts):
        assert part.sums == pytest.approx([by_row[r] for r in rows], rel=REL, abs=1e-6)
    value = spec.build().value(sum(whole.sums), sum(whole.counts))  # score_rows: Objective.row_losses
    assert value == pytest.approx(sc.score(key, removed).value, rel=REL / 10, abs=1e-9)  # score: Objective.loss
    assert len(set(whole.sums)) == 6  # rows differ: a per-row mix-up could not pass unnoticed
    if objective == "perplexity":  # each row against the physically pruned model's own next-token NLL
        ids = torch.cat([b.input_ids for b in sc.prepared[key].batches]).to(DEVICE)
        lg = _ref_logits(model, removed, ids)
        nll = F.cross_entropy(lg[:, :-1].transpose(1, 2), ids[:, 1:], reduction="none").sum(1)
        assert by_row == pytest.approx({r: float(nll[r]) for r in range(6)}, rel=REL)
        assert whole.counts == [ids.shape[1] - 1] * 6


def test_a_score_is_a_record_whose_misspelt_field_fails():
    from ghostsearch.scoring import RowScore, Score

    s = Score(value=2.5, tokens=64, seconds=0.1, start=3)
    assert s.value == 2.5 and s.start == 3
    with pytest.raises(AttributeError, match="valeu"):
        s.valeu  # type: ignore[attr-defined]  # noqa: B018
    with pytest.raises(TypeError):
        s["value"]  # type: ignore[index]  (a record, not a dict: no access by name, no silent default)
    with pytest.raises(dataclasses.FrozenInstanceError):
        s.value = 1.0  # type: ignore[misc]  (frozen)
    r = RowScore(sums=[1.0], counts=[2.0], tokens=2, seconds=0.1, start=0)
    with pytest.raises(AttributeError, match="value"):
        r.value  # type: ignore[attr-defined]  # noqa: B018  (a row score has no value: the race computes it from the sums)
