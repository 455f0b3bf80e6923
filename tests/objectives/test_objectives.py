"""Objectives on SmolLM2 (perplexity, kl, margin), and a user objective from the objectives/ plug-in folder."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from ghostsearch.core.errors import GhostsearchError
from ghostsearch.model.stack import Stack, physically_prune
from ghostsearch.objectives import CalibrationSpec, ObjectiveSpec
from ghostsearch.scoring import Scorer
from tests.corpora import PROSE


def _ref_logits(model, removed, ids, **kw):
    with torch.no_grad():
        return physically_prune(model, removed)(ids, **kw).logits.float()


@pytest.mark.slow
def test_smollm2_objectives(smollm2, data_dir):
    model, tok = smollm2
    sc = Scorer(Stack(model), tok)
    key = sc.prepare(ObjectiveSpec.make("perplexity", CalibrationSpec(PROSE, 4, 256, 0, data_dir)))
    dense = sc.score(key, ()).value
    assert 8 < dense < 60, dense  # plausible for a 135M model on WikiText-2 / LAMBADA
    pruned = sc.score(key, (10, 11, 12)).value
    assert pruned > dense
    # equivalence on the real model
    ids = sc.prepared[key].batches[0].input_ids
    lg = _ref_logits(model, (10, 11, 12), ids)
    ref = math.exp(F.cross_entropy(lg[:, :-1].reshape(-1, lg.shape[-1]), ids[:, 1:].reshape(-1)).item())
    assert pruned == pytest.approx(ref, rel=1e-4)
    kl = sc.prepare(ObjectiveSpec.make("kl", CalibrationSpec(PROSE, 2, 128, 0, data_dir)))
    assert sc.score(kl, ()).value == pytest.approx(0.0, abs=1e-6)
    assert sc.score(kl, (10,)).value > 0
    mg = sc.prepare(ObjectiveSpec.make("margin", CalibrationSpec("arc_easy", 24, 256, 0, data_dir)))
    # objective = -mean margin (gold minus the best wrong answer): removing six middle blocks hurts it
    assert sc.score(mg, ()).value < sc.score(mg, (10, 11, 12, 13, 14, 15)).value


@pytest.mark.slow
def test_user_objective_from_the_plugin_folder(smollm2, data_dir):
    """objectives/cosine.py, named in a config as objectives.cosine:Cosine: validated like a built-in,
    0 for the dense model, and equal to the cosine computed on the physically pruned model."""
    from ghostsearch.config import load_config

    model, tok = smollm2
    cfg = load_config(
        None,
        [
            "objective=objectives.cosine:Cosine",
            f"calibration.dataset={PROSE}",
            "calibration.n_seq=2",
            "calibration.seq_len=64",
        ]
        + ([f"data_dir={data_dir}"] if data_dir else []),
    )
    sc = Scorer(Stack(model), tok)
    key = sc.prepare(cfg.objective_spec())
    assert sc.score(key, ()).value == pytest.approx(0.0, abs=1e-6)
    removed = (10, 11, 12)
    value = sc.score(key, removed).value
    ids = torch.cat([b.input_ids for b in sc.prepared[key].batches])
    with torch.no_grad():
        dense = model.model(ids).last_hidden_state.float()
        pruned = physically_prune(model, removed).model(ids).last_hidden_state.float()
    ref = (1 - F.cosine_similarity(pruned, dense, dim=-1)).mean().item()
    assert value > 1e-3 and value == pytest.approx(ref, rel=1e-4)
    with pytest.raises(GhostsearchError, match="cannot import"):
        load_config(None, ["objective=objectives.nothing:Here"])
