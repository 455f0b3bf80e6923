"""Recovery-aware scoring: the value of a candidate AFTER ghosted (dense) recovery.

Prepared with ``params={'recovery': 'ghosted', 'max_window': 12, 'ridge': 1e-6, 'solver': 'ridge'}``.
``prepare_aware`` makes one pass over the dense calibration states: for every boundary a it
accumulates G_aa = X_a^T X_a and G_ab = X_a^T X_b for b in a+1..a+max_window (float64), and solves
the ghosted operator of every cut [a, b) once. ``aware_patches`` is then a dictionary lookup: a
candidate costs no activation pass and no solve. Cuts longer than max_window are an error.

Memory: one fp32 C x C matrix per (a, b) pair, about L * max_window * C^2 * 4 bytes
(SmolLM2-135M, max_window 12: ~0.4 GB; an 8B model (C = 4096) wants max_window <= 2 or so).
Storing the solved operators instead of G_ab halves that and removes the per-candidate solve.
"""
from __future__ import annotations

import torch

from ghostsearch.errors import GhostsearchError
from ghostsearch.recovery.base import cuts
from ghostsearch.recovery.ghosted import residual_fn
from ghostsearch.recovery.gram import GramLS, finite_rows


@torch.no_grad()
def prepare_aware(scorer, key: str, caps_states: list[list[torch.Tensor]]) -> None:
    p = scorer.prepared[key]
    if p.recovery != "ghosted":
        raise GhostsearchError(f"recovery-aware scoring supports recovery='ghosted', not {p.recovery!r}")
    params = p.objective.params
    window, ridge = int(params.get("max_window", 12)), float(params.get("ridge", 1e-6))
    solver = str(params.get("solver", "ridge"))
    if window < 1:
        raise GhostsearchError(f"max_window={window}; use 1 or more (the longest cut to cache)")
    L = scorer.stack.n_blocks
    weights = [b.weight for b in p.batches]
    mats: dict[tuple[int, int], torch.Tensor] = {}
    for a in range(L):
        ends = range(a + 1, min(a + window, L) + 1)
        gaa, gab, n = 0.0, {b: 0.0 for b in ends}, 0
        for states, w in zip(caps_states, weights):
            xa = finite_rows(states[a], f"state entering block {a}", w)
            gaa, n = gaa + xa.T @ xa, n + xa.shape[0]
            for b in ends:
                gab[b] = gab[b] + xa.T @ finite_rows(states[b], f"state at {b}", w)
        for b in ends:
            ls = GramLS()
            ls.xx, ls.xy, ls.n = gaa, gab[b] - gaa, n
            mats[(a, b)] = ls.solve(ridge, solver).float()
    p.aware.update(mats=mats, max_window=window)


def aware_patches(scorer, key: str, removed) -> dict:
    p = scorer.prepared[key]
    out = {}
    for a, b in cuts(removed):
        m = p.aware["mats"].get((a, b))
        if m is None:
            raise GhostsearchError(f"cut {a}..{b - 1} is longer than max_window={p.aware['max_window']}; "
                                   "prepare the objective with a larger max_window")
        out[b] = residual_fn(m)
    return out
