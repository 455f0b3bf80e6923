"""Synthetic checks of the streamed least-squares solve (no model)."""

import numpy as np
import pytest
import torch

from ghostsearch.core.errors import GhostsearchError
from ghostsearch.recovery.gram import GramLS


def problem(n=400, c=24, noise=1e-3, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, c, generator=g, dtype=torch.float64)
    m = torch.randn(c, c, generator=g, dtype=torch.float64) / c**0.5
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
    x, _, y = problem(n=10, c=32)  # fewer tokens than channels
    ls, w = fitted(x, y, solver=solver, ridge=0.0)
    assert torch.isfinite(w).all()
    assert ls.residual(w) < 1e-6 * ls.residual(None)  # interpolates the few tokens
    if solver == "pinv":  # the minimum-norm solution
        np.testing.assert_allclose(w.numpy(), np.linalg.pinv(x.numpy()) @ y.numpy(), atol=1e-8)
    else:
        assert ls.last_ridge > 0  # the documented ridge fallback


def test_nan_is_an_error():
    x, _, y = problem(n=20, c=4)
    x[3, 1] = float("nan")
    with pytest.raises(GhostsearchError, match="NaN"):
        GramLS().update(x, y)


def symmetric_brute_force(x, y, ridge_abs=0.0):
    """argmin over symmetric W of ||y - x W||^2 + ridge_abs ||W||^2, by least squares in a basis of
    the symmetric matrices (independent of the Lyapunov derivation)."""
    c = x.shape[1]
    basis = []
    for i in range(c):
        for j in range(i, c):
            e = torch.zeros(c, c, dtype=torch.float64)
            e[i, j] = e[j, i] = 1.0
            basis.append(e)
    design = torch.stack([(x @ e).reshape(-1) for e in basis], 1)
    target = y.reshape(-1)
    if ridge_abs:  # ||W||_F^2 = sum of coef^2 * ||E||_F^2 (1 on the diagonal, 2 off it)
        design = torch.cat([design, torch.diag(torch.tensor([float(e.norm()) for e in basis]) * ridge_abs**0.5)])
        target = torch.cat([target, torch.zeros(len(basis), dtype=torch.float64)])
    coef = torch.linalg.lstsq(design, target[:, None]).solution[:, 0]
    return sum(a * e for a, e in zip(coef, basis))


@pytest.mark.parametrize("ridge", [0.0, 1e-2])
def test_symmetric_solve_is_the_best_symmetric_map(ridge):
    x, _, y = problem(n=200, c=7, noise=0.5)
    ls, w = fitted(x, y)
    s = ls.solve_symmetric(ridge)
    torch.testing.assert_close(s, s.T, rtol=0, atol=1e-12)
    lam = ridge * float((x * x).sum(0).mean())
    torch.testing.assert_close(s, symmetric_brute_force(x, y, lam), rtol=1e-7, atol=1e-9)
    if ridge == 0:  # the constraint costs something, and beats symmetrising the free answer
        assert ls.residual(w) < ls.residual(s) < ls.residual((w + w.T) / 2)


def test_symmetric_solve_recovers_a_symmetric_truth_and_is_finite_when_rank_deficient():
    x, m, _ = problem(n=300, c=10, noise=0)
    sym = (m + m.T) / 2
    ls, _ = fitted(x, x @ sym)
    torch.testing.assert_close(ls.solve_symmetric(0.0), sym, rtol=1e-8, atol=1e-8)
    few, _, y = problem(n=5, c=12)
    ls, _ = fitted(few, y)
    s = ls.solve_symmetric(0.0)
    assert torch.isfinite(s).all() and ls.residual(s) < ls.residual(None)
    with pytest.raises(GhostsearchError, match="square"):
        fitted(x, x[:, :4])[0].solve_symmetric()
