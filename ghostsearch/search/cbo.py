"""cbo: constrained binary optimisation with a second-order (QUBO) surrogate of the objective."""

from __future__ import annotations

import heapq
import itertools
from dataclasses import dataclass

import numpy as np

from ghostsearch.search.base import Candidate, Removed, canonical
from ghostsearch.search.common import ModelBased, prior_weights, require_ints, sample_unseen
from ghostsearch.search.racing import Race, race_params


@dataclass
class Quadratic:
    """energy(x) = c + Σ a_i x_i + Σ_{i<j} B_ij x_i x_j on gates x ∈ {0,1}^n (x_i = 1: removed)."""

    c: float
    a: np.ndarray  # [n]
    B: np.ndarray  # [n, n], symmetric, zero diagonal

    def energy(self, sets: np.ndarray) -> np.ndarray:
        """Energies of the rows of ``sets`` ([m, k] gate positions, all rows the same size k)."""
        e = self.c + self.a[sets].sum(1)
        for p, q in itertools.combinations(range(sets.shape[1]), 2):
            e = e + self.B[sets[:, p], sets[:, q]]
        return e


def features(X: np.ndarray) -> np.ndarray:
    """[x_i ..., x_i x_j (i < j) ...] for each row of the binary matrix X [m, n]."""
    i, j = np.triu_indices(X.shape[1], 1)
    return np.hstack([X, X[:, i] * X[:, j]])


RIDGES = np.logspace(-4, 2, 13)  # the ridge values fit chooses from


def fit(X: np.ndarray, y: np.ndarray, ridges=RIDGES) -> Quadratic:
    """Ridge least squares on the second-order features, the ridge chosen by leave-one-out error
    (closed form, dual form since there are usually fewer observations than features)."""
    n = X.shape[1]
    F = features(X.astype(float))
    fm, ym = F.mean(0), y.mean()
    Fc, yc = F - fm, y - ym
    s, U = np.linalg.eigh(Fc @ Fc.T)
    s = np.clip(s, 0, None)
    Uy = U.T @ yc
    fits = []  # (leave-one-out error, ridge) of each ridge
    for lam in ridges * max(s.max(), 1e-12) / len(y):
        h = s / (s + lam)
        resid = yc - U @ (h * Uy)
        lev = (U**2) @ h + 1.0 / len(y)
        loo = np.mean((resid / np.clip(1 - lev, 1e-6, None)) ** 2)
        fits.append((loo, lam))
    lam = min(fits, key=lambda f: f[0])[1]  # the first of the lowest
    w = Fc.T @ (U @ (Uy / (s + lam)))
    a, B = w[:n], np.zeros((n, n))
    B[np.triu_indices(n, 1)] = w[n:]
    return Quadratic(float(ym - fm @ w), a, B + B.T)


def lowest_enumerated(model: Quadratic, n: int, k: int, m: int, chunk: int = 1 << 18) -> list[tuple[float, tuple]]:
    """The m lowest-energy k-subsets of range(n), by exact enumeration in vectorised chunks."""
    combos = itertools.combinations(range(n), k)
    keep: list[tuple[float, tuple]] = []
    while True:
        flat = np.fromiter(itertools.chain.from_iterable(itertools.islice(combos, chunk)), dtype=np.int32)
        if not flat.size:
            return sorted(keep)[:m]
        sets = flat.reshape(-1, k)
        e = model.energy(sets)
        top = np.argpartition(e, min(m, len(e) - 1))[:m] if len(e) > m else np.arange(len(e))
        keep = heapq.nsmallest(m, keep + [(float(e[t]), tuple(sets[t].tolist())) for t in top])


def lowest_annealed(
    model: Quadratic,
    n: int,
    k: int,
    m: int,
    rng: np.random.Generator,
    starts: list[tuple],
    steps: int = 1000,
    restarts: int = 12,
) -> list[tuple[float, tuple]]:
    """The m lowest-energy distinct k-subsets visited by simulated annealing with swap moves, run
    as parallel chains from ``starts`` and random restarts; a heuristic for spaces too large to enumerate."""
    chains = [list(s) for s in starts] + [rng.choice(n, k, replace=False).tolist() for _ in range(restarts)]
    S = np.array(chains)
    e = model.energy(S)
    rows = np.arange(len(S))
    seen: dict[tuple, float] = {}
    scale = 0.2 * (np.abs(model.a).mean() + 1e-12)  # starting temperature
    for t in range(steps):
        p, j = rng.integers(k, size=len(S)), rng.integers(n, size=len(S))
        i = S[rows, p]
        de = model.a[j] - model.a[i] + model.B[j[:, None], S].sum(1) - model.B[j, i] - model.B[i[:, None], S].sum(1)
        temp = scale * (1 - t / steps) + 1e-9
        ok = ~(S == j[:, None]).any(1) & ((de <= 0) | (rng.random(len(S)) < np.exp(-np.clip(de, 0, None) / temp)))
        S[rows[ok], p[ok]] = j[ok]
        e = e + np.where(ok, de, 0.0)
        for r in np.flatnonzero(ok):
            seen.setdefault(tuple(sorted(S[r].tolist())), float(e[r]))
    return heapq.nsmallest(m, ((e, s) for s, e in seen.items()))


TRANSFORMS = ("auto", "none")


def fitted_scale(y: np.ndarray, transform: str) -> np.ndarray:
    """The values the quadratic model is fitted to. Perplexity is exp(mean NLL) and removals add
    NLL roughly, so log(value) is close to second order where the value itself (a few bad sets at
    10-100x the rest) is not; 'auto' takes the log while every value is > 0 (the margin objective
    can be negative: fitted as is). Only the surrogate changes; the answer is still the best real value."""
    return np.log(y) if transform == "auto" and (y > 0).all() else y


class CBO(ModelBased):
    """Design: the single-block removals (the prior), the prior's top-k set, every pair of adjacent free blocks
    (``adjacent_pairs``) and ``n_random`` k-sets drawn with prior weights. Then rounds: fit the
    quadratic model to every full-fidelity value so far, find the ``n_propose`` lowest-energy
    k-sets not yet scored (the minimum and the low-lying excited configurations) exactly by
    enumeration while C(n_free, k) <= ``enumerate_limit``, else by simulated annealing, score them
    for real, refit, until the budget is spent. The best real value wins. Everything is a function
    of the values so far and the seed, so the memo is the whole state.

    Racing (``race``: ``auto``, the default, races when the calibration has >= 32 rows): each round
    races the ``n_screen`` lowest-energy unseen sets (the minimum and the excited states; as many as
    the budget affords, since a race of n costs at most n) keeping 1; the single-block prior is
    raced too. Dropped sets enter the fit with their partial values."""

    name = "cbo"

    @dataclass
    class Params:
        n_random: int | None = None  # random k-sets in the design; None: half the free blocks
        adjacent_pairs: bool = True
        n_propose: int = 4
        temperature: float = 1.0  # of the prior weights for the random design
        enumerate_limit: float = 1e7
        race: bool | str | dict = "auto"
        n_screen: int = 16  # sets raced per round when racing
        warm_start: bool = False  # the design begins with the shared cache's best k-sets
        warm_n: int = 4  # how many of them
        transform: str = "auto"  # the fitted scale: 'auto' (log of the value while every value is > 0) or 'none'

        def __post_init__(self):
            race_params(self.race)
            if self.transform not in TRANSFORMS:
                raise ValueError(f"transform must be one of {TRANSFORMS}")
            require_ints(self, "n_propose", "n_screen", "warm_n")
            require_ints(self, "n_random", least=0)
            if self.temperature <= 0:
                raise ValueError("temperature must be > 0")

    def design(self) -> list[Removed]:
        free, k = self.space.free, self.space.k
        pairs = [(a, b) for a, b in zip(free, free[1:]) if b == a + 1] if self.params.adjacent_pairs and k > 2 else []
        n_random = len(free) // 2 if self.params.n_random is None else self.params.n_random
        rng = np.random.default_rng([self.seed, 3])
        w = prior_weights(self.prior, self.params.temperature)
        top = self.prior_topk()  # the additive model's minimum (oneshot's answer) is scored first
        first = self.first(top)
        return (
            first
            + [p for p in pairs if p not in first]
            + sample_unseen(rng, self.space, w, set(pairs) | set(first), n_random)
        )

    def model(self) -> Quadratic:
        pos = {b: p for p, b in enumerate(self.space.free)}
        sets = list({**self.partial, **self.memo})
        X = np.zeros((len(sets), len(pos)))
        for r, s in enumerate(sets):
            X[r, [pos[b] for b in s]] = 1
        return fit(X, fitted_scale(np.array([self.estimate(s) for s in sets]), self.params.transform))

    def proposals(self, m: int) -> list[Removed]:
        """The m lowest-energy unseen k-sets under the current model."""
        free, k = self.space.free, self.space.k
        seen = [s for s in {**self.partial, **self.memo} if len(s) == k]
        model, want = self.model(), m + len(seen)
        if self.space.n_subsets() <= self.params.enumerate_limit:
            low = lowest_enumerated(model, len(free), k, want)
        else:
            pos = {b: p for p, b in enumerate(free)}
            starts = [tuple(pos[b] for b in s) for s in sorted(self.memo, key=lambda s: self.memo[s]) if len(s) == k][
                :4
            ]
            low = lowest_annealed(model, len(free), k, want, np.random.default_rng([self.seed, len(self.memo)]), starts)
        sets = [canonical(free[p] for p in s) for _, s in low]
        out = [s for s in sets if not self.seen(s)][:m]
        if not out:  # annealing found nothing new: explore with the prior
            rng = np.random.default_rng([self.seed, len(self.memo)])
            out = sample_unseen(
                rng,
                self.space,
                prior_weights(self.prior, self.params.temperature),
                set(self.memo) | set(self.partial),
                m,
            )
        return out

    def ask(self) -> list[Candidate] | Race:
        if self.singles():
            return self.ask_singles()
        # the design, cut so that n_propose evaluations stay for the model's proposals
        room = self.affordable(1 << 30) - self.params.n_propose
        todo = [Candidate(s) for s in self.design() if not self.seen(s)][: max(0, room)]
        if todo:
            return todo
        if self.racing():  # a race of n sets costs at most n: as many as the budget affords
            return self.raced([Candidate(s) for s in self.proposals(self.affordable(self.params.n_screen))])
        todo = [Candidate(s) for s in self.proposals(self.params.n_propose)]
        return todo[: self.affordable(len(todo))]

    @property
    def done(self) -> bool:
        if self.singles():
            return False
        return (
            self.affordable(1) == 0
            or sum(len(s) == self.space.k for s in {**self.memo, **self.partial}) >= self.space.n_subsets()
        )
