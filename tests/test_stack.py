"""Equivalence: masked + prefix-cached scoring equals a physically pruned model's own HF forward."""
from __future__ import annotations

import math
import random

import pytest
import torch
import torch.nn.functional as F

from ghostsearch.errors import GhostsearchError
from ghostsearch.scoring import Scorer
from tests.corpora import PROSE
from ghostsearch.stack import Batch, Stack, physically_prune
from ghostsearch.objectives import CalibrationSpec, ObjectiveSpec
from tests.conftest import FAMILIES, tiny_model


def _ref_logits(model, removed, ids, **kw):
    with torch.no_grad():
        return physically_prune(model, removed)(ids, **kw).logits.float()


@pytest.mark.parametrize("family", FAMILIES)
def test_masked_equals_physically_pruned(family):
    model = tiny_model(family, n_layers=6, vocab=512)
    stack = Stack(model)
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(0, 512, (2, 24), generator=g)
    cap = stack.capture(Batch(input_ids=ids))
    rng = random.Random(family)
    for _ in range(4):
        removed = sorted(rng.sample(range(6), rng.randint(1, 4)))
        first = removed[0]
        with torch.no_grad():  # from the cached dense state entering the first removed block
            h = stack.run(cap.states[first], cap, first, removed)
            ours = stack.logits(h)
        ref = _ref_logits(model, removed, ids)
        torch.testing.assert_close(ours, ref, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("family", ["llama", "gemma3"])
def test_scorer_prefix_runs_equal_fresh(family):
    """A candidate served from an accepted set's prefix run equals one served from the dense cache,
    and both equal the physically pruned model's cross-entropy."""
    model = tiny_model(family, n_layers=6, vocab=512)

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
            v = sc.score(key, removed, prefix=prefix)["value"]
            lg = _ref_logits(model, removed, ids)
            ref = math.exp(F.cross_entropy(lg[:, :-1].reshape(-1, 512), ids[:, 1:].reshape(-1)).item())
            assert v == pytest.approx(ref, rel=1e-5), (removed, prefix)
        assert (2,) in sc.prepared[key].runs
        assert sc.score(key, (2, 4))["start"] == 4  # served from R=(2,)'s state entering block 4
    finally:
        OBJECTIVES.remove(Fixed.name)


@pytest.mark.slow
def test_smollm2_objectives(smollm2, data_dir):
    model, tok = smollm2
    sc = Scorer(Stack(model), tok)
    key = sc.prepare(ObjectiveSpec.make("perplexity", CalibrationSpec(PROSE, 4, 256, 0, data_dir)))
    dense = sc.score(key, ())["value"]
    assert 8 < dense < 60, dense  # plausible for a 135M model on WikiText-2 / LAMBADA
    pruned = sc.score(key, (10, 11, 12))["value"]
    assert pruned > dense
    # equivalence on the real model
    ids = sc.prepared[key].batches[0].input_ids
    lg = _ref_logits(model, (10, 11, 12), ids)
    ref = math.exp(F.cross_entropy(lg[:, :-1].reshape(-1, lg.shape[-1]), ids[:, 1:].reshape(-1)).item())
    assert pruned == pytest.approx(ref, rel=1e-4)
    kl = sc.prepare(ObjectiveSpec.make("kl", CalibrationSpec(PROSE, 2, 128, 0, data_dir)))
    assert sc.score(kl, ())["value"] == pytest.approx(0.0, abs=1e-6)
    assert sc.score(kl, (10,))["value"] > 0
    mg = sc.prepare(ObjectiveSpec.make("margin", CalibrationSpec("arc_easy", 24, 256, 0, data_dir)))
    # objective = -mean margin (gold minus the best wrong answer): removing six middle blocks hurts it
    assert sc.score(mg, ())["value"] < sc.score(mg, (10, 11, 12, 13, 14, 15))["value"]


@pytest.mark.slow
def test_margin_packing_equals_separate_sequences(smollm2, data_dir):
    """The packed margin (prompt once, answers masked apart) equals one sequence per answer."""
    from ghostsearch import data
    from ghostsearch.objectives.margin import tokenize_item

    model, tok = smollm2
    sc = Scorer(Stack(model), tok)
    key = sc.prepare(ObjectiveSpec.make("margin", CalibrationSpec("arc_easy", 6, 256, 3, data_dir)))
    ours = sc.score(key, (7, 20))["value"]
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

    from ghostsearch import data

    tok = AutoTokenizer.from_pretrained(smollm2_tokenizer_dir)
    ids = data.tokenize_corpus(tok, data.load_texts("lambada", data_dir=data_dir)[:400])
    a = data.sample_windows(ids, 8, 64, seed=3)
    b = data.sample_windows(ids, 8, 64, seed=3)
    c = data.sample_windows(ids, 8, 64, seed=4)
    assert torch.equal(a, b) and not torch.equal(a, c)
    with pytest.raises(GhostsearchError, match="fewer than"):
        data.sample_windows(ids[:100], 8, 64, seed=0)


def test_no_block_list_is_a_clear_error():
    from transformers import BertConfig, BertModel

    m = BertModel(BertConfig(hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=32))
    with pytest.raises(GhostsearchError, match="no decoder block list"):
        Stack(m)
