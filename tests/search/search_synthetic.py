"""Synthetic depth-pruning objectives with a known optimum, and dense statistics that agree with them.

value(R) = Σ_{i∈R} a_i + Σ_{i<j∈R} b_ij (lower is better), a_i > 0 the cost of losing block i
alone, b_ij a pairwise interaction (larger for neighbouring blocks, as in real models). At
fidelity f < 1 a deterministic screening error of size (1 - f) * noise is added."""
from __future__ import annotations

import itertools
import zlib
from dataclasses import dataclass

import numpy as np

from ghostsearch.search.base import FunctionEvaluator, Removed


@dataclass
class Synthetic:
    a: np.ndarray
    b: np.ndarray  # symmetric, zero diagonal
    noise: float = 0.1

    @classmethod
    def random(cls, L: int = 12, seed: int = 0) -> "Synthetic":
        rng = np.random.default_rng(seed)
        a = rng.uniform(0.2, 1.2, L)
        a[[0, -1]] += 2.0  # first and last blocks matter most
        b = rng.normal(0.0, 0.3, (L, L))
        b += 0.5 * np.exp(-np.abs(np.subtract.outer(np.arange(L), np.arange(L))))  # neighbours interact
        b = np.triu(b, 1)
        return cls(a, b + b.T)

    @property
    def L(self) -> int:
        return len(self.a)

    def value(self, removed: Removed, fidelity: float = 1.0) -> float:
        r = list(removed)
        v = self.a[r].sum() + self.b[np.ix_(r, r)].sum() / 2
        if fidelity < 1.0:
            v += (1.0 - fidelity) * self.noise * (zlib.crc32(repr(tuple(r)).encode()) / 2**32 - 0.5) * 2
        return float(v)

    def optimum(self, k: int, protected=()) -> tuple[Removed, float, np.ndarray]:
        """The best k-set by enumeration, its value, and every k-set's value (for ranks)."""
        free = [i for i in range(self.L) if i not in set(protected)]
        sets = list(itertools.combinations(free, k))
        vals = np.array([self.value(s) for s in sets])
        i = int(vals.argmin())
        return sets[i], float(vals[i]), vals

    def statistics(self, ks=range(1, 13)) -> dict:
        """Block Influence = normalised a; cosine between the inputs of blocks i < j = exp(-Σ a[i:j] / 4)
        (each block turns the residual stream by its importance); window distances from it."""
        L, c = self.L, np.concatenate([[0.0], np.cumsum(self.a)])
        S = np.exp(-np.abs(np.subtract.outer(c[:L], c[:L])) / 4)
        windows = {k: np.arccos(np.exp(-(c[k:] - c[:-k]) / 4)) / np.pi for k in ks if k < L}
        return {"block_influence": self.a / self.a.max(), "similarity": S, "window_distance": windows}

    def evaluator(self) -> FunctionEvaluator:
        return FunctionEvaluator(self.value, statistics=self.statistics())
