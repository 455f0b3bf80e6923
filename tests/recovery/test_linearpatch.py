"""LinearPatch as its authors wrote it (issue 37 item 4): QuaRot's Hadamard construction
(had_K x Sylvester, K = 36 for SmolLM2's 576, 40 for Gemma-3's 640) and the mean of per-sequence
scale ratios are the defaults; this project's Paley construction and the pooled ratio of sums are
named options. The matrices are checked against their defining properties and against an
independent re-implementation of QuaRot's butterfly (matmul_hadU applied to the identity)."""

import numpy as np
import pytest
import torch

from ghostsearch.core.errors import GhostsearchError
from ghostsearch.recovery import Activations, get_recovery
from ghostsearch.recovery.ghosted import CutStats
from ghostsearch.recovery.hadamard import (
    hadamard_pm1,
    orthonormal,
    paley1_quarot,
    paley2_block,
    quarot_base,
    quarot_k,
    quarot_pm1,
    sylvester,
)
from ghostsearch.recovery.linearpatch import LinearPatch
from tests.conftest import tiny_model
from tests.corpora import CALIB


def butterfly(x: np.ndarray, had_k: np.ndarray) -> np.ndarray:
    """QuaRot / QuIP#'s matmul_hadU (unnormalised), written out here: pairwise sums and differences
    of adjacent entries, the pair index moving to the last axis, until K rows are left, then had_K
    times them."""
    n, k = x.shape[-1], had_k.shape[0]
    y = x.reshape(-1, n, 1).astype(np.float64)
    while y.shape[1] > k:
        b, m, w = y.shape
        v = y.reshape(b, m // 2, 2, w)
        y = np.stack([v[:, :, 0] + v[:, :, 1], v[:, :, 0] - v[:, :, 1]], axis=2).reshape(b, m // 2, 2 * w)
    return (had_k[None] @ y).reshape(x.shape)


def squares_mod(q: int) -> set[int]:
    return {x * x % q for x in range(1, q)}


@pytest.mark.parametrize("n", [12, 20, 28, 36, 40, 60, 48, 64, 576, 640, 1152, 2048])
def test_quarot_matrix_is_hadamard(n):
    h = quarot_pm1(n)
    assert h is not None and h.shape == (n, n)
    assert set(np.unique(h)) == {-1, 1}
    assert (h @ h.T == n * np.eye(n, dtype=np.int64)).all()
    o = orthonormal(n, "quarot")
    assert np.allclose(o @ o.T, np.eye(n), atol=1e-12) and np.allclose(np.abs(o), 1 / np.sqrt(n))


def test_had36_is_paley2_in_block_form():
    """had36 (Sloane's had.36.pal2, QuaRot's table) = [[C+I, C-I], [C-I, -C-I]]: C the symmetric
    conference matrix of GF(17), so had36 is symmetric, its first row is +1 but at column 18, and
    row 1 carries the quadratic character of GF(17)."""
    h = quarot_base(36)
    c = h[:18, :18] - np.eye(18, dtype=np.int64)
    assert (
        h
        == np.block(
            [
                [c + np.eye(18, dtype=int), c - np.eye(18, dtype=int)],
                [c - np.eye(18, dtype=int), -c - np.eye(18, dtype=int)],
            ]
        )
    ).all()
    assert (c == c.T).all() and (np.diag(c) == 0).all() and (c @ c.T == 17 * np.eye(18)).all()
    assert (h == h.T).all()
    assert list(np.flatnonzero(h[0] < 0)) == [18]
    sq = squares_mod(17)
    assert [int(v) for v in h[1, 2:18]] == [1 if b in sq else -1 for b in range(1, 17)]
    assert (paley2_block(36) == h).all()


def test_had12_had20_had40_structure():
    """had12, had20 = [[1, -1^T], [1, I + Q]] (Paley I, Q[a, b] = chi(a - b), q = 11, 19);
    had40 = [[had20, had20], [had20, -had20]] (QuaRot's tables)."""
    for m in (12, 20):
        h, q = paley1_quarot(m), m - 1
        sq = squares_mod(q)
        assert (h[0] == [1] + [-1] * q).all() and (h[:, 0] == 1).all() and (np.diag(h) == 1).all()
        assert [int(v) for v in h[1, 2:]] == [1 if (-b) % q in sq else -1 for b in range(1, q)]
    h20 = quarot_base(20)
    assert (quarot_base(40) == np.block([[h20, h20], [h20, -h20]])).all()


@pytest.mark.parametrize("n,k", [(576, 36), (640, 40), (48, 12), (64, 1), (1152, 36)])
def test_quarot_is_its_butterfly_of_the_identity_kronecker_with_sylvester(n, k):
    assert quarot_k(n) == k
    base = np.ones((1, 1), dtype=np.int64) if k == 1 else quarot_base(k)
    expect = butterfly(np.eye(n), base.astype(np.float64))
    assert (quarot_pm1(n) == expect).all()
    assert (quarot_pm1(n) == np.kron(base, sylvester(n // k)).T).all()


def test_quarot_and_paley_differ_and_neither_is_a_signed_permutation_of_the_other():
    q, p = orthonormal(576, "quarot"), orthonormal(576, "paley")
    assert (hadamard_pm1(576) == np.round(p * 24)).all()
    overlap = np.abs(q.T @ p)  # a signed permutation would make this a permutation matrix
    assert overlap.max() < 0.99 and not np.allclose(q, p)


def test_unbuilt_bases_fall_back_to_paley_and_say_so():
    from ghostsearch.recovery.hadamard import describe

    assert quarot_pm1(52 * 4) is None  # had52 (Williamson in QuaRot's table) is not built here
    assert np.allclose(orthonormal(208, "quarot"), orthonormal(208, "paley"))
    assert "paley" in describe(208, "quarot")
    assert describe(576, "quarot") == "hadamard had36^T x sylvester 16 (quarot)"
    with pytest.raises(GhostsearchError, match="quarot, paley"):
        orthonormal(576, "walsh")


def test_scale_estimators_differ_where_sequences_differ():
    """Two sequences, diagonal variant: ratios 2 (|x| 1 -> 2) and 1 (|x| 10 -> 10). The authors'
    mean of ratios is 1.5; the pooled ratio of sums is 12 / 11."""
    rows = [(torch.ones(5, 4, dtype=torch.float64), 2 * torch.ones(5, 4, dtype=torch.float64))]
    rows.append((10 * torch.ones(3, 4, dtype=torch.float64), -10 * torch.ones(3, 4, dtype=torch.float64)))
    got = {}
    for scale in ("mean_ratio", "pooled"):
        lp, st = LinearPatch(variant="diagonal", scale=scale), CutStats()
        for xa, xb in rows:
            lp.accumulate(st, xa, xb)
        got[scale] = lp.scales(st)
    assert torch.allclose(got["mean_ratio"], torch.full((4,), 1.5, dtype=torch.float64))
    # pooled sums over tokens: (5 * 2 + 3 * 10) / (5 * 1 + 3 * 10) = 40 / 35
    assert torch.allclose(got["pooled"], torch.full((4,), 40 / 35, dtype=torch.float64))
    with pytest.raises(GhostsearchError, match="mean_ratio, pooled"):
        LinearPatch(scale="median")
    with pytest.raises(GhostsearchError, match="quarot, paley"):
        LinearPatch(rotation="sylvester")


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


def test_fit_averages_per_sequence_ratios(tiny):
    """fit's default scale is the mean over calibration sequences of each sequence's ratio of
    mean |X H| (X_post over X_pre), recomputed here from the activations; pooled is the ratio of
    sums, and the two patches differ."""
    sc, _, data = tiny
    a, b = 2, 4  # REMOVED (2, 3): one cut [2, 4)
    h = torch.from_numpy(orthonormal(64, "quarot"))
    ratios, pre, post = [], 0.0, 0.0
    for cap, w in data:
        for i in range(cap.states[a].shape[0]):
            keep = w[i] > 0 if w is not None else slice(None)
            ya, yb = (cap.states[a][i][keep].double() @ h).abs(), (cap.states[b][i][keep].double() @ h).abs()
            ratios.append(yb.mean(0) / ya.mean(0))
            pre, post = pre + ya.sum(0), post + yb.sum(0)
    assert len(ratios) == 16
    eye = torch.eye(64, dtype=torch.float64)
    for scale, s in (("mean_ratio", torch.stack(ratios).mean(0)), ("pooled", post / pre)):
        ops = get_recovery("linearpatch", scale=scale).fit(sc.stack, (2, 3), data)
        assert ops.report[0]["scale"] == scale
        assert torch.allclose(ops.mats[4].double(), (h * s) @ h.T - eye, atol=1e-5)
    m1 = get_recovery("linearpatch").fit(sc.stack, (2, 3), data).mats[4]
    m2 = get_recovery("linearpatch", scale="pooled").fit(sc.stack, (2, 3), data).mats[4]
    assert float((m1 - m2).norm()) > 1e-4


def test_config_options_reach_linearpatch_and_keep_old_keys():
    """recovery.linearpatch_rotation / _scale are validated, reach LinearPatch, and enter an eval
    key only for linearpatch away from (paley, pooled): keys from before the options stay valid."""
    from ghostsearch.config import Config, validate
    from ghostsearch.recovery.repair import recovery_from_config
    from ghostsearch.study.compare import recovery_key

    cfg = Config()
    rec = recovery_from_config(cfg, "linearpatch")
    assert (rec.rotation_name, rec.scale) == ("quarot", "mean_ratio")
    old = {
        k: v
        for k, v in cfg.to_dict()["recovery"].items()
        if k not in ("method", "linearpatch_rotation", "linearpatch_scale")
    }
    assert recovery_key(cfg, "ghosted") == old
    assert recovery_key(cfg, "linearpatch") != old
    cfg.recovery.linearpatch_rotation, cfg.recovery.linearpatch_scale = "paley", "pooled"
    assert recovery_key(cfg, "linearpatch") == old
    rec = recovery_from_config(cfg, "linearpatch")
    assert (rec.rotation_name, rec.scale) == ("paley", "pooled")
    cfg.recovery.linearpatch_scale = "median"
    with pytest.raises(GhostsearchError, match="linearpatch_scale"):
        validate(cfg)
