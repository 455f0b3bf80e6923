"""One conformance suite over every registered searcher (a new searcher is covered automatically),
and over the racing variants of the searchers that race (greedy and beam with ``race: true``; ga, bo
and cbo race by default), with the race scored block by block on noisy per-row losses."""
from __future__ import annotations

import math

import pytest
from search_synthetic import Synthetic

from ghostsearch.errors import GhostsearchError
from ghostsearch.search import SEARCHERS, Budget, Space, get_searcher, make_searcher, run

SPACE = Space(12, 3, frozenset({0, 5, 11}))
RACED = {"greedy+race": ("greedy", {"race": True}), "beam+race": ("beam", {"race": True}),
         "ga-norace": ("ga", {"race": False}), "bo-norace": ("bo", {"race": False, "batch": 1}),
         "cbo-norace": ("cbo", {"race": False})}
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
        return [self._recorded((c.removed, c.fidelity), lambda: super(Ledgered, self).evaluate([c], searcher)[0])
                for c in candidates]

    def rows(self, requests, searcher=""):
        return [self._recorded((q.removed, q.rows, q.start), lambda: super(Ledgered, self).rows([q], searcher)[0])
                for q in requests]

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
    s, ev, _ = reference(name)
    assert ev.spent == pytest.approx(s.used)
    assert s.used <= s.budget.evaluations + 1e-9


@pytest.mark.parametrize("name", NAMES)
def test_same_seed_same_answer(name):
    s, *_ = reference(name)
    again = run(searcher(name), Counting())
    assert again.result() == s.result() and again.used == s.used and again.history == s.history


@pytest.mark.parametrize("name", NAMES)
def test_resume_after_interruption(name):
    """Stopped after some tell, then rebuilt from scratch and replayed from the ledger (resume), a
    searcher ends where an uninterrupted run ends, and computes only what the ledger lacks
    (checked at up to five interruption points, first and last included)."""
    s, ev, tells = reference(name)
    n = len(tells) - 1  # after the last tell it is done
    for at in sorted({0, n // 3, n // 2, 2 * n // 3, n - 1}) if n > 0 else []:
        first = Ledgered()
        run(searcher(name), first, stop=lambda: len(first.ledger) >= tells[at])
        again = Ledgered(first.ledger)
        resumed = run(searcher(name), again)
        assert resumed.result() == s.result() and resumed.used == s.used and resumed.history == s.history, at
        assert again.replayed == len(first.ledger) and again.spent + first.spent == pytest.approx(ev.spent), at


RACING = ["greedy+race", "beam+race", "ga", "bo", "cbo"]


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
def test_race_saves_budget_and_finds_the_exact_answer(name):
    """Raced greedy/beam give exact greedy/beam's answer for less; every racer charged what it scored."""
    s, ev, _ = reference(name)
    assert any(c < 1.0 for c in (b - a for (a, _), (b, _) in zip([(0.0, 0)] + s.history, s.history))), "nothing raced"
    if name.endswith("+race"):
        exact, _, _ = reference(name.split("+")[0])
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


@pytest.mark.parametrize("name, params", [
    ("beam", {"width": 0}), ("oneshot", {"prior": "magic"}), ("ga", {"screen": 2.0}), ("ga", {"promote": 20}),
    ("greedy", {"race": {"delta": 2}}), ("cbo", {"race": "yes"}), ("ga", {"race": {"min_rows": 1}}),
    ("bo", {"sampler": "cmaes"}), ("fastblock", {"n_rescore": 0}), ("lorp", {"n_clusters": 0}), ("cbo", {"n_propose": 0}),
])
def test_bad_parameter_value_is_one_line(name, params):
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
