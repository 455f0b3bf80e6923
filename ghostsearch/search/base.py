"""The Searcher protocol, the search space, the evaluation budget and the registry.

A searcher proposes removed sets and learns their values; it never touches a model.
Everything it may know about the model comes through two doors:

* values of candidates, asked with ``ask()`` and answered with ``tell()``;
* dense statistics (Block Influence, the block-input similarity matrix, angular distances
  of windows), read with ``oracle.statistic(name)`` in ``setup``; they cost no evaluations.

Budget meaning (the same for every searcher): one evaluation at full fidelity costs 1.0;
a screening evaluation on a fraction f of the calibration tokens costs f. A cache hit costs
the same as a computed evaluation, so comparisons stay fair. A searcher must never ask for
more than ``budget_left``; the runner stops it when ``done`` or the wall-clock budget is out.
"""

from __future__ import annotations

import dataclasses
import math
import types as types_
import typing
from dataclasses import dataclass
from typing import Any, ClassVar, Iterable, Mapping, Protocol, Sequence, runtime_checkable

from ghostsearch.core.errors import GhostsearchError
from ghostsearch.core.registry import Registry
from ghostsearch.search.race_report import RaceTally
from ghostsearch.search.traits import Traits

Removed = tuple[int, ...]


def canonical(removed: Iterable[int]) -> Removed:
    """A removed set as ghostsearch stores it: a sorted tuple of unique 0-based block indices."""
    return tuple(sorted({int(i) for i in removed}))


def greedy_cost(space: Space) -> int:
    """Evaluations of SLEB-style greedy deletion: n + (n-1) + ... + (n-k+1) for n free blocks."""
    n = len(space.free)
    return sum(n - t for t in range(space.k))


# how sure an expected evaluation count is (``Searcher.expected_evaluations``; ``ghostsearch plan`` prints it)
EXACT, BUDGET, ESTIMATE = "exact", "budget", "estimate"


def new_best(removed: Sequence[int], fidelity: float, value: float, k: int, best: float | None) -> bool:
    """The rule for "the best full-fidelity k-set", written once: the searcher's answer and history
    (and so the progress bar), the broker's per-cell best and gauge, the report's best-so-far curves.
    A value counts only at full fidelity (not a screened one), only for a set of exactly ``k`` blocks
    (greedy and beam also score smaller sets on the way), and only if lower than ``best`` (None or
    inf: none yet)."""
    return fidelity >= 1.0 and len(removed) == k and (best is None or value < best)


@dataclass(frozen=True)
class Candidate:
    """One evaluation request.

    removed:  the blocks to remove (canonical).
    fidelity: the fraction of the calibration tokens to score on (0 < f <= 1); f < 1 screens.
    prefix:   optional hint: an accepted removed set R with R's blocks all in ``removed`` whose
              cached hidden states this candidate can start from (greedy and beam pass theirs).
    """

    removed: Removed
    fidelity: float = 1.0
    prefix: Removed | None = None

    def __post_init__(self):
        object.__setattr__(self, "removed", canonical(self.removed))
        if not (0.0 < self.fidelity <= 1.0):
            raise GhostsearchError(f"fidelity must be in (0, 1], got {self.fidelity}")
        if self.prefix is not None:
            object.__setattr__(self, "prefix", canonical(self.prefix))


@dataclass(frozen=True)
class Space:
    """Which k-subsets of the L blocks are allowed."""

    n_blocks: int
    k: int
    protected: frozenset[int] = frozenset()

    def __post_init__(self):
        object.__setattr__(self, "protected", frozenset(int(p) for p in self.protected))
        L, k = self.n_blocks, self.k
        bad = sorted(p for p in self.protected if not 0 <= p < L)
        if bad:
            raise GhostsearchError(f"protected blocks {bad} are out of range 0..{L - 1}; fix search.protected")
        # one range in every k message: at most L - 1 blocks, and only unprotected ones
        most = min(L - 1, len(self.free))
        kept = f" (search.protected keeps {len(self.protected)} of them)" if self.protected else ""
        if k <= 0:
            raise GhostsearchError(f"k={k}: must remove at least one block; set k to 1..{most}")
        if k >= L:
            raise GhostsearchError(f"k={k} would remove all {L} blocks{kept}; set k to 1..{most}")
        if k > len(self.free):
            raise GhostsearchError(
                f"k={k} is larger than the {len(self.free)} unprotected blocks of {L}{kept}; set k to 1..{most} "
                "or protect fewer blocks"
            )

    @property
    def free(self) -> list[int]:
        """Blocks that may be removed, in order."""
        return [i for i in range(self.n_blocks) if i not in self.protected]

    def valid(self, removed: Sequence[int]) -> bool:
        r = canonical(removed)
        return len(r) == self.k and len(r) == len(removed) and all(i in set(self.free) for i in r)

    def n_subsets(self) -> int:
        return math.comb(len(self.free), self.k)


@dataclass
class Budget:
    """Evaluation budget in full-fidelity evaluations, and wall-clock seconds (None = unlimited)."""

    evaluations: float | None = None
    seconds: float | None = None


class Raced(Protocol):
    """What ``ask`` returns to race its candidates rather than score them all: search/racing.py's
    ``Race`` (named here by its shape, as racing builds on this module)."""

    @property
    def candidates(self) -> list[Candidate]: ...

    @property
    def cost(self) -> float: ...


class Oracle(Protocol):
    """What a searcher may read besides candidate values (dense statistics, free of budget)."""

    def statistic(self, name: str) -> Any:
        """'block_influence' -> [L]; 'similarity' -> [L, L] cosine of block inputs;
        'window_distance' -> {k: [L-k+1]} angular distance between the input of block i and of block i+k."""
        ...


@runtime_checkable
class SourcedOracle(Protocol):
    """An oracle that holds the calibration data of more than one objective (the pool's client):
    ``sources`` names the objectives it holds besides the cell's own, and ``statistic(name, source=)``
    reads one of them (``None``: the cell's own). A searcher that wants another source's statistic
    (lorp's ``similarity_source``) asks ``isinstance(oracle, SourcedOracle)``; a plain ``Oracle``
    has one set of statistics."""

    sources: Mapping[str, Any]

    def statistic(self, name: str, source: str | None = None) -> Any: ...


def _fields(cls) -> dict[str, dataclasses.Field]:
    return {f.name: f for f in dataclasses.fields(cls)}


def _hints(cls) -> dict[str, Any]:
    try:
        return typing.get_type_hints(cls)
    except Exception:  # an annotation that does not resolve: checked by Params alone
        return {}


_SIMPLE = {int, float, str, bool, dict, list, type(None)}


def param_problem(value: Any, hint: Any, bounds: tuple[float, float]) -> str | None:
    """Why ``value`` is not a valid value for a parameter annotated ``hint`` (int, float, str, bool,
    dict, list, None or a union of them; anything else is left to the Params' own checks) with a
    number in ``bounds`` (inclusive); None when it is valid. An int is a float; a bool is neither."""
    types = set(typing.get_args(hint)) if typing.get_origin(hint) in (typing.Union, types_.UnionType) else {hint}
    if not types <= _SIMPLE:
        return None
    ok = [
        t
        for t in types
        if (isinstance(value, t) and not (isinstance(value, bool) and t in (int, float)))
        or (t is float and isinstance(value, int) and not isinstance(value, bool))
    ]
    if not ok:
        return "has the wrong type: " + " or ".join(sorted("None" if t is type(None) else t.__name__ for t in types))
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        lo, hi = bounds
        if not math.isfinite(value) or not lo <= value <= hi:
            return f"is out of range: {lo:g}..{hi:g}"
    return None


class Searcher(Traits):
    """Base class of every searcher. The contract (docs/architecture.md, "Where to add"):

    * ``name``, a ``Params`` dataclass (every parameter with a default; parsed by ``parse_params``,
      which refuses an unknown name, a value of the wrong type for its annotation, a non-finite
      number and a number outside ``field(metadata={"range": (lo, hi)})``, default ``(0, inf)``;
      ``__post_init__`` adds the searcher's own checks, raising ``ValueError``), ``ask`` and
      ``tell`` (``super().tell`` first), ``done``.
    * **Deterministic for a seed**: a searcher is a function of (seed, the values it was told); it
      owns its random generators (``random.Random(seed)``, ``np.random.default_rng(seed)``) and never
      draws from a global one.
    * **Never asks the same set twice** at the same fidelity (a race's candidates count as full
      fidelity): the loop refuses a repeat with an error naming the searcher (``check_fresh``).
    * **A budget or an end**: ``ends_by_itself = True`` for a searcher that stops by itself
      (greedy, beam, oneshot), or a ``default_budget`` for one that would search for ever (ga, bo,
      cbo: ``default_search_budget``); ``make_searcher`` refuses a searcher with neither.
      ``min_budget`` is the least budget that gives an answer; never ask for more than ``budget_left``.
    * The helper bases in ``search/common.py`` do the plumbing: ``Memo`` (every value told, ``seen``,
      ``affordable``, ``raced``, ``default_budget`` applied), ``Prior`` (the single-removal or Block
      Influence prior, ``singles()`` first) and ``ModelBased`` (prior-guided, twice greedy's budget by
      default, warm start). Most searchers subclass one of them, not ``Searcher`` itself.

    What the rest of ghostsearch reads of a searcher without running it (plan, memplan, claims,
    target) are its traits (search/traits.py ``Traits``, inherited); what a cell's result says of
    its races is search/race_report.py's.

    Resume: a resumed run rebuilds the searcher from scratch and replays the run's ledger: every
    candidate already scored is answered from the ledger, so the searcher reaches the same state
    without a checkpoint. ``tests/search/test_search_conformance.py`` checks all of this for every
    registered searcher."""

    name: ClassVar[str] = ""
    ends_by_itself: ClassVar[bool] = False  # True: ``done`` comes without a budget (a finite procedure)

    @classmethod
    def expected_evaluations(
        cls, space: Space, params: Any, budget: float | None = None, rows: int | None = None
    ) -> tuple[float, str]:
        """(evaluations, EXACT | BUDGET | ESTIMATE) one run of this searcher costs, before it runs
        (``ghostsearch plan``). ``params``: parsed Params; ``budget``: the run's evaluation budget for
        it (search.budget, search.params.<name>.budget, or greedy's cost under compare.budget:
        matched), None when unset; ``rows``: the calibration rows (``race: auto`` races from 32).
        Default: a budget-driven searcher (``default_budget``) spends its budget; one that ends by
        itself costs about the budget, else greedy's cost (an estimate): override it when the count
        follows from the space (the one-shot searchers: EXACT)."""
        default = cls.default_budget(space, params)
        if default is not None:
            return float(budget or default), BUDGET
        return float(budget or greedy_cost(space)), ESTIMATE

    @classmethod
    def races(cls) -> bool:
        """Whether it takes a ``race`` parameter (search/racing.py): ``race: true`` races its
        candidates block by block; the conformance suite adds a ``NAME+race`` case for it."""
        return any(f.name == "race" for f in dataclasses.fields(cls.Params))

    @dataclass
    class Params:
        pass

    def __init__(self, space: Space, *, seed: int = 0, budget: Budget | None = None, params: dict | None = None):
        self.space = space
        self.seed = int(seed)
        self.budget = budget or Budget()
        self.params = self.parse_params(params or {})
        self.used = 0.0  # budget used, in full-fidelity evaluations
        self.n_told = 0
        self.best_removed: Removed | None = None
        self.best_value = math.inf
        self.history: list[tuple[float, float]] = []  # (used, best full-fidelity value so far)
        self.oracle: Oracle | None = None
        self.rows: int | None = None  # the evaluator's calibration rows (set by search.run; race: auto)
        self.race_tally = RaceTally()  # what search.run saw of its races (search/race_report.py)
        self.told_keys: set[tuple[Removed, float]] = set()  # (set, fidelity) of every value told

    # ---------- parameters ----------
    @classmethod
    def parse_params(cls, params: dict) -> Any:
        known = _fields(cls.Params)
        unknown = sorted(set(params) - set(known))
        if unknown:
            raise GhostsearchError(
                f"searcher '{cls.name}' has no parameter {unknown[0]!r}; known: {', '.join(sorted(known)) or '(none)'}"
            )
        for name, value in params.items():
            problem = param_problem(
                value, _hints(cls.Params).get(name), known[name].metadata.get("range", (0, math.inf))
            )
            if problem:
                raise GhostsearchError(
                    f"searcher '{cls.name}': parameter {name}={value!r} {problem}; fix search.params.{cls.name}.{name}"
                )
        try:
            return cls.Params(**params)
        except (TypeError, ValueError) as e:
            raise GhostsearchError(f"searcher '{cls.name}': bad parameters {params}: {e}") from None

    @classmethod
    def default_budget(cls, space: Space, params: Any) -> float | None:
        """The evaluation budget used when the run sets none (None: the searcher ends by itself,
        ``ends_by_itself``); ``Memo`` applies it."""
        return None

    @classmethod
    def min_budget(cls, space: Space, params: Any) -> float:
        """The smallest evaluation budget with which this searcher can return an answer."""
        return 1.0

    def check_budget(self):
        need = self.min_budget(self.space, self.params)
        if self.budget.evaluations is not None and self.budget.evaluations < need:
            raise GhostsearchError(
                f"searcher '{self.name}' needs a budget of at least {need:g} evaluations for k={self.space.k} "
                f"of {len(self.space.free)} free blocks, got {self.budget.evaluations:g}; raise search.budget"
            )

    @classmethod
    def run_params(cls, params: dict, run_dir, cell: str) -> dict:
        """The parameters a run gives this searcher once it has a run directory (files the searcher
        keeps there, e.g. bo's Optuna journal); by default ``params`` unchanged."""
        return params

    def check_ends(self) -> None:
        """The contract's "a budget or an end", checked when the searcher is built."""
        if not self.ends_by_itself and self.default_budget(self.space, self.params) is None:
            raise GhostsearchError(
                f"searcher '{self.name}' neither ends by itself nor has a default_budget, so a run without "
                "search.budget would never end; give it a default_budget (search/common.py ModelBased) "
                "or set ends_by_itself = True"
            )

    def check_fresh(self, candidates: Sequence[Candidate]) -> None:
        """The contract's "never ask the same set twice": the loop calls it on every ask (a race's
        candidates at full fidelity) before anything is evaluated."""
        asked: set[tuple[Removed, float]] = set()
        for c in candidates:
            key = (c.removed, c.fidelity)
            if key in self.told_keys or key in asked:
                raise GhostsearchError(
                    f"searcher '{self.name}' asked {list(c.removed)} at fidelity {c.fidelity:g} a second time; "
                    "a searcher must never ask the same set twice (keep a memo: search/common.py Memo.seen)"
                )
            asked.add(key)

    # ---------- protocol ----------
    def setup(self, oracle: Oracle | None) -> None:
        """Called once before the first ask; may read dense statistics."""
        self.oracle = oracle

    def ask(self) -> list[Candidate] | Raced:
        raise NotImplementedError

    def tell(self, candidates: Sequence[Candidate], values: Sequence[float]) -> None:
        """Record values; subclasses call super().tell first, then update their own state."""
        for c, v in zip(candidates, values):
            self.used += c.fidelity
            self.n_told += 1
            self.told_keys.add((c.removed, c.fidelity))
            if new_best(c.removed, c.fidelity, v, self.space.k, self.best_value):
                self.best_value, self.best_removed = float(v), c.removed
            self.history.append((self.used, self.best_value))

    @property
    def done(self) -> bool:
        raise NotImplementedError

    @property
    def budget_left(self) -> float:
        return math.inf if self.budget.evaluations is None else self.budget.evaluations - self.used

    def result(self) -> tuple[Removed | None, float]:
        return self.best_removed, self.best_value


# ---------------------------------------------------------------- registry
# the built-in searchers; add your own with SEARCHERS.add(name, cls) or name it in the config as
# "package.module:Class" (docs/architecture.md)
SEARCHERS: Registry[Searcher] = Registry(
    "searcher",
    {
        "oneshot": "ghostsearch.search.oneshot:OneShot",
        "shortgpt": "ghostsearch.search.oneshot:ShortGPT",
        "greedy": "ghostsearch.search.beam:Greedy",
        "beam": "ghostsearch.search.beam:Beam",
        "ga": "ghostsearch.search.ga:GA",
        "bo": "ghostsearch.search.bo:BO",
        "cbo": "ghostsearch.search.cbo:CBO",
        "fastblock": "ghostsearch.search.fastblock:FastBlock",
        "streamline": "ghostsearch.search.fastblock:Streamline",
        "lorp": "ghostsearch.search.lorp:LoRP",
    },
    base=Searcher,
)


def get_searcher(name: str) -> type[Searcher]:
    return SEARCHERS.get(name)


def make_searcher(
    name: str, space: Space, *, seed: int = 0, budget: Budget | None = None, params: dict | None = None
) -> Searcher:
    s = get_searcher(name)(space, seed=seed, budget=budget, params=params)
    s.check_ends()
    s.check_budget()
    return s
