"""The operator variants on a tiny random Llama (fast): ReplaceMe's cosine-distance fit, Ghosted's
symmetric-only ablation and the antisymmetric share of W = I + M, LinearPatch's rotation report."""

import pytest
import torch

from ghostsearch.core.errors import GhostsearchError
from ghostsearch.recovery import Activations, get_recovery
from ghostsearch.recovery.replaceme import cosine_distance, fit_cosine
from tests.conftest import tiny_model
from tests.corpora import CALIB

REMOVED = (2, 3)


@pytest.fixture(scope="module")
def tiny(smollm2_tokenizer_dir, data_dir):
    from transformers import AutoTokenizer

    from ghostsearch.model.stack import Stack
    from ghostsearch.objectives import CalibrationSpec, ObjectiveSpec
    from ghostsearch.scoring import Scorer

    torch.set_num_threads(2)
    sc = Scorer(Stack(tiny_model("llama", 6)), AutoTokenizer.from_pretrained(smollm2_tokenizer_dir))
    key = sc.prepare(ObjectiveSpec.make("perplexity", CalibrationSpec(CALIB, 16, 64, 0, data_dir, micro_batch=8)))
    return sc, key, Activations.from_scorer(sc, key)


def test_fit_cosine_finds_a_scale_free_map():
    """y = (z T*) times a positive scale per row: the cosine optimum is T* (distance 0)."""
    g = torch.Generator().manual_seed(0)
    z = torch.randn(3000, 12, generator=g)
    t_true = torch.eye(12) + 0.5 * torch.randn(12, 12, generator=g)
    y = (z @ t_true) * torch.rand(3000, 1, generator=g).add(0.5)
    before = float(cosine_distance(z, torch.eye(12), y))
    t = fit_cosine(z, y, steps=400, lr=1e-2, batch_tokens=512, seed=0)
    assert before > 0.05 and float(cosine_distance(z, t.float(), y)) < 0.02 * before


def test_replaceme_cosine_lowers_cosine_distance_and_is_seeded(tiny):
    sc, _, data = tiny
    fit = lambda seed: get_recovery("replaceme", variant="cosine", steps=60, seed=seed, batch_tokens=256).fit(
        sc.stack, REMOVED, data
    )
    a, b, other = fit(0), fit(0), fit(1)
    r = a.report[0]
    assert r["cosine_after"] < 0.9 * r["cosine_before"] and r["steps"] == 60
    torch.testing.assert_close(a.mats[2], b.mats[2], rtol=0, atol=0)
    assert not torch.allclose(a.mats[2], other.mats[2])
    ls = get_recovery("replaceme").fit(sc.stack, REMOVED, data)
    assert "cosine_after" not in ls.report[0] and not torch.allclose(ls.mats[2], a.mats[2])
    with pytest.raises(GhostsearchError, match="steps"):
        get_recovery("replaceme", variant="cosine", steps=0)


def test_ghosted_symmetric_ablation_and_shares(tiny):
    sc, key, data = tiny
    dense = get_recovery("ghosted").fit(sc.stack, REMOVED, data)
    sym = get_recovery("ghosted", variant="symmetric").fit(sc.stack, REMOVED, data)
    m, s = dense.mats[4].double(), sym.mats[4].double()
    torch.testing.assert_close(s, s.T, rtol=0, atol=1e-6)
    d, r = dense.report[0], sym.report[0]
    # the unconstrained optimum aligns best; the symmetric one still beats doing nothing
    assert d["alignment_after"] <= r["alignment_after"] < r["alignment_before"]
    w = torch.eye(m.shape[0], dtype=m.dtype) + m
    assert d["antisymmetric_share_w"] == pytest.approx(float(((w - w.T) / 2).norm() / w.norm()), rel=1e-5)
    assert d["antisymmetric_share"] == pytest.approx(float(((m - m.T) / 2).norm() / m.norm()), rel=1e-5)
    assert 0 < d["antisymmetric_share_w"] < 1 and r["antisymmetric_share_w"] == pytest.approx(0, abs=1e-6)
    with get_recovery("ghosted").patches(sc.stack, dense) as p:
        v_dense = sc.score(key, REMOVED, patches=p).value
    # the patch is applied (a random tiny model's loss need not fall: alignment is what is fitted)
    assert v_dense != pytest.approx(sc.score(key, REMOVED).value, rel=1e-6)


def test_linearpatch_reports_its_rotation(tiny):
    sc, _, data = tiny
    ops = get_recovery("linearpatch").fit(sc.stack, REMOVED, data)
    assert ops.report[0]["rotation"] == "hadamard 64 (sylvester, quarot)"  # 64: quarot and paley are both Sylvester
    assert (
        get_recovery("linearpatch", variant="diagonal").fit(sc.stack, REMOVED, data).report[0]["rotation"] == "identity"
    )


@pytest.mark.parametrize("family", ["llama", "mistral", "qwen2", "qwen3", "gemma2", "gemma3", "olmo2", "phi3"])
def test_replaceme_says_before_any_work_which_families_it_cannot_fold_into(family):
    """``unsupported`` answers from the structure alone: the model built on the meta device gives the
    same answer as the real one, and only the families whose MLP output passes a norm before the
    residual stream are refused (there the fold into mlp.down_proj would sit under that norm)."""
    from ghostsearch.model.models import on_meta
    from ghostsearch.model.stack import Stack
    from ghostsearch.recovery import RECOVERY

    real = tiny_model(family, 6)
    why = RECOVERY.get("replaceme").unsupported(Stack(real))
    assert why == RECOVERY.get("replaceme").unsupported(Stack(on_meta(real.config)))
    assert (why is not None) == (family in ("gemma2", "gemma3", "olmo2")), why
    for other in ("ghosted", "linearpatch", "none"):
        assert RECOVERY.get(other).unsupported(Stack(on_meta(real.config))) is None
