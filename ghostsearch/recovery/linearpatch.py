"""LinearPatch (training-free part): x <- x P at the end of each cut, P = H diag(s) H^T.

H is an orthonormal Hadamard rotation (spreads outlier channels before scaling). Two choices,
``rotation`` (config ``recovery.linearpatch_rotation``):

* ``quarot`` (default): the authors' code's matrix, QuaRot / QuIP#'s ``matmul_hadU`` of the
  identity, (had_K x Sylvester(C / K))^T / sqrt(C): SmolLM2's C = 576 is had36 x 16, Gemma-3's
  640 is had40 x 16 (``hadamard.quarot_pm1``). Where QuaRot has no base for C, or its base is not
  built here, the ``paley`` matrix is used and the report says so.
* ``paley``: this project's first construction, Sylvester(2^j) x Paley I/II or Williamson
  (576 = 16 x 36, Paley II interleaved; ``hadamard.hadamard_pm1``), else the block-diagonal
  Sylvester fallback. Equally orthonormal and a true Hadamard matrix, not a signed permutation of
  ``quarot``'s: the same scale estimate gives a different P.

Each cut's report says which (``rotation``). The scale s, ``scale`` (``recovery.linearpatch_scale``),
from Y = X H (X_pre: the state entering the cut's first block; X_post: the dense state at its end):

* ``mean_ratio`` (default, the authors' ``get_scale_params``): per calibration sequence n,
  r_n = mean_t |Y_post|_{n,t} / mean_t |Y_pre|_{n,t} (per channel, over that sequence's tokens),
  and s = mean_n r_n;
* ``pooled``: s = sum_{n,t} |Y_post| / sum_{n,t} |Y_pre|, one ratio over every token.

They agree when every sequence has the same ratio; a sequence whose activations are small
weighs as much as any other in ``mean_ratio`` and little in ``pooled``. Variant ``diagonal``: H = I
(per-channel scaling only). P is symmetric by construction, so it cannot express the
antisymmetric part of the ghosted operator. Stored as M = P - I and applied like ghosted
(x + x M, fp32).
"""

from __future__ import annotations

import torch

from ghostsearch.core.errors import GhostsearchError
from ghostsearch.model.stack import check_removed
from ghostsearch.recovery.base import Activations, cuts
from ghostsearch.recovery.ghosted import CutStats, ResidualLinear, cut_report
from ghostsearch.recovery.gram import finite_rows
from ghostsearch.recovery.hadamard import CONSTRUCTIONS_OF_N, check_construction, describe, orthonormal

ROTATIONS = CONSTRUCTIONS_OF_N  # ("quarot", "paley"): the first is the default
SCALES = ("mean_ratio", "pooled")


def hadamard(c: int, rotation: str = "quarot") -> torch.Tensor:
    """Orthonormal [c x c] float64 rotation (see the module docstring)."""
    return torch.from_numpy(orthonormal(c, rotation))


def channel_scale(pre: torch.Tensor, post: torch.Tensor) -> torch.Tensor:
    """post / pre per channel, 1 where pre is 0."""
    return torch.where(pre > 0, post / pre.clamp_min(1e-30), torch.ones_like(pre))


def check_scale(scale: str) -> str:
    if scale not in SCALES:
        raise GhostsearchError(f"LinearPatch scale {scale!r} is unknown; use one of: {', '.join(SCALES)}")
    return scale


class LinearPatch(ResidualLinear):
    name = "linearpatch"
    variants = ("hadamard", "diagonal")

    def __init__(
        self,
        variant: str | None = None,
        ridge: float = 1e-6,
        solver: str = "ridge",
        rotation: str = ROTATIONS[0],
        scale: str = SCALES[0],
    ):
        super().__init__(variant, ridge, solver)
        self.rotation_name, self.scale = check_construction(rotation), check_scale(scale)

    def rotation(self, c: int, device) -> torch.Tensor:
        eye = torch.eye(c, dtype=torch.float64, device=device)
        return hadamard(c, self.rotation_name).to(device) if self.variant == "hadamard" else eye

    def accumulate(self, st: CutStats, xa: torch.Tensor, xb: torch.Tensor) -> None:
        """One calibration sequence's rows (``fit`` passes them a sequence at a time)."""
        super().accumulate(st, xa, xb)
        if "h" not in st.extra:
            st.extra.update(h=self.rotation(xa.shape[-1], xa.device), pre=0.0, post=0.0, ratios=0.0, n=0)
        h = st.extra["h"]
        pre, post = (xa @ h).abs().sum(0), (xb @ h).abs().sum(0)
        st.extra["pre"] = st.extra["pre"] + pre
        st.extra["post"] = st.extra["post"] + post
        st.extra["ratios"] = st.extra["ratios"] + channel_scale(pre, post)  # the token counts cancel
        st.extra["n"] += 1

    def scales(self, st: CutStats) -> torch.Tensor:
        """s of the cut under this estimator (``scale``)."""
        if self.scale == "mean_ratio":
            return st.extra["ratios"] / st.extra["n"]
        return channel_scale(st.extra["pre"], st.extra["post"])

    def solve(self, st: CutStats) -> torch.Tensor:
        h, s = st.extra["h"], self.scales(st)
        return (h * s) @ h.T - torch.eye(h.shape[0], dtype=h.dtype, device=h.device)

    @torch.no_grad()
    def fit(self, stack, removed, data: Activations):
        """As ResidualLinear.fit (dense X_pre and X_post per cut), one calibration sequence at a
        time so that ``mean_ratio`` can average per-sequence ratios (padding rows left out)."""
        removed = check_removed(removed, stack.n_blocks)
        mats: dict[int, torch.Tensor] = {}
        report: list[dict] = []
        for a, b in cuts(removed):
            st = CutStats()
            for cap, w in data:
                xa_all = cap.states[a]
                xb_all = cap.states[b].to(xa_all.device)
                for i in range(xa_all.shape[0]):
                    wi = None if w is None else w[i]
                    xa = finite_rows(xa_all[i], f"state entering block {a}", wi)
                    xb = finite_rows(xb_all[i], f"state at {b}", wi)
                    if len(xa):
                        self.accumulate(st, xa, xb)
            m = self.solve(st)
            mats[b] = m.float()
            report.append(cut_report(a, b, st, m) | self.describe(st))
        return self.operators(removed, stack.n_blocks, mats, report)

    def describe(self, st: CutStats) -> dict:
        c = st.extra["h"].shape[0] if "h" in st.extra else 0
        rotation = describe(c, self.rotation_name) if self.variant == "hadamard" and c else "identity"
        return {"rotation": rotation, "scale": self.scale}
