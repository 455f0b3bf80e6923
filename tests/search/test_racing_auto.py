"""``race: auto`` prices its looks by measurement (issue 40): racing.LookCosts times the search's
first looks, each as a one-survivor probe and the rest (seconds = look_s + row_s x survivors x
rows), freezes look_rows = look_s / row_s (at its lower bound), and a look whose rows could save
less is not taken. A slow scorer (a look's fixed cost tiny against its rows) races as
``race: true`` does; a scorer whose per-look overhead dominates stops racing (every look but the
last skipped: each candidate scored once on every row). The clock is simulated, so these tests do
not depend on the machine's load."""

from __future__ import annotations

import math

import numpy as np
import pytest
from search_synthetic import Synthetic

from ghostsearch.search import Space, make_searcher, run
from ghostsearch.search.loop import FunctionEvaluator
from ghostsearch.search.race_report import race_report
from ghostsearch.search.racing import EARLY_LOOKS, MIN_LOOKS, LookCosts, RaceParams, race_params

ROWS = 64


class Clock:
    def __init__(self):
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


class Timed(FunctionEvaluator):
    """A synthetic evaluator whose looks take look_s + row_s x (survivors x rows) on a simulated
    clock; counts its looks. ``cached``: looks answered from a cache (cache_hits moves, no time)."""

    def __init__(self, base: FunctionEvaluator, look_s: float, row_s: float, cached: int = 0):
        super().__init__(base.fn, statistics=base.statistics, row_fn=base.row_fn, rows_total=base.rows_total)
        self.clock, self.look_s, self.row_s, self.cached = Clock(), look_s, row_s, cached
        self.look_costs = LookCosts(clock=self.clock)
        self.row_calls: list[tuple[int, tuple]] = []  # (survivors, rows) per call
        self.cache_hits = 0

    @property
    def looks(self) -> list[tuple[int, int]]:
        """(survivors, new rows) per look: a probe (one survivor) and the rest's call on the same rows
        make one look."""
        out: list[tuple[int, int]] = []
        probe = False
        for i, (m, rows) in enumerate(self.row_calls):
            if probe and self.row_calls[i - 1][1] == rows:
                out[-1], probe = (out[-1][0] + m, len(rows)), False
            else:
                out.append((m, len(rows)))
                probe = m == 1
        return out

    def rows(self, requests, searcher=""):
        self.row_calls.append((len(requests), tuple(requests[0].rows)))
        if self.cached > 0:
            self.cached -= 1
            self.cache_hits += len(requests)
        else:
            self.clock.t += self.look_s + self.row_s * len(requests) * len(requests[0].rows)
        return super().rows(requests, searcher)


def greedy(ev, race="auto"):
    space = Space(16, 4, frozenset({0, 15}))
    return run(make_searcher("greedy", space, params={"race": race}), ev)


def synthetic():
    return Synthetic.random(16, seed=5).evaluator(rows=ROWS)


def test_auto_races_like_race_true_on_a_slow_scorer():
    """A CPU-like scorer (20 ms a look, 90 ms a row of one candidate): the fixed cost is 0.2 rows,
    under one row's cost, so auto takes every look race: true takes, with the same answer (a CPU
    scorer's races are what they were before the measurement)."""
    auto, true = Timed(synthetic(), 0.02, 0.09), Timed(synthetic(), 0.02, 0.09)
    a, t = greedy(auto), greedy(true, race=True)
    est = auto.look_costs.frozen
    assert est is not None and est["looks"] == MIN_LOOKS
    assert est["look_s"] == pytest.approx(0.02, rel=1e-6) and est["row_s"] == pytest.approx(0.09, rel=1e-6)
    assert auto.looks == true.looks and a.result() == t.result() and a.used == t.used
    assert auto.look_costs.look_rows() == 0.0
    assert a.used < len(a.history)  # raced: candidates dropped below full fidelity
    assert race_report(a)["used"] == "raced"


def test_auto_stops_racing_where_a_look_costs_more_than_its_rows():
    """A scorer whose per-look overhead dominates (50 ms a look, 10 us a row: 5000 rows): the first
    race's first EARLY_LOOKS timed looks already show that no look of it can pay (5000 rows against
    the at most 13 x 32 = 416 a later look could save), so the estimate freezes there (early), the rest
    of that race is one look on all the rows left, and every later race is scored exactly (no look
    could pay), the answer exact greedy's; result.json says so."""
    ev = Timed(synthetic(), 0.05, 1e-5)
    s = greedy(ev)
    exact = greedy(synthetic(), race=False)
    assert ev.look_costs.look_rows() == pytest.approx(5000, rel=1e-6)
    assert ev.look_costs.frozen["early"] and ev.look_costs.frozen["looks"] == EARLY_LOOKS
    sched = RaceParams().schedule(ROWS)
    assert [n for _, n in ev.looks] == [sched[0]] + [b - a for a, b in zip(sched, sched[1:EARLY_LOOKS])] + [
        ROWS - sched[EARLY_LOOKS - 1]
    ]  # the first race: EARLY_LOOKS timed looks, then the rest in one; no race after it
    assert ev.calls == 13 + 12 + 11  # greedy's steps 2-4, every candidate scored exactly
    assert s.result() == exact.result()
    assert all(f == 1.0 for f in (b - a for (a, _), (b, _) in zip(s.history[13:], s.history[14:])))
    rep = race_report(s)
    assert rep["used"] == "raced" and rep["races"] == 4 and rep["exact_races"] == 3  # the first race was raced
    assert rep["look_costs"] == ev.look_costs.frozen


def test_where_every_race_is_scored_exactly_the_report_says_exact():
    """A search whose every race auto scores exactly (its estimate, replayed from a kept file, in
    force from the first look): result.json's race says used: exact, with the races and the estimate."""
    first = Timed(synthetic(), 0.05, 1e-5)
    greedy(first)
    costs = LookCosts(frozen={**first.look_costs.frozen, "after": 0})
    ev = Timed(synthetic(), 0.05, 1e-5)
    ev.look_costs = costs
    s = greedy(ev)
    rep = race_report(s)
    assert ev.row_calls == [] and rep["races"] == rep["exact_races"] == 4
    assert rep["used"] == "exact" and rep["setting"] == "auto" and rep["look_costs"]["look_rows"] == pytest.approx(5000)
    assert s.result() == greedy(synthetic(), race=False).result()


def test_the_estimate_freezes_early_only_when_no_look_of_the_race_can_pay():
    """Stopping early (EARLY_LOOKS pairs) needs the estimate (the fixed cost's lower bound over the
    median row cost) to price a look above the most rows a later look of the race could save: 5000
    rows against 416 stops; 200 rows (2 ms a look, 10 us a row) against 416 does not (measured to
    MIN_LOOKS, priced, raced); nor a fixed cost whose lower bound is within its noise, nor a median
    row cost that puts a look under 416 rows, nor probes the machine slowed (row costs negative)."""
    stop = LookCosts()
    stop.add(4, 0.05 + 4e-5, 52, 0.05 + 52e-5, most=416)
    assert stop.frozen is None  # one pair: no spread, no decision
    stop.add(4, 0.05 + 4e-5, 52, 0.05 + 52e-5, most=416)
    assert stop.frozen is not None and stop.frozen["early"] and stop.frozen["looks"] == EARLY_LOOKS
    pays = LookCosts()
    for _ in range(EARLY_LOOKS + 1):
        pays.add(4, 2e-3 + 4e-5, 52, 2e-3 + 52e-5, most=416)
    assert pays.frozen is None
    pays.add(4, 2e-3 + 4e-5, 52, 2e-3 + 52e-5, most=416)
    assert pays.frozen is not None and not pays.frozen["early"] and pays.frozen["look_rows"] == pytest.approx(200)
    noisy = LookCosts()  # fixed cost 20 or 80 ms at 10 us a row: the lower bound is under 416 rows
    noisy.add(4, 0.02 + 4e-5, 52, 0.02 + 52e-5, most=416)
    noisy.add(4, 0.08 + 4e-5, 52, 0.08 + 52e-5, most=416)
    assert noisy.frozen is None
    split = LookCosts()  # 5000 rows, then 167 (a row 30x dearer in the second pair): 0.05 / 155 us = 322 rows
    split.add(4, 0.05 + 4e-5, 52, 0.05 + 52e-5, most=416)
    split.add(4, 0.05 + 12e-4, 52, 0.05 + 52 * 3e-4, most=416)
    assert split.frozen is None
    slowed = LookCosts()  # both probes slowed by 10 ms (the machine), the rest not: row costs negative
    for _ in range(EARLY_LOOKS):
        slowed.add(4, 0.01 + 2e-5, 52, 1e-4, most=416)
    assert slowed.frozen is None  # no evidence: measured on to MIN_LOOKS


def test_a_resumed_run_reuses_the_kept_estimate_and_takes_the_same_looks(tmp_path):
    """The estimate is written to its file (LookCosts.kept: RUN_DIR/looks/<cell>.json) once frozen;
    a run that resumes reads it back and takes the interrupted run's looks, look for look, without
    timing anything, even on a scorer whose timings would now give another estimate."""
    path = tmp_path / "looks" / "greedy-perplexity-k4-s0.json"
    first = Timed(synthetic(), 2e-3, 1e-5)  # 200 rows: looks priced, some taken, some skipped
    first.look_costs = LookCosts.kept(path, clock=first.clock)
    a = greedy(first)
    assert path.exists() and first.look_costs.frozen["look_rows"] == pytest.approx(200)
    again = Timed(synthetic(), 0.05, 1e-5)  # now 5000 rows a look: measuring again would stop racing
    again.look_costs = LookCosts.kept(path, clock=again.clock)
    assert again.look_costs.frozen == first.look_costs.frozen
    b = greedy(again)
    assert again.looks == first.looks and again.row_calls != first.row_calls  # the same looks, none split
    assert a.result() == b.result() and a.used == b.used and race_report(a) == race_report(b)
    assert again.look_costs.look_s == []  # nothing timed
    fresh = Timed(synthetic(), 0.05, 1e-5)  # without the file: measured again, other looks
    greedy(fresh)
    assert fresh.looks != first.looks


def test_race_true_takes_every_look_whatever_the_costs():
    """The measurement prices only 'auto': race: true (look_rows 0) on the overhead-bound scorer
    races every step."""
    ev = Timed(synthetic(), 0.05, 1e-5)
    greedy(ev, race=True)
    assert all(len(x) for x in ev.looks) and sum(n < ROWS for _, n in ev.looks) > 4 * 2


def test_cached_looks_are_not_timed():
    """Looks answered from a cache (a resumed run's ledger) are not measured: the estimate comes
    from the first MIN_LOOKS computed looks (the first race's computed looks come last, the one
    after them is its last look, which no estimate skips: nothing to stop early for)."""
    ev = Timed(synthetic(), 0.05, 1e-5, cached=3)
    greedy(ev)
    assert ev.look_costs.frozen is not None and ev.look_costs.frozen["looks"] == MIN_LOOKS
    assert ev.look_costs.look_rows() == pytest.approx(5000, rel=1e-6)


def pairs(look_s: float, row_s: float, slow: dict | None = None, noise: float = 0.0, seed: int = 0) -> LookCosts:
    """LookCosts fed the probe/rest pairs of a first race (28 candidates, looks at 4, 8, 16, 32 rows)
    at look_s + row_s x rows per call; ``slow``: call index -> factor; ``noise``: relative."""
    rng = np.random.default_rng(seed)
    costs, k = LookCosts(), 0
    for m, n in [(28, 4), (20, 4), (14, 8), (7, 16), (3, 32)]:
        secs = []
        for x in (n, (m - 1) * n):
            secs.append((look_s + row_s * x) * (slow or {}).get(k, 1.0) * (1 + noise * rng.standard_normal()))
            k += 1
        costs.add(n, secs[0], (m - 1) * n, secs[1])
        costs.taken += 1  # the look counted, as run_race counts it (the estimate is in force from the next)
    return costs


def test_an_in_process_scorer_takes_every_look():
    """Real clock, a Python function for a scorer: a look's fixed cost is microseconds, under
    LOOK_FLOOR_S: every look is taken (auto races as race: true does)."""
    auto, true = synthetic(), synthetic()
    a, t = greedy(auto), greedy(true, race=True)
    assert auto.calls == true.calls == 0 and a.result() == t.result() and a.used == t.used
    assert [h[0] for h in a.history] == [h[0] for h in t.history]
    assert pairs(2e-5, 1e-7).look_rows() == 0.0


def test_one_slow_call_does_not_decide():
    """A CPU-like scorer with one call slowed 50x by the machine (the probe of the second look, then
    the rest of the third): the medians ignore it; and a fast one (2 ms a look, 10 us a row:
    200 rows) with one call slowed 20x."""
    for k in (2, 5):
        costs = pairs(0.02, 0.09, slow={k: 50})
        assert costs.frozen["look_s"] == pytest.approx(0.02) and costs.frozen["row_s"] == pytest.approx(0.09)
        assert costs.look_rows() == 0.0  # under one row: every look taken
        assert pairs(2e-3, 1e-5, slow={k: 20}).look_rows() == pytest.approx(200, rel=1e-6)


def test_noise_that_hides_the_fixed_cost_takes_every_look():
    """A fixed cost within its own noise (the pairs' spread) is not priced: look_rows 0; the same
    fixed cost measured without that noise is."""
    assert all(pairs(0.05, 0.09, noise=0.3, seed=s).look_rows() == 0.0 for s in range(20))
    assert pairs(0.5, 0.09).look_rows() == pytest.approx(0.5 / 0.09)


def test_free_rows_with_a_real_fixed_cost_skip_every_look():
    assert pairs(0.03, 0.0).look_rows() == math.inf
    assert pairs(0.03, 0.0).frozen["looks"] == MIN_LOOKS


def test_auto_is_measured_true_is_not():
    assert race_params("auto", ROWS) == RaceParams(look_rows="auto")
    assert race_params(True, ROWS) == RaceParams()
    assert race_params({"look_rows": "auto"}) == RaceParams(look_rows="auto")
    with pytest.raises(ValueError, match="look_rows"):
        RaceParams(look_rows="often")
    with pytest.raises(ValueError, match="look_rows"):
        RaceParams(look_rows=True)
