"""compare.budget=matched: every budget-driven searcher (ga, bo, cbo) gets exactly greedy's cost at
each k and spends it (within one evaluation); fixed-cost searchers run to their natural end; a
budget that cannot be met, or an explicit one that contradicts matching, is one line."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from ghostsearch.config import budget_driven, build_searcher, load_config
from ghostsearch.core.errors import GhostsearchError
from ghostsearch.search import SEARCHERS, Space, run
from ghostsearch.search.common import greedy_cost

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "search"))
from search_synthetic import Synthetic  # noqa: E402

L = 16
CFG = load_config(None, ["search.protected=[0,-1]", "search.params.bo.sampler=tpe"])
EXACT = load_config(None, ["search.protected=[0,-1]", "search.params.greedy.race=false"])


@pytest.mark.parametrize("k", [3, 5])
def test_matched_budgets_are_greedys_cost_and_are_spent(k):
    syn = Synthetic.random(L, seed=k)
    g = greedy_cost(Space(L, k, frozenset({0, L - 1})))
    # the matched budget is EXACT greedy's cost (greedy_cost, known before any evaluation); with
    # race: auto (the default, from 32 calibration rows) greedy itself may spend less
    greedy = run(build_searcher(EXACT, "greedy", k, 0, L, matched=True), syn.evaluator())
    assert greedy.used == g
    raced = run(build_searcher(CFG, "greedy", k, 0, L, matched=True), syn.evaluator())
    assert raced.used <= g
    space = Space(L, k, frozenset({0, L - 1}))
    driven = [n for n in SEARCHERS.names() if budget_driven(SEARCHERS.get(n), space, {})]  # ga, bo, cbo
    assert driven
    for name in driven:
        s = build_searcher(CFG, name, k, 0, L, matched=True)
        assert s.budget.evaluations == g
        run(s, syn.evaluator())
        assert g - 1 <= s.used <= g, (name, s.used, g)
    for name in sorted(set(SEARCHERS.names()) - set(driven)):  # fixed cost: not matched, their own end
        assert build_searcher(CFG, name, k, 0, L, matched=True).budget.evaluations != g


def test_matched_budget_errors_are_one_line():
    with pytest.raises(GhostsearchError, match="compare.budget=matched sets ga's budget") as e:
        build_searcher(load_config(None, ["search.params.ga.budget=40"]), "ga", 3, 0, L, matched=True)
    assert "\n" not in str(e.value)
    from ghostsearch.search import SEARCHERS
    from ghostsearch.search.ga import GA

    class Hungry(GA):  # a budget-driven searcher that needs more than greedy's cost to answer
        name = "hungry"

        @classmethod
        def min_budget(cls, space, params):
            return 10_000.0

    SEARCHERS.add("hungry", Hungry)
    try:
        with pytest.raises(GhostsearchError, match="needs at least 10000 .* compare.budget=own"):
            build_searcher(CFG, "hungry", 3, 0, L, matched=True)
    finally:
        SEARCHERS.remove("hungry")
