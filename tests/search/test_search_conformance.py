"""One conformance suite over every registered searcher (a new searcher is covered automatically),
and over the racing variants of the searchers that race (``race: true``; the default ``auto`` scores
these 16-row evaluators exactly), with the race scored block by block on noisy per-row losses.

The contract it checks is stated in ``Searcher``'s docstring (search/base.py) and docs/architecture.md.
The bad-value cases are derived from each searcher's ``Params`` (annotations and ranges). Select one
searcher's cases with ``-k "[ga] or [ga- or [ga+"``: every case id of searcher NAME is ``NAME``,
``NAME-<parameter case>`` or ``NAME+<variant>`` (``-k "[ga]"`` alone selects only the default-parameter
cases, ``-k ga`` would also match a name containing it); no test name here contains a searcher's name,
so ``-k NAME`` never selects whole tests by accident."""

from __future__ import annotations

import dataclasses
import math
import types
import typing
from dataclasses import dataclass

import pytest
from search_synthetic import Synthetic

from ghostsearch.core.errors import GhostsearchError
from ghostsearch.search import SEARCHERS, Budget, Candidate, Searcher, Space, get_searcher, make_searcher, run
from ghostsearch.search.common import Memo
from ghostsearch.search.racing import Race, race_params

SPACE = Space(12, 3, frozenset({0, 5, 11}))


def variants() -> dict[str, tuple[str, dict]]:
    """label -> (searcher, params) besides each searcher's defaults, from the classes' own traits:
    ``NAME+race`` for every searcher that races (``Searcher.races``), and its ``conformance_variants``."""
    out: dict[str, tuple[str, dict]] = {}
    for name in SEARCHERS.names():
        cls = SEARCHERS.get(name)
        if cls.races():
            out[f"{name}+race"] = (name, {"race": True})
        out.update({name + suffix: (name, dict(p)) for suffix, p in cls.conformance_variants.items()})
    return out


RACED = variants()
NAMES = SEARCHERS.names() + list(RACED)
SYN = Synthetic.random(12, seed=7)
ROWS = 16


def budget_for(name: str) -> Budget:
    name, params = RACED.get(name, (name, {}))
    cls = SEARCHERS.get(name)
    need = cls.min_budget(SPACE, cls.parse_params(params))
    return Budget(evaluations=need + 8)  # a little above the minimum: iterative searchers must stop on it


def searcher(label: str, seed: int = 0):
    name, params = RACED.get(label, (label, {}))
    return make_searcher(name, SPACE, seed=seed, budget=budget_for(label), params=params)


class Counting:
    """The synthetic evaluator (races see noisy per-row losses), counting the budget actually spent."""

    def __init__(self):
        self.inner, self.spent = SYN.evaluator(rows=ROWS), 0.0

    def evaluate(self, candidates, searcher=""):
        self.spent += sum(c.fidelity for c in candidates)
        return self.inner.evaluate(candidates, searcher)

    def n_rows(self):
        return ROWS

    def rows(self, requests, searcher=""):
        self.spent += sum(len(q.rows) for q in requests) / ROWS
        return self.inner.rows(requests, searcher)

    def statistic(self, name):
        return self.inner.statistic(name)


class Ledgered(Counting):
    """The runner's resume path in miniature: every computed value is recorded (the ledger);
    what the record already holds is answered from it and not computed (or charged) again."""

    def __init__(self, ledger: dict | None = None, crash_after: int | None = None):
        super().__init__()
        self.ledger = {} if ledger is None else dict(ledger)
        self.replayed, self.crash_after = 0, crash_after

    def evaluate(self, candidates, searcher=""):
        return [
            self._recorded((c.removed, c.fidelity), lambda: super(Ledgered, self).evaluate([c], searcher)[0])  # noqa: B023
            for c in candidates
        ]

    def rows(self, requests, searcher=""):
        return [
            self._recorded((q.removed, q.rows, q.start), lambda: super(Ledgered, self).rows([q], searcher)[0])  # noqa: B023
            for q in requests
        ]

    def _recorded(self, key, compute):
        if key in self.ledger:
            self.replayed += 1
        else:
            if self.crash_after is not None and len(self.ledger) >= self.crash_after:
                raise Crash
            self.ledger[key] = compute()
        return self.ledger[key]


class Crash(Exception):
    """The process dies (between two ledger rows, possibly mid-race)."""


_reference: dict = {}


def reference(name: str):
    """One uninterrupted run per searcher, shared by the checks below, with the number of tells."""
    if name not in _reference:
        ev, tells = Counting(), []
        s = run(searcher(name), ev, on_tell=lambda sr: tells.append(sr.n_told))
        _reference[name] = (s, ev, tells)
    return _reference[name]


@pytest.mark.parametrize("name", NAMES)
def test_answer_is_k_sorted_unique_and_unprotected(name):
    s, *_ = reference(name)
    removed, value = s.result()
    assert removed is not None and math.isfinite(value)
    assert len(removed) == SPACE.k and list(removed) == sorted(set(removed))
    assert not set(removed) & SPACE.protected
    assert value == pytest.approx(SYN.value(removed))


@pytest.mark.parametrize("name", NAMES)
def test_budget_respected(name):
    """Counted by the evaluator (what was scored, races by their rows), not by the searcher: a
    budget-driven searcher (no natural end) spends most of its budget instead of stopping early; the
    searcher's own account (history, progress bar) agrees with the evaluator's; and at its least
    budget (``min_budget``) it still answers a k-set, never asking past the budget (the loop refuses
    an ask over ``budget_left`` with an error: ``test_an_ask_over_the_budget_is_refused``)."""
    s, ev, _ = reference(name)
    if not type(s).ends_by_itself:
        assert s.budget.evaluations - ev.spent < s.budget.evaluations / 4, (ev.spent, s.budget.evaluations)
    assert s.used == pytest.approx(ev.spent)
    label, params = RACED.get(name, (name, {}))
    cls = SEARCHERS.get(label)
    least = cls.min_budget(SPACE, cls.parse_params(params))
    tight = run(make_searcher(label, SPACE, seed=0, budget=Budget(evaluations=least), params=params), Counting())
    removed, value = tight.result()
    assert removed is not None and len(removed) == SPACE.k and math.isfinite(value), (least, tight.used)


@pytest.mark.parametrize("name", NAMES)
def test_seed_fixes_the_run(name):
    s, *_ = reference(name)
    again = run(searcher(name), Counting())
    assert again.result() == s.result() and again.used == s.used and again.history == s.history


@pytest.mark.parametrize("name", [n for n in NAMES if not SEARCHERS.get(RACED.get(n, (n, {}))[0]).uses_seed])
def test_without_a_seed_every_seed_gives_an_identical_run(name):
    """``uses_seed = False`` (bench/search.py --matched runs such a searcher once for every seed)."""
    s, *_ = reference(name)
    other = run(searcher(name, seed=1), Counting())
    assert other.result() == s.result() and other.used == s.used and other.history == s.history


@pytest.mark.parametrize("name", NAMES)
def test_resume_after_interruption(name):
    """Stopped after some tell, then rebuilt from scratch and replayed from the ledger (resume), a
    searcher ends where an uninterrupted run ends, and computes only what the ledger lacks
    (checked at up to five interruption points, first and last included)."""
    s, ev, tells = reference(name)
    n = len(tells) - 1  # after the last tell it is done
    for at in sorted({0, n // 3, n // 2, 2 * n // 3, n - 1}) if n > 0 else []:
        first = Ledgered()
        run(searcher(name), first, stop=lambda: len(first.ledger) >= tells[at])  # noqa: B023  (called within the run)
        again = Ledgered(first.ledger)
        resumed = run(searcher(name), again)
        assert resumed.result() == s.result() and resumed.used == s.used and resumed.history == s.history, at
        assert again.replayed == len(first.ledger) and again.spent + first.spent == pytest.approx(ev.spent), at


RACING = [label for label, (_, params) in RACED.items() if params.get("race") is True]


@pytest.mark.parametrize("name", RACING)
def test_resume_mid_race(name):
    """The process dies mid-race (after some ledger rows, races included: a row per block of rows);
    rebuilt and replayed from the ledger, the searcher ends where an uninterrupted run ends and
    computes only what the ledger lacks."""
    s, ev, _ = reference(name)
    full = Ledgered()
    run(searcher(name), full)
    assert any(len(k) == 3 for k in full.ledger), "no race ran"
    n = len(full.ledger)
    for at in sorted({1, n // 4, n // 2, 3 * n // 4, n - 1}):
        first = Ledgered(crash_after=at)
        with pytest.raises(Crash):
            run(searcher(name), first)
        again = Ledgered(first.ledger)
        resumed = run(searcher(name), again)
        assert resumed.result() == s.result() and resumed.used == s.used and resumed.history == s.history, at
        assert again.replayed == at and again.spent + first.spent == pytest.approx(ev.spent), at


@pytest.mark.parametrize("name", RACING)
def test_race_spends_less_and_finds_the_exact_answer(name):
    """Raced greedy/beam give exact greedy/beam's answer for less; every racer charged what it scored."""
    s, ev, _ = reference(name)
    assert any(c < 1.0 for c in (b - a for (a, _), (b, _) in zip([(0.0, 0)] + s.history, s.history))), "nothing raced"
    if SEARCHERS.get(RACED[name][0]).ends_by_itself and RACED[name][1] == {"race": True}:  # greedy, beam
        exact, _, _ = reference(RACED[name][0])
        assert s.result() == exact.result() and s.used < 0.6 * exact.used


@pytest.mark.parametrize("name", SEARCHERS.names())
def test_unknown_parameter_is_one_line(name):
    with pytest.raises(GhostsearchError, match="no parameter 'nope'") as e:
        make_searcher(name, SPACE, params={"nope": 1})
    assert "\n" not in str(e.value)


@pytest.mark.parametrize("name", SEARCHERS.names())
def test_budget_too_small_is_one_line(name):
    cls = SEARCHERS.get(name)
    need = cls.min_budget(SPACE, cls.parse_params({}))
    with pytest.raises(GhostsearchError, match="raise search.budget") as e:
        make_searcher(name, SPACE, budget=Budget(evaluations=need - 0.5))
    assert "\n" not in str(e.value)


def bad_values(hint, bounds: tuple[float, float], default) -> list:
    """Values a parameter must refuse, derived from its annotation, its range (``Searcher.parse_params``:
    metadata "range", default 0..inf) and its default: one of each wrong type, a non-integer for an int,
    NaN and just outside the range for a number, an unknown choice for a str with a str default."""
    kinds = set(typing.get_args(hint)) if typing.get_origin(hint) in (typing.Union, types.UnionType) else {hint}
    number = kinds & {int, float}
    out = [v for v, t in (("x", str), (3, int), ([1], list)) if t not in kinds and not (t is int and number)]
    if number:
        out += [math.nan, bounds[0] - 1] + ([bounds[1] + 1] if math.isfinite(bounds[1]) else [])
    if int in kinds and float not in kinds:
        out.append(2.5)
    if str in kinds and isinstance(default, str):
        out.append("no-such-choice")
    return out


def bad_cases() -> list:
    cases = []
    for name in SEARCHERS.names():
        P = SEARCHERS.get(name).Params
        hints = typing.get_type_hints(P)
        for f in dataclasses.fields(P):
            for v in bad_values(hints[f.name], f.metadata.get("range", (0, math.inf)), f.default):
                cases.append(pytest.param(name, f.name, v, id=f"{name}-{f.name}={v!r}"))
    return cases


@pytest.mark.parametrize("name, field, value", bad_cases())
def test_bad_parameter_value_is_one_line(name, field, value):
    with pytest.raises(GhostsearchError) as e:
        make_searcher(name, SPACE, params={field: value})
    assert "\n" not in str(e.value) and field in str(e.value) and f"'{name}'" in str(e.value)


@pytest.mark.parametrize(
    "name, params",
    [  # rules across parameters or inside one: not derivable from types
        ("beam", {"width": 0}),
        ("ga", {"promote": 20}),
        ("greedy", {"race": {"delta": 2}}),
        ("ga", {"race": {"min_rows": 1}}),
        ("fastblock", {"n_rescore": 0}),
        ("lorp", {"n_clusters": 0}),
    ],
)
def test_bad_parameter_rule_is_one_line(name, params):
    with pytest.raises(GhostsearchError) as e:
        make_searcher(name, SPACE, params=params)
    assert "\n" not in str(e.value)


def test_unknown_searcher_and_impossible_k():
    with pytest.raises(GhostsearchError, match="unknown searcher 'sleb'"):
        get_searcher("sleb")
    with pytest.raises(GhostsearchError, match="larger than the 9 unprotected blocks"):
        Space(12, 10, frozenset({0, 5, 11}))
    with pytest.raises(GhostsearchError, match="lorp protects the first and last block"):
        make_searcher("lorp", Space(12, 11))
    with pytest.raises(GhostsearchError, match="no 6 consecutive unprotected blocks"):
        make_searcher("fastblock", Space(12, 6, frozenset({0, 5, 11})))


class Twice(Memo):
    """Breaks the contract: asks its second set again (``again='next'``: in its next ask; 'same': twice in one ask)."""

    name = "twice"
    ends_by_itself = True

    @dataclass
    class Params:
        again: str = "next"

    def ask(self):
        first, second = Candidate((1, 2, 3)), Candidate((1, 2, 4))
        if self.params.again == "same":
            return [first, second, second]
        return [first, second] if not self.memo else [second]

    @property
    def done(self):
        return self.n_told >= 3


@pytest.mark.parametrize("again", ["next", "same"])
def test_a_repeated_ask_is_refused_naming_the_searcher(again):
    ev = Counting()
    with pytest.raises(GhostsearchError, match=r"searcher 'twice' asked \[1, 2, 4\] at fidelity 1 a second time") as e:
        run(Twice(SPACE, params={"again": again}), ev)
    assert "\n" not in str(e.value) and ev.spent == (2 if again == "next" else 0)  # refused before it is scored


class OverAsk(Memo):
    """Breaks the contract: asks three sets (or races three) with a budget of two."""

    name = "overask"
    ends_by_itself = True

    @dataclass
    class Params:
        race: bool = False

    def ask(self):
        cands = [Candidate((1, 2, 3)), Candidate((1, 2, 4)), Candidate((1, 3, 4))]
        return Race(cands, race_params(True, ROWS)) if self.params.race else cands

    @property
    def done(self):
        return self.n_told > 0


@pytest.mark.parametrize("race", [False, True])
def test_an_ask_over_the_budget_is_refused(race):
    """The guard behind "never over the budget": an ask (or a race, at its most) costing more than
    ``budget_left`` is refused before anything is scored."""
    ev = Counting()
    with pytest.raises(RuntimeError, match="searcher overask asked 3 evaluations with 2 left"):
        run(OverAsk(SPACE, budget=Budget(evaluations=2), params={"race": race}), ev)
    assert ev.spent == 0


def test_a_searcher_without_an_end_or_a_default_budget_is_refused():
    class Endless(Searcher):
        name = "endless"

        def ask(self):
            return [Candidate((1, 2, 3))]

        @property
        def done(self):
            return False

    with pytest.raises(
        GhostsearchError, match="searcher 'endless' neither ends by itself nor has a default_budget"
    ) as e:
        SEARCHERS.add("endless", Endless)
        try:
            make_searcher("endless", SPACE)
        finally:
            SEARCHERS.remove("endless")
    assert "\n" not in str(e.value)
    Endless.default_budget = classmethod(lambda cls, space, params: 10.0)
    SEARCHERS.add("endless", Endless)
    try:
        assert make_searcher("endless", SPACE).name == "endless"  # a default budget is an end
    finally:
        SEARCHERS.remove("endless")


@pytest.mark.parametrize("name", SEARCHERS.names())
def test_every_searcher_has_a_budget_or_an_end(name):
    """Without a run budget, a searcher either ends by itself or gets its default budget (which bounds it)."""
    s = make_searcher(name, SPACE)
    assert type(s).ends_by_itself or math.isfinite(s.budget.evaluations)
    assert not (type(s).ends_by_itself and s.default_budget(SPACE, s.params) is not None), "declare one, not both"


def test_no_test_name_contains_a_searcher_name():
    """``-k NAME`` selects a searcher's cases, never a whole test because its name contains NAME."""
    names = [n for n in globals() if n.startswith("test_")]
    hits = [(t, s) for t in names for s in [*SEARCHERS.names(), "sa"] if s in t[len("test_") :]]
    assert not hits
