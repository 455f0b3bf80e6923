"""Synthetic depth-pruning objectives with a known optimum, and dense statistics that agree with them.

value(R) = Σ_{i∈R} a_i + Σ_{i<j∈R} b_ij (lower is better), a_i > 0 the cost of losing block i
alone, b_ij a pairwise interaction (larger for neighbouring blocks, as in real models). At
fidelity f < 1 a deterministic screening error of size (1 - f) * noise is added. ``Rugged`` is a
landscape that is not of this (quadratic) form; both give per-row losses for racing (``row_loss``)."""

from __future__ import annotations

import itertools
import zlib
from dataclasses import dataclass

import numpy as np

from ghostsearch.search import FunctionEvaluator
from ghostsearch.search.base import Removed


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

    def row(self, removed: Removed, r: int, rows: int = 32, noise: float = 0.05) -> float:
        return row_loss(self.value(removed), removed, r, rows, noise)

    def evaluator(self, rows: int = 32) -> FunctionEvaluator:
        """Exact values; racing sees ``rows`` per-row losses whose mean is the value (``row_loss``)."""
        return FunctionEvaluator(
            self.value,
            statistics=self.statistics(),
            row_fn=lambda removed, r: self.row(removed, r, rows),
            rows_total=rows,
        )


def _unit(*key) -> float:
    """A deterministic number in [-1, 1) from a key."""
    return zlib.crc32(repr(key).encode()) / 2**31 - 1.0


def row_loss(value: float, removed: Removed, r: int, rows: int, noise: float) -> float:
    """Row r of ``rows`` calibration rows of a candidate whose value is ``value``:
    value + c_r (1 + |value| / 4) + noise * e_r(R), c and e centred over the rows, so the mean over
    every row is exactly the value; c_r is a difficulty every candidate shares (what pairing
    cancels), e_r(R) the candidate's own part."""
    key = tuple(sorted(removed))
    c = np.array([_unit("row", i) for i in range(rows)])
    e = np.array([_unit(key, i) for i in range(rows)])
    return float(value + (c[r] - c.mean()) * (1 + abs(value) / 4) + noise * (e[r] - e.mean()))


@dataclass
class Rugged:
    """A landscape that is NOT the quadratic form cbo fits, with per-row losses for racing.

    value(R) = exp(s(R) / 4) + Σ_{i<j<l ∈ R} t_ijl + 1.5 · [R holds three consecutive blocks]
    where s(R) = Σ a_i + Σ b_ij (the additive + pairwise part, as in ``Synthetic``), t a sparse
    third-order interaction and the last term a threshold: a curved, third-order, discontinuous
    landscape. Per-row losses for racing: ``row_loss`` on ``rows`` rows. Fidelity f < 1 (plain
    screening) is the mean over the first ceil(f · rows) rows."""

    base: Synthetic
    t: dict
    rows: int = 32
    noise: float = 0.05

    @classmethod
    def random(cls, L: int = 12, seed: int = 0, rows: int = 32, noise: float = 0.05) -> "Rugged":
        rng = np.random.default_rng(seed + 1000)
        triples = list(itertools.combinations(range(L), 3))
        pick = rng.choice(len(triples), size=len(triples) // 6, replace=False)
        return cls(Synthetic.random(L, seed), {triples[i]: float(rng.normal(0, 0.6)) for i in pick}, rows, noise)

    @property
    def L(self) -> int:
        return self.base.L

    def value(self, removed: Removed, fidelity: float = 1.0) -> float:
        if fidelity < 1.0:
            n = max(1, int(np.ceil(fidelity * self.rows - 1e-9)))
            return float(np.mean([self.row(removed, r) for r in range(n)]))
        r = tuple(sorted(removed))
        v = np.exp(self.base.value(r) / 4) + sum(self.t.get(x, 0.0) for x in itertools.combinations(r, 3))
        return float(v + 1.5 * any(b - a == 2 and b - 1 in r for a, b in itertools.combinations(r, 2)))

    def row(self, removed: Removed, r: int) -> float:
        return row_loss(self.value(removed), removed, r, self.rows, self.noise)

    def optimum(self, k: int, protected=()) -> tuple[Removed, float]:
        free = [i for i in range(self.L) if i not in set(protected)]
        return min(((s, self.value(s)) for s in itertools.combinations(free, k)), key=lambda x: x[1])

    def evaluator(self) -> FunctionEvaluator:
        return FunctionEvaluator(self.value, statistics=self.base.statistics(), row_fn=self.row, rows_total=self.rows)
