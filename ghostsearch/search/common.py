"""Plumbing shared by the searchers: a memo of values, default budgets, the single-removal prior
and prior-weighted sampling of k-sets. Nothing here evaluates anything by itself."""

from __future__ import annotations

import dataclasses
import math
from typing import Any, ClassVar, Sequence

import numpy as np

from ghostsearch.core.errors import GhostsearchError
from ghostsearch.search.base import Budget, Candidate, Removed, Searcher, Space, canonical, greedy_cost
from ghostsearch.search.racing import Race, RaceParams, race_params

__all__ = ["greedy_cost"]  # written in base.py (the default expected_evaluations reads it); importable here as before


def default_search_budget(space: Space) -> float:
    """The budget of the model-based searchers (ga, bo, cbo) when the run sets none: twice greedy's."""
    return 2.0 * greedy_cost(space)


def require_ints(params: Any, *names: str, least: int = 1) -> None:
    """For Params.__post_init__: each named field must be None or an integer >= least."""
    for f in names:
        v = getattr(params, f)
        if v is not None and (isinstance(v, bool) or int(v) != v or v < least):
            raise ValueError(f"{f} must be an integer >= {least}")


def statistic(searcher: Searcher, name: str) -> Any:
    if searcher.oracle is None:
        raise GhostsearchError(
            f"searcher '{searcher.name}' needs the '{name}' statistic but has no oracle; run it through the pool"
        )
    return searcher.oracle.statistic(name)


class Memo(Searcher):
    """A searcher that remembers every full-fidelity value it was told (for dedup and models) and,
    apart, every value below full fidelity (``partial``: screened, or dropped by a race), and that
    falls back to ``default_budget`` when the run gives no evaluation budget."""

    def __init__(self, space: Space, *, seed: int = 0, budget: Budget | None = None, params: dict | None = None):
        super().__init__(space, seed=seed, budget=budget, params=params)
        if self.budget.evaluations is None:
            default = self.default_budget(space, self.params)
            if default is not None:
                self.budget = dataclasses.replace(self.budget, evaluations=float(default))
        self.memo: dict[Removed, float] = {}
        self.partial: dict[Removed, float] = {}

    def tell(self, candidates: Sequence[Candidate], values: Sequence[float]) -> None:
        super().tell(candidates, values)
        for c, v in zip(candidates, values):
            if c.fidelity >= 1.0:
                self.memo[c.removed] = float(v)
            else:
                self.partial[c.removed] = float(v)

    def seen(self, s: Removed) -> bool:
        return s in self.memo or s in self.partial

    def estimate(self, s: Removed) -> float:
        """The full value if known, else the partial one."""
        return self.memo[s] if s in self.memo else self.partial[s]

    def racing(self) -> RaceParams | None:
        """The ``race`` parameter resolved ('auto': on when the evaluator has >= 32 calibration rows)."""
        return race_params(getattr(self.params, "race", False), self.rows)

    def raced(self, cands: list[Candidate], keep: int = 1) -> list[Candidate] | Race:
        """``cands`` as a race (keeping ``keep``; it may cost up to ``len(cands)``, which the caller
        must afford) when racing is on and there is something to eliminate; else as they are."""
        rp = self.racing()
        return Race(cands, rp, keep=keep) if rp and len(cands) > keep else cands

    def affordable(self, n: int, fidelity: float = 1.0) -> int:
        """How many of n evaluations at this fidelity the budget still allows."""
        left = self.budget_left
        return n if left == math.inf else int(min(n, math.floor(left / fidelity + 1e-9)))


PRIORS = ("removal", "block_influence")


class Prior(Memo):
    """A per-free-block prior, low = cheap to remove. Subclasses choose it with a ``prior`` parameter
    (or ``default_prior``). 'removal': score every free single-block removal {i} first (the
    ``singles()`` phase, len(free) evaluations); 'block_influence': Block Influence, free of budget.
    ``self.prior`` is aligned with ``space.free``."""

    default_prior = "removal"

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.prior_kind(self.params)  # fail at construction on a bad prior

    @classmethod
    def prior_kind(cls, params: Any) -> str:
        kind = getattr(params, "prior", cls.default_prior)
        if kind not in PRIORS:
            raise GhostsearchError(f"searcher '{cls.name}': prior={kind!r}; choose one of {', '.join(PRIORS)}")
        return kind

    @classmethod
    def min_budget(cls, space: Space, params: Any) -> float:
        return len(space.free) + (space.k > 1) if cls.prior_kind(params) == "removal" else 1.0

    def setup(self, oracle) -> None:
        super().setup(oracle)
        if self.prior_kind(self.params) == "block_influence":
            bi = np.asarray(statistic(self, "block_influence"), dtype=float)
            if bi.shape != (self.space.n_blocks,):
                raise GhostsearchError(f"block_influence has shape {bi.shape}, expected ({self.space.n_blocks},)")
            self._bi = bi[self.space.free]

    def singles(self) -> list[Candidate]:
        if self.prior_kind(self.params) != "removal":
            return []
        return [Candidate((i,)) for i in self.space.free if not self.seen((i,))]

    def ask_singles(self) -> list[Candidate] | Race:
        """The single-block prior; raced (keeping k) with ``race``: it only needs the ranking, and a
        dropped block's partial value stands in for its prior value."""
        return self.raced(self.singles(), keep=self.space.k)

    @property
    def prior(self) -> np.ndarray:
        if self.prior_kind(self.params) == "block_influence":
            return self._bi
        return np.array([self.estimate((i,)) for i in self.space.free])

    def prior_topk(self) -> Removed:
        """The k free blocks with the lowest prior (ties: lowest index)."""
        order = np.argsort(self.prior, kind="stable")[: self.space.k]
        return canonical(self.space.free[i] for i in order)


class ModelBased(Prior):
    """ga, bo and cbo: prior-guided, and given ``default_search_budget`` when the run sets none.

    Warm start (``warm_start: true`` in their parameters, off by default so that comparisons stay
    independent): the runner hands them ``warm``, the ``warm_n`` best k-sets the shared cache holds
    when the cell starts (e.g. greedy's path in the same compare), and they put those first in their
    initial design (GA's first population, BO's enqueued starts, CBO's design). Each is asked and
    charged like any evaluation (a cache hit in wall time, never free budget)."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.warm: list[Removed] = []

    cost_class: ClassVar[str | None] = "complex"

    @classmethod
    def default_budget(cls, space: Space, params: Any) -> float:
        return default_search_budget(space)

    def warm_sets(self) -> list[Removed]:
        """``warm`` as valid k-sets, best first, without repeats (empty unless warm_start)."""
        if not getattr(self.params, "warm_start", False):
            return []
        return list(dict.fromkeys(canonical(s) for s in self.warm if self.space.valid(s)))

    def first(self, *rest: Removed) -> list[Removed]:
        """The warm sets, then ``rest``, each once."""
        return list(dict.fromkeys([*self.warm_sets(), *rest]))


def prior_weights(prior: np.ndarray, temperature: float) -> np.ndarray:
    """Sampling weights per free block from prior values (low value = high weight): a softmax of
    the negated z-scores divided by ``temperature`` (large = uniform)."""
    z = (prior - prior.mean()) / (prior.std() + 1e-12)
    w = np.exp(-(z - z.min()) / temperature)
    return w / w.sum()


def sample_set(rng: np.random.Generator, free: Sequence[int], k: int, weights: np.ndarray) -> Removed:
    """One k-set of free blocks drawn without replacement with the given weights."""
    idx = rng.choice(len(free), size=k, replace=False, p=weights)
    return canonical(free[i] for i in idx)


def sample_unseen(
    rng: np.random.Generator, space: Space, weights: np.ndarray, seen, n: int, tries: int = 50
) -> list[Removed]:
    """Up to n distinct k-sets not in ``seen``, prior-weighted, then uniform when the prior keeps repeating."""
    out: list[Removed] = []
    uniform = np.full(len(space.free), 1.0 / len(space.free))
    for w in (weights, uniform):
        for _ in range(tries * n):
            if len(out) == n:
                return out
            s = sample_set(rng, space.free, space.k, w)
            if s not in seen and s not in out:
                out.append(s)
    return out
