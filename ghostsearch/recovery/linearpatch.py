"""LinearPatch (training-free part): x <- x P at the end of each cut, P = H diag(s) H^T.

H is an orthonormal Hadamard rotation (spreads outlier channels before scaling): a true Hadamard
matrix of order C whenever ``hadamard.construction(C)`` knows one (Sylvester x Paley I/II or
Williamson; SmolLM2's C = 576 = 16 x 36, Paley II), else the documented fallback, block-diagonal
Sylvester blocks over the binary digits of C (still orthonormal, but it mixes channels only within
each block). Each cut's report says which (``rotation``). s_j = mean|X_post H|_j / mean|X_pre H|_j
over calibration tokens. Variant ``diagonal``: H = I (per-channel scaling only). P is symmetric by
construction, so it cannot express the antisymmetric part of the ghosted operator. Stored as
M = P - I and applied like ghosted (x + x M, fp32).
"""

from __future__ import annotations

import torch

from ghostsearch.recovery.ghosted import CutStats, ResidualLinear
from ghostsearch.recovery.hadamard import describe, orthonormal


def hadamard(c: int) -> torch.Tensor:
    """Orthonormal [c x c] float64 rotation (see the module docstring)."""
    return torch.from_numpy(orthonormal(c))


class LinearPatch(ResidualLinear):
    name = "linearpatch"
    variants = ("hadamard", "diagonal")

    def rotation(self, c: int, device) -> torch.Tensor:
        eye = torch.eye(c, dtype=torch.float64, device=device)
        return hadamard(c).to(device) if self.variant == "hadamard" else eye

    def accumulate(self, st: CutStats, xa: torch.Tensor, xb: torch.Tensor) -> None:
        super().accumulate(st, xa, xb)
        if "h" not in st.extra:
            st.extra.update(h=self.rotation(xa.shape[-1], xa.device), pre=0.0, post=0.0)
        st.extra["pre"] = st.extra["pre"] + (xa @ st.extra["h"]).abs().sum(0)
        st.extra["post"] = st.extra["post"] + (xb @ st.extra["h"]).abs().sum(0)

    def solve(self, st: CutStats) -> torch.Tensor:
        h, pre, post = st.extra["h"], st.extra["pre"], st.extra["post"]
        s = torch.where(pre > 0, post / pre.clamp_min(1e-30), torch.ones_like(pre))
        return (h * s) @ h.T - torch.eye(h.shape[0], dtype=h.dtype, device=h.device)

    def describe(self, st: CutStats) -> dict:
        c = st.extra["h"].shape[0] if "h" in st.extra else 0
        return {"rotation": describe(c) if self.variant == "hadamard" and c else "identity"}
