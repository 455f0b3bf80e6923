"""Racing: paired successive elimination of a batch of candidates on calibration rows.

Every candidate of a race is scored on the same calibration rows, in one fixed seeded order
(``order``), look after look: rows [0, n_1), then [n_1, n_2), ... (``schedule``). After each look
the per-row loss sums are compared in pairs: for candidates a and b on the n rows seen so far,
d_r = loss_r(a) - loss_r(b), and a is *confidently worse* than b when

    mean(d) - t_{1-alpha, n-1} * sd(d) / sqrt(n) * sqrt(1 - n/N) > 0

(a one-sided Student-t bound with the finite-population correction: the N calibration rows are
the whole population, so at n = N the bound is the exact difference). A candidate that is
confidently worse than ``keep`` others is dropped; survivors go on; every survivor ends at full
fidelity. ``alpha = delta / (keep * (m - 1) * looks)`` (a union bound over the winners, their m - 1
rivals and the looks), so a true top-``keep`` candidate is dropped with probability at most
``delta`` when the mean of the paired differences is close to normal (a t-approximation, not a
distribution-free guarantee).

The ranking of two candidates follows the sign of sum_r d_r when the objective's value is
increasing in its loss sum at a fixed count and the per-row counts do not depend on the candidate
(perplexity, margin and kl: they do not).

Cost: a candidate scored on n of N rows costs n / N full-evaluation equivalents (fidelity n / N),
so raced and exact scoring spend the same budget unit. A race never spends more than ``cap``: when
the next look for every survivor would leave too little for ``keep`` survivors to finish, the
survivors with the worst partial mean are dropped first (before any row when even the first look
is unaffordable: those candidates are not scored and not told).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Protocol, Sequence

import numpy as np
from scipy import stats

from ghostsearch.errors import GhostsearchError
from ghostsearch.search.base import Candidate, Removed


@dataclass(frozen=True)
class RaceParams:
    """``race`` of a searcher's parameters: ``true`` or ``{delta: .., min_rows: .., growth: ..}``.

    delta:    the race's error probability (a true top-``keep`` candidate dropped), default 0.05.
    min_rows: rows every candidate is scored on before the first look (default 4; at least 2).
    growth:   each look multiplies the rows seen by this factor (default 2: looks at 4, 8, 16 ... rows).
    order_seed: the seed of the row order (the same for every searcher, so races share the cache)."""

    delta: float = 0.05
    min_rows: int = 4
    growth: float = 2.0
    order_seed: int = 0

    def __post_init__(self):
        if not 0 < self.delta < 1:
            raise ValueError("race.delta must be in (0, 1)")
        if isinstance(self.min_rows, bool) or int(self.min_rows) != self.min_rows or self.min_rows < 2:
            raise ValueError("race.min_rows must be an integer >= 2")
        if self.growth <= 1:
            raise ValueError("race.growth must be > 1")

    def schedule(self, n_rows: int) -> list[int]:
        """Rows seen at each look: min_rows, x growth ..., ending at n_rows."""
        out, n = [], min(self.min_rows, n_rows)
        while n < n_rows:
            out.append(n)
            n = max(n + 1, math.ceil(n * self.growth))
        return out + [n_rows]

    def order(self, n_rows: int) -> np.ndarray:
        return np.random.default_rng([self.order_seed, n_rows]).permutation(n_rows)


def race_params(value: Any) -> RaceParams | None:
    """A searcher's ``race`` parameter: False/None (off), True (defaults) or a dict of RaceParams."""
    if value is None or value is False:
        return None
    if value is True:
        return RaceParams()
    if isinstance(value, RaceParams):
        return value
    if not isinstance(value, dict):
        raise ValueError("race must be true, false or a mapping such as {delta: 0.05}")
    known = set(RaceParams.__dataclass_fields__)
    unknown = sorted(set(value) - known)
    if unknown:
        raise ValueError(f"race has no parameter {unknown[0]!r}; known: {', '.join(sorted(known))}")
    return RaceParams(**value)


@dataclass(frozen=True)
class Race:
    """What a searcher's ``ask`` returns to race ``candidates`` instead of scoring them all: the
    ``keep`` best end at full fidelity, spending at most ``cap`` full-evaluation equivalents
    (default: every candidate at full fidelity). Candidates first in the list are kept first when
    the cap forces a cut before any row is scored."""

    candidates: list[Candidate]
    params: RaceParams
    keep: int = 1
    cap: float | None = None

    @property
    def cost(self) -> float:
        return float(len(self.candidates)) if self.cap is None else min(self.cap, float(len(self.candidates)))


@dataclass(frozen=True)
class RowRequest:
    """Score ``removed`` on the calibration rows ``rows`` (a block of the race order). ``start``:
    rows it was scored on before in this race; ``before``: their (loss sum, count), so that the
    evaluator can give the partial value on every row seen."""

    removed: Removed
    prefix: Removed | None
    rows: tuple[int, ...]
    start: int = 0
    before: tuple[float, float] = (0.0, 0.0)

    @property
    def seen(self) -> int:
        return self.start + len(self.rows)


class RowEvaluator(Protocol):
    """What racing scores through: per-row loss sums of blocks of calibration rows."""

    def n_rows(self) -> int: ...

    def rows(self, requests: Sequence[RowRequest], searcher: str) -> list[tuple[list[float], list[float], float]]:
        """Per request: the per-row loss sums and counts of its rows (in order), and the candidate's
        value on every row seen so far (its partial value; the full value once all rows are seen)."""
        ...


@dataclass
class Outcome:
    """The race's result: every scored candidate at the fidelity it reached, and its value there
    (partial below 1: flagged in the ledger, never an answer)."""

    told: list[Candidate] = field(default_factory=list)
    values: list[float] = field(default_factory=list)
    unscored: list[Candidate] = field(default_factory=list)


def confidently_worse(X: np.ndarray, n_total: int, alpha: float) -> np.ndarray:
    """W[a, b] = True when a is confidently worse than b on the rows of X ([m, n] per-row sums)."""
    m, n = X.shape
    D = X[:, None, :] - X[None, :, :]
    mean = D.mean(-1)
    if n >= n_total:
        return mean > 0
    sd = D.std(-1, ddof=1)
    radius = stats.t.ppf(1 - alpha, n - 1) * sd / math.sqrt(n) * math.sqrt(1 - n / n_total)
    return mean - radius > 1e-12 * (1 + np.abs(X).mean())


def run_race(race: Race, evaluator: RowEvaluator, searcher: str) -> Outcome:
    """Race ``race.candidates`` through ``evaluator`` (deterministic: ties go to the smaller set)."""
    N = int(evaluator.n_rows())
    p, cands = race.params, list(race.candidates)
    if N < 2:
        raise GhostsearchError(f"racing needs at least 2 calibration rows, got {N}; raise calibration.n_seq")
    order, looks = p.order(N), p.schedule(N)
    keep = max(1, min(race.keep, len(cands)))
    if race.cost < keep - 1e-9:
        raise RuntimeError(f"{searcher}: a race keeping {keep} needs a cap of at least {keep}, got {race.cost:g}")
    alpha = p.delta / (keep * max(1, len(cands) - 1) * len(looks))
    alive = list(range(len(cands)))
    rows: list[list[float]] = [[] for _ in cands]
    seen = [(0.0, 0.0)] * len(cands)  # per candidate: (loss sum, count) over its rows so far
    value = [math.nan] * len(cands)
    left, n = race.cost, 0
    for nxt in looks:
        # afford this look for every survivor and leave enough for `keep` of them to finish
        fit = max(1, int((left - keep * (N - nxt) / N) / ((nxt - n) / N) + 1e-9))
        if len(alive) > fit:
            alive = sorted(alive, key=lambda i: (np.mean(rows[i]) if rows[i] else 0.0, i))[:max(1, fit)]
            alive.sort()
        block = tuple(int(r) for r in order[n:nxt])
        reqs = [RowRequest(cands[i].removed, cands[i].prefix, block, n, seen[i]) for i in alive]
        for i, (sums, counts, v) in zip(alive, evaluator.rows(reqs, searcher)):
            rows[i] += list(sums)
            seen[i] = (seen[i][0] + float(np.sum(sums)), seen[i][1] + float(np.sum(counts)))
            value[i] = float(v)
        left -= len(alive) * (nxt - n) / N
        n = nxt
        X = np.array([rows[i] for i in alive])
        worse = confidently_worse(X, N, alpha).sum(1)
        alive = [i for i, w in zip(alive, worse) if w < keep]
        if n == N:
            break
    out = Outcome()
    for i, c in enumerate(cands):
        if rows[i]:
            out.told.append(Candidate(c.removed, fidelity=len(rows[i]) / N, prefix=c.prefix))
            out.values.append(value[i])
        else:
            out.unscored.append(c)
    return out


def rank(candidates: Sequence[Candidate], values: Sequence[float]) -> list[tuple[bool, float, Removed]]:
    """Told candidates best first: full-fidelity values first (by value, then set), then partial ones."""
    return sorted((c.fidelity < 1.0, v if v == v else math.inf, c.removed) for c, v in zip(candidates, values))
