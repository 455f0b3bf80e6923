"""Residual linear repairs x <- x + x M at the end of each cut: ``ghosted`` (and ``none``).

Ghosted Layers: for a cut [a, b), X_pre = the state entering block a, X_post = the state entering
block b (dense model), Delta = X_post - X_pre, M* = argmin ||X_pre M - Delta||_F, solved from
Gram matrices accumulated in float64 (``gram.GramLS``). Variants: ``dense`` (every operator from
dense activations, the paper), ``sequential`` (X_pre of each cut taken from the model already
pruned and repaired up to that cut; the target stays dense) and ``symmetric`` (an ablation: the
best SYMMETRIC M in closed form, ``GramLS.solve_symmetric``; W = I + M is then symmetric like
LinearPatch's operator, so the difference to ``dense`` is what the antisymmetric part buys).
Applied in fp32, cast back.

Per operator the report gives the antisymmetric share of W* = I + M, ||(W - W^T)/2||_F / ||W||_F
(``antisymmetric_share_w``, the paper's quantity), the same share of M alone
(``antisymmetric_share``; the identity dilutes the first), and the relative alignment error
||X_post - X_pre (I + M)||_F / ||X_post||_F before (M = 0) and after.
"""

from __future__ import annotations

import contextlib
import math
from dataclasses import dataclass, field
from typing import Callable

import torch

from ghostsearch.model.stack import check_removed
from ghostsearch.recovery.base import Activations, Recovery, cuts, hook_boundary, new_index
from ghostsearch.recovery.gram import GramLS, finite_rows


def residual_fn(m: torch.Tensor):
    """h -> h + h M computed in fp32 and cast back to h's dtype."""
    m = m.float()

    def fn(h: torch.Tensor) -> torch.Tensor:
        x = h.float()
        return (x + x @ m.to(x.device)).to(h.dtype)

    return fn


def antisymmetric_share(m: torch.Tensor | None, identity: bool = False) -> float:
    """||(A - A^T)/2||_F / ||A||_F for A = M, or A = I + M with ``identity`` (M None: 0)."""
    if m is None:
        return 0.0
    a = m + torch.eye(m.shape[0], dtype=m.dtype, device=m.device) if identity else m
    norm = float(a.norm())
    return float(((m - m.T) / 2).norm()) / norm if norm > 0 else 0.0


@dataclass
class CutStats:
    ls: GramLS = field(default_factory=GramLS)  # X_pre -> Delta
    ref: float = 0.0  # ||X_post||^2
    extra: dict = field(default_factory=dict)  # method-specific sums


def cut_pairs(stack, removed, data: Activations, a: int, b: int, patches: dict | None = None):
    """(X_pre, X_post) float64 rows per micro-batch for the cut [a, b). X_post is dense; X_pre is
    dense, or with ``patches`` the state of the model pruned and repaired with them (sequential)."""
    first = removed[0]
    for cap, w in data:
        if patches is None or a == first:
            xa = cap.states[a]
        else:
            xa = stack.run(cap.states[first], cap, first, removed, stop=a, patches=patches)
        # a split model (placement) keeps a and b on their blocks' devices: pair them on a's
        yield (
            finite_rows(xa, f"state entering block {a}", w),
            finite_rows(cap.states[b].to(xa.device), f"state at {b}", w),
        )


class ResidualLinear(Recovery):
    """One C x C operator per cut, acting at its end boundary b."""

    @property
    def sequential(self) -> bool:
        """X_pre of each cut from the model already repaired at the cuts before it (else the dense model's)."""
        return False

    def accumulate(self, st: CutStats, xa: torch.Tensor, xb: torch.Tensor) -> None:
        st.ls.update(xa, xb - xa)
        st.ref += float((xb * xb).sum())

    def solve(self, st: CutStats) -> torch.Tensor | None:
        raise NotImplementedError

    def describe(self, st: CutStats) -> dict:
        """Method-specific report entries of one cut."""
        return {}

    @torch.no_grad()
    def fit(self, stack, removed, data: Activations):
        removed = check_removed(removed, stack.n_blocks)
        mats: dict[int, torch.Tensor] = {}
        report: list[dict] = []
        patches: dict[int, Callable[[torch.Tensor], torch.Tensor]] = {}
        for a, b in cuts(removed):
            st = CutStats()
            for xa, xb in cut_pairs(stack, removed, data, a, b, patches if self.sequential else None):
                self.accumulate(st, xa, xb)
            m = self.solve(st)
            if m is not None:
                mats[b] = m.float()
                patches[b] = residual_fn(m)
            report.append(cut_report(a, b, st, m) | self.describe(st))
        return self.operators(removed, stack.n_blocks, mats, report)

    @contextlib.contextmanager
    def patches(self, stack, ops):
        yield {b: residual_fn(m) for b, m in ops.mats.items()}

    def apply(self, model, ops) -> list:
        return [hook_boundary(model, new_index(b, ops.removed), residual_fn(m)) for b, m in ops.mats.items()]


def cut_report(a: int, b: int, st: CutStats, m: torch.Tensor | None) -> dict:
    ref = st.ref or 1.0
    return {
        "cut": [a, b],
        "tokens": st.ls.n,
        "alignment_before": math.sqrt(st.ls.residual(None) / ref),
        "alignment_after": math.sqrt(st.ls.residual(m) / ref),
        "antisymmetric_share": antisymmetric_share(m),
        "antisymmetric_share_w": antisymmetric_share(m, identity=True),
        "ridge": st.ls.last_ridge,
    }


class Ghosted(ResidualLinear):
    name = "ghosted"
    variants = ("dense", "sequential", "symmetric")

    @property
    def sequential(self) -> bool:
        return self.variant == "sequential"

    def solve(self, st: CutStats) -> torch.Tensor:
        if self.variant == "symmetric":
            return st.ls.solve_symmetric(self.ridge)
        return st.ls.solve(self.ridge, self.solver)


class NoRecovery(ResidualLinear):
    """Nothing added; the report still gives each cut's alignment error."""

    name = "none"
    identity = True

    def solve(self, st: CutStats) -> None:
        return None
