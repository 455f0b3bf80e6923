"""Synthetic checks of the streamed least-squares solve (no model)."""
import numpy as np
import pytest
import torch

from ghostsearch.errors import GhostsearchError
from ghostsearch.recovery.gram import GramLS
from ghostsearch.recovery.linearpatch import hadamard


def problem(n=400, c=24, noise=1e-3, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, c, generator=g, dtype=torch.float64)
    m = torch.randn(c, c, generator=g, dtype=torch.float64) / c ** 0.5
    return x, m, x @ m + noise * torch.randn(n, c, generator=g, dtype=torch.float64)


def fitted(x, y, chunks=1, **kw):
    ls = GramLS()
    for xs, ys in zip(x.chunk(chunks), y.chunk(chunks)):
        ls.update(xs, ys)
    return ls, ls.solve(**kw)


def test_recovers_true_operator():
    x, m, y = problem()
    _, w = fitted(x, y)
    assert torch.linalg.norm(w - m) / torch.linalg.norm(m) < 1e-2


@pytest.mark.parametrize("solver,ridge", [("ridge", 0.0), ("pinv", 0.0)])
def test_equals_numpy_lstsq_and_pinv(solver, ridge):
    x, _, y = problem(n=120, c=16)
    _, w = fitted(x, y, solver=solver, ridge=ridge)
    ref = np.linalg.lstsq(x.numpy(), y.numpy(), rcond=None)[0]
    np.testing.assert_allclose(w.numpy(), ref, rtol=0, atol=1e-8)
    np.testing.assert_allclose(w.numpy(), np.linalg.pinv(x.numpy()) @ y.numpy(), rtol=0, atol=1e-8)


def test_streamed_equals_one_shot():
    x, _, y = problem()
    ls1, w1 = fitted(x, y, chunks=1)
    ls7, w7 = fitted(x, y, chunks=7)
    assert ls7.n == ls1.n == x.shape[0]
    torch.testing.assert_close(w7, w1, rtol=1e-10, atol=1e-12)
    assert ls7.residual(w7) == pytest.approx(float(((y - x @ w7) ** 2).sum()), rel=1e-8)


@pytest.mark.parametrize("solver", ["ridge", "pinv"])
def test_rank_deficient_is_finite(solver):
    x, _, y = problem(n=10, c=32)            # fewer tokens than channels
    ls, w = fitted(x, y, solver=solver, ridge=0.0)
    assert torch.isfinite(w).all()
    assert ls.residual(w) < 1e-6 * ls.residual(None)     # interpolates the few tokens
    if solver == "pinv":                                   # the minimum-norm solution
        np.testing.assert_allclose(w.numpy(), np.linalg.pinv(x.numpy()) @ y.numpy(), atol=1e-8)
    else:
        assert ls.last_ridge > 0                           # the documented ridge fallback


def test_nan_is_an_error():
    x, _, y = problem(n=20, c=4)
    x[3, 1] = float("nan")
    with pytest.raises(GhostsearchError, match="NaN"):
        GramLS().update(x, y)


@pytest.mark.parametrize("c", [1, 6, 64, 576])
def test_hadamard_orthonormal(c):
    h = hadamard(c)
    torch.testing.assert_close(h @ h.T, torch.eye(c, dtype=h.dtype))
