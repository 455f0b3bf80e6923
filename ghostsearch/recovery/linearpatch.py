"""LinearPatch (training-free part): x <- x P at the end of each cut, P = H diag(s) H^T.

H is an orthonormal Walsh-Hadamard rotation (spreads outlier channels before scaling); for a
channel count C that is not a power of two, H is block-diagonal over the binary decomposition of
C (576 = 512 + 64), still orthonormal. s_j = mean|X_post H|_j / mean|X_pre H|_j over calibration
tokens. Variant ``diagonal``: H = I (per-channel scaling only). P is symmetric by construction,
so it cannot express the antisymmetric part of the ghosted operator. Stored as M = P - I and
applied like ghosted (x + x M, fp32).
"""
from __future__ import annotations

import torch


from ghostsearch.recovery.ghosted import CutStats, ResidualLinear


def sylvester(n: int) -> torch.Tensor:
    h = torch.ones(1, 1, dtype=torch.float64)
    while h.shape[0] < n:
        h = torch.cat([torch.cat([h, h], 1), torch.cat([h, -h], 1)], 0)
    return h / h.shape[0] ** 0.5


def hadamard(c: int) -> torch.Tensor:
    """Orthonormal [c x c]: block-diagonal normalised Sylvester blocks of the powers of two in c."""
    sizes = [1 << i for i in reversed(range(c.bit_length())) if c >> i & 1]
    return torch.block_diag(*[sylvester(s) for s in sizes])


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
