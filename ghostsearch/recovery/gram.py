"""Streamed least squares: min_W ||Y - X W||_F^2 from Gram matrices accumulated batch by batch.

Only X^T X [Ci x Ci], X^T Y [Ci x Co] and ||Y||^2 are kept (float64), never all tokens x C, so
memory does not depend on the number of calibration tokens. Solvers:

* ``ridge`` (default): (X^T X + lam I) W = X^T Y by Cholesky, lam = ridge * mean(diag X^T X)
  (relative, so the same ridge suits any activation scale). Fallback, documented: when the
  factorisation fails (rank-deficient X, e.g. fewer tokens than channels, with ridge 0 or too
  small) lam is raised tenfold from 1e-10 * mean(diag) until it succeeds; ``last_ridge`` says which.
* ``pinv``: the SVD pseudo-inverse in Gram form, W = (X^T X)^+ X^T Y = pinv(X) Y, eigenvalues
  below max(n, Ci) * eps * largest cut (rank-deficient X gives the minimum-norm answer).

``solve_symmetric``: the best SYMMETRIC W (square, Ci = Co), the ghosted ``symmetric`` ablation.
Derivation: f(W) = ||Y - X W||^2 + lam ||W||^2 = tr(W^T G W) - 2 tr(W^T B) + lam tr(W^T W) + c
with G = X^T X, B = X^T Y. Restricted to symmetric W, the gradient 2 (G W - B + lam W) must be
orthogonal to every symmetric direction, i.e. its symmetric part vanishes:
(G + lam I) W + W (G + lam I) = B + B^T, a Lyapunov equation. With G + lam I = V diag(e) V^T
it decouples: W = V K V^T, K_ij = (V^T (B + B^T) V)_ij / (e_i + e_j). f is convex, so this
stationary point is the minimum (unique when e_i + e_j > 0; pairs below the pinv cut get 0, the
minimum-norm answer). lam = ridge * mean(diag G), as for ``ridge``.
"""

from __future__ import annotations

import torch

from ghostsearch.core.errors import GhostsearchError

SOLVERS = ("ridge", "pinv")


def finite_rows(x: torch.Tensor, what: str, weight: torch.Tensor | None = None) -> torch.Tensor:
    """x as float64 rows [n, C] (rows of weight 0, i.e. padding, left out); NaN or inf is an error."""
    x = x.reshape(-1, x.shape[-1]).double()
    if weight is not None:
        x = x[weight.reshape(-1).to(x.device) > 0]
    if not torch.isfinite(x).all():
        raise GhostsearchError(
            f"{what} contains NaN or inf activations; load the model in fp32 (dtype=fp32) "
            "or check the weights and calibration data"
        )
    return x


class GramLS:
    def __init__(self) -> None:
        self.xx: torch.Tensor | None = None
        self.xy: torch.Tensor | None = None
        self.yy = 0.0
        self.n = 0
        self.last_ridge = 0.0

    @classmethod
    def from_grams(cls, xx: torch.Tensor, xy: torch.Tensor, n: int) -> "GramLS":
        """A system from accumulated X^T X and X^T Y (no residual bookkeeping)."""
        ls = cls()
        ls.xx, ls.xy, ls.n = xx, xy, n
        return ls

    def update(self, x: torch.Tensor, y: torch.Tensor) -> None:
        """Add the rows of x [..., Ci] and y [..., Co]."""
        x, y = finite_rows(x, "calibration input"), finite_rows(y, "calibration target")
        xx, xy = x.T @ x, x.T @ y
        self.xx = xx if self.xx is None else self.xx + xx
        self.xy = xy if self.xy is None else self.xy + xy
        self.yy += float((y * y).sum().detach())
        self.n += x.shape[0]

    def grams(self) -> tuple[torch.Tensor, torch.Tensor]:
        """(X^T X, X^T Y); an error when no calibration token was added."""
        if self.xx is None or self.xy is None or self.n == 0:
            raise GhostsearchError("no calibration tokens reached this cut; use a non-empty calibration set")
        return self.xx, self.xy

    def solve(self, ridge: float = 1e-6, solver: str = "ridge") -> torch.Tensor:
        xx, xy = self.grams()
        if solver == "pinv":
            return self._pinv()
        if solver != "ridge":
            raise GhostsearchError(f"unknown solver {solver!r}; use one of: {', '.join(SOLVERS)}")
        if ridge < 0:
            raise GhostsearchError(f"ridge={ridge} is negative; use 0 or a small positive value such as 1e-6")
        scale = float(xx.diagonal().mean()) or 1.0
        eye = torch.eye(xx.shape[0], dtype=xx.dtype, device=xx.device)
        lam = ridge
        while True:
            chol, info = torch.linalg.cholesky_ex(xx + lam * scale * eye)
            if int(info) == 0:
                self.last_ridge = lam
                return torch.cholesky_solve(xy, chol)
            if lam >= 1.0:
                raise GhostsearchError(
                    "the calibration Gram matrix cannot be factorised even with ridge 1; "
                    "check the calibration activations"
                )
            lam = max(lam * 10, 1e-10)

    def solve_symmetric(self, ridge: float = 1e-6) -> torch.Tensor:
        xx, xy = self.grams()
        if ridge < 0:
            raise GhostsearchError(f"ridge={ridge} is negative; use 0 or a small positive value such as 1e-6")
        if xy.shape[0] != xy.shape[1]:
            raise GhostsearchError(f"a symmetric solve needs a square map; X^T Y is {tuple(xy.shape)}")
        scale = float(xx.diagonal().mean()) or 1.0
        e, v = torch.linalg.eigh(xx + ridge * scale * torch.eye(xx.shape[0], dtype=xx.dtype, device=xx.device))
        d = e[:, None] + e[None, :]
        cut = 2 * e.max() * max(self.n, e.numel()) * torch.finfo(e.dtype).eps
        rhs = v.T @ (xy + xy.T) @ v
        k = torch.where(d > cut, rhs / d.clamp_min(cut), torch.zeros_like(d))
        self.last_ridge = ridge
        return v @ k @ v.T

    def _pinv(self) -> torch.Tensor:
        xx, xy = self.grams()
        e, v = torch.linalg.eigh(xx)
        cut = e.max() * max(self.n, e.numel()) * torch.finfo(e.dtype).eps
        inv = torch.where(e > cut, 1.0 / e.clamp_min(cut), torch.zeros_like(e))
        self.last_ridge = 0.0
        return v @ (inv[:, None] * (v.T @ xy))

    def residual(self, w: torch.Tensor | None) -> float:
        """||Y - X W||_F^2 from the Grams (W None: ||Y||^2)."""
        if w is None:
            return self.yy
        xx, xy = self.xx, self.xy
        if xx is None or xy is None:
            raise GhostsearchError("no calibration tokens reached this cut; use a non-empty calibration set")
        w = w.to(xx)
        r = self.yy - 2 * float((w * xy).sum()) + float((w * (xx @ w)).sum())
        return max(r, 0.0)
