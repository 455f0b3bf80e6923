"""Recovery-aware scoring: the value of a candidate AFTER ghosted (dense) recovery of every cut.

Set by ``search.recovery_aware: ghosted`` (with ``search.aware_window``, ``AwareSpec.max_window`` here, and
``recovery.ridge``); the Scorer is given a ``GhostedAware`` provider (``scoring.PatchProvider``) when it prepares the
objective. ``prepare`` makes one pass over the dense calibration states: for every boundary a it
accumulates G_aa = X_a^T X_a and G_ab = X_a^T X_b for b in a+1..a+max_window (float64), and solves
the ghosted operator of every cut [a, b) once, storing only the solved C x C operators.
``patches`` is then a dictionary lookup: a candidate costs no activation pass and no solve. Cuts
longer than max_window are an error.

Memory: one fp32 C x C operator per (a, b) pair, about L * max_window * C^2 * 4 bytes
(SmolLM2-135M, max_window 12: ~0.4 GB; an 8B model (C = 4096) wants max_window <= 2 or so).
"""

from __future__ import annotations

import torch

from ghostsearch.core.errors import GhostsearchError
from ghostsearch.model.stack import Batch, Stack
from ghostsearch.objectives import AwareSpec, ObjectiveSpec
from ghostsearch.recovery.base import cuts
from ghostsearch.recovery.ghosted import residual_fn
from ghostsearch.recovery.gram import GramLS, finite_rows


class GhostedAware:
    def __init__(self, spec: AwareSpec):
        if spec.method != "ghosted":
            raise GhostsearchError(f"search.recovery_aware={spec.method!r}; recovery-aware scoring supports ghosted")
        if spec.max_window < 1:
            raise GhostsearchError(f"search.aware_window={spec.max_window}; use 1 or more (the longest cut to cache)")
        self.spec = spec
        self.mats: dict[tuple[int, int], torch.Tensor] = {}

    @torch.no_grad()
    def prepare(self, stack: Stack, batches: list[Batch], states: list[list[torch.Tensor]]) -> None:
        L, window = stack.n_blocks, self.spec.max_window
        weights = [b.weight for b in batches]
        for a in range(L):
            ends = range(a + 1, min(a + window, L) + 1)
            gaa: torch.Tensor | None = None
            gab: dict[int, torch.Tensor] = {}
            n = 0
            for st, w in zip(states, weights):
                xa = finite_rows(st[a], f"state entering block {a}", w)
                gaa, n = (xa.T @ xa if gaa is None else gaa + xa.T @ xa), n + xa.shape[0]
                for b in ends:
                    g = xa.T @ finite_rows(st[b], f"state at {b}", w)
                    gab[b] = g if b not in gab else gab[b] + g
            if gaa is None:
                raise GhostsearchError("recovery-aware scoring needs calibration states; the calibration is empty")
            for b in ends:
                ls = GramLS.from_grams(gaa, gab[b] - gaa, n)
                self.mats[(a, b)] = ls.solve(self.spec.ridge, self.spec.solver).float()

    def patches(self, removed) -> dict:
        out = {}
        for a, b in cuts(removed):
            m = self.mats.get((a, b))
            if m is None:
                raise GhostsearchError(
                    f"cut {a}..{b - 1} is longer than search.aware_window={self.spec.max_window}; raise it"
                )
            out[b] = residual_fn(m)
        return out


def prepare(scorer, spec: ObjectiveSpec) -> str:
    """Prepare ``spec`` on ``scorer``, giving it its recovery-aware provider when the spec has one."""
    return scorer.prepare(spec, GhostedAware(spec.aware) if spec.aware else None)
