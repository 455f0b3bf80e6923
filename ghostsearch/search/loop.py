"""The search loop: ask, evaluate (or race), tell, until done; and the in-process evaluator."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Callable, Protocol, Sequence, cast

from ghostsearch.core.errors import GhostsearchError
from ghostsearch.search.base import Candidate, Oracle, Removed, Searcher
from ghostsearch.search.racing import LookCosts, Outcome, Race, RowEvaluator, RowRequest, no_look_pays, run_race


class Evaluator(Protocol):
    """What the runner evaluates through: the Ray pool's client, or an in-process function (tests).
    Racing also needs ``n_rows()`` and ``rows(requests, searcher)`` (see racing.RowEvaluator)."""

    def evaluate(self, candidates: Sequence[Candidate], searcher: str) -> list[float]: ...


@dataclass
class FunctionEvaluator:
    """In-process evaluator over a plain function of the removed set (synthetic objectives, tests).
    ``fn(removed, fidelity) -> value``; racing scores ``row_fn(removed, row)`` on ``n_rows`` rows
    (default: ``fn(removed, 1.0)`` on every row) and a value is the mean over its rows.
    Counts calls so tests can check budgets."""

    fn: Callable[[Removed, float], float]
    statistics: dict = field(default_factory=dict)
    calls: int = 0
    row_fn: Callable[[Removed, int], float] | None = None
    rows_total: int = 16

    def evaluate(self, candidates: Sequence[Candidate], searcher: str = "") -> list[float]:
        self.calls += len(candidates)
        return [float(self.fn(c.removed, c.fidelity)) for c in candidates]

    def n_rows(self) -> int:
        return self.rows_total

    def rows(self, requests: Sequence[RowRequest], searcher: str = "") -> list[tuple[list[float], list[float], float]]:
        out = []
        for q in requests:
            sums = [float(self.row_fn(q.removed, r)) if self.row_fn else float(self.fn(q.removed, 1.0)) for r in q.rows]
            out.append((sums, [1.0] * len(sums), (q.before[0] + sum(sums)) / (q.before[1] + len(sums))))
        return out

    def statistic(self, name: str):
        if name not in self.statistics:
            raise GhostsearchError(f"statistic {name!r} is not available from this evaluator")
        return self.statistics[name]


def race(r: Race, evaluator, searcher: str, costs: LookCosts | None = None) -> Outcome:
    if not hasattr(evaluator, "rows"):
        raise GhostsearchError(
            f"searcher '{searcher}' races its candidates, which this evaluator cannot "
            "(no per-row losses); set race: false"
        )
    return run_race(r, evaluator, searcher, costs)


def run(
    searcher: Searcher,
    evaluator: Evaluator,
    *,
    oracle: Oracle | None = None,
    on_tell: Callable[[Searcher], None] | None = None,
    stop: Callable[[], bool] | None = None,
    on_told: Callable[[Sequence[Candidate]], None] | None = None,
) -> Searcher:
    """Drive a searcher to completion: ask, evaluate (or race), tell, until done or out of time.
    After each tell: ``on_told(candidates)`` with the candidates told, in the order they were added
    to ``searcher.history`` (one entry each), then ``on_tell(searcher)``. Races share one
    ``racing.LookCosts`` (the evaluator's ``look_costs`` if it has one, else a new one): what a look
    costs, measured on the search's first looks, prices the looks of ``race: auto``; a race none
    of whose looks would pay is scored exactly (``racing.no_look_pays``). The searcher's ``race_tally``
    (search/race_report.py ``RaceTally``) count its races, those scored exactly so and the ``cut``
    ones, and keep the estimate, for ``race_report``."""
    t0 = time.monotonic()
    costs = getattr(evaluator, "look_costs", None) or LookCosts()
    if getattr(getattr(searcher, "params", None), "race", False) not in (False, None) and hasattr(evaluator, "n_rows"):
        searcher.rows = int(evaluator.n_rows())  # race: auto decides on it
    if oracle is None and getattr(evaluator, "statistic", None) is not None:
        oracle = cast(Oracle, evaluator)  # an evaluator with dense statistics is the searcher's oracle
    searcher.setup(oracle)
    while not searcher.done:
        if searcher.budget.seconds is not None and time.monotonic() - t0 > searcher.budget.seconds:
            break
        if stop is not None and stop():
            break
        asked = searcher.ask()
        raced = asked if isinstance(asked, Race) else None
        cands = raced.candidates if raced is not None else cast("list[Candidate]", asked)  # not a Race: a list
        if not cands:
            if searcher.done:
                break
            raise GhostsearchError(
                f"searcher '{searcher.name}' asked nothing but is not done; its ask must return a candidate "
                "(or a race) until done is true"
            )
        searcher.check_fresh(cands)  # never the same set twice
        cost = raced.cost if raced is not None else sum(c.fidelity for c in cands)
        if cost > searcher.budget_left + 1e-9:
            raise RuntimeError(
                f"searcher {searcher.name} asked {cost:g} evaluations with {searcher.budget_left:g} left"
            )
        if raced is not None:
            searcher.race_tally.asked += 1
            searcher.race_tally.look_costs = (
                costs.frozen
            )  # race: auto's estimate, once made (the cell's result reports it)
        if (
            raced is not None
            and hasattr(evaluator, "n_rows")
            and no_look_pays(raced, int(cast(RowEvaluator, evaluator).n_rows()), costs)
        ):
            raced = None  # race: auto where a look costs more than any rows it could save: exact scoring
            searcher.race_tally.exact += 1
        if raced is not None:
            out = race(raced, evaluator, searcher.name, costs)
            searcher.race_tally.cut += len(out.cut)
            searcher.race_tally.look_costs = costs.frozen
            told = list(out.told)
            searcher.tell(told, out.values)
        else:
            told = list(cands)
            searcher.tell(told, evaluator.evaluate(cands, searcher.name))
        if on_told is not None:
            on_told(told)
        if on_tell is not None:
            on_tell(searcher)
    return searcher
