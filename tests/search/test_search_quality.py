"""Quality on synthetic objectives with a known optimum (additive + pairwise, L = 12, k = 4, solved
exhaustively). Run with ``pytest -s`` to see every searcher's gap to the optimum."""

from __future__ import annotations

import time
import warnings

import pytest
from search_synthetic import Synthetic

from ghostsearch.search import SEARCHERS, Space, make_searcher, run

L, K, INSTANCES = 12, 4, range(5)
SPACE = Space(L, K)
_results: dict = {}


def result(name: str, instance: int, params: dict | None = None):
    """(gap to the optimum as a fraction of it, evaluations used, seconds), run once and cached."""
    key = (name, instance, tuple(sorted((params or {}).items())))
    if key not in _results:
        syn = Synthetic.random(L, seed=instance)
        _, best, _ = syn.optimum(K)
        t = time.monotonic()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # optuna's experimental-feature warnings
            s = run(make_searcher(name, SPACE, seed=0, params=params), syn.evaluator())
        _results[key] = ((s.best_value - best) / abs(best), s.used, time.monotonic() - t)
    return _results[key]


# (label, searcher, params): every registered searcher with defaults; bo with TPE here, since its
# default GPSampler costs about a second of CPU per trial (see the slow test below).
QUICK = {"bo": {"sampler": "tpe"}}
CASES = [("-".join([n, *QUICK.get(n, {}).values()]), n, QUICK.get(n)) for n in SEARCHERS.names()]
CASE = {label: (name, params) for label, name, params in CASES}


def gaps(label: str) -> list[float]:
    name, params = CASE[label]
    return [result(name, i, params)[0] for i in INSTANCES]


def test_ga_reaches_the_optimum():
    """ga only: this landscape (additive + pairwise) is exactly the quadratic form cbo's surrogate
    fits, so cbo reaching its optimum here would be true by construction; cbo is tested on the
    Rugged landscape below, which no surrogate here models."""
    assert max(gaps("ga")) <= 0.01, gaps("ga")


def test_bo_reaches_the_optimum_on_most_instances():
    """Known shortfall: on instance 3 the prior points away from the optimum (it removes a block
    whose single removal is costly) and bo ends 1-2 swaps short in its default budget."""
    g = gaps("bo-tpe")
    assert sum(x <= 0.01 for x in g) >= len(g) - 1, g


@pytest.mark.slow
def test_bo_with_gp_reaches_the_optimum_on_most_instances():
    """GP bo one proposal at a time, unraced (this landscape has no per-row noise to race on;
    raced GP bo fits a GP for every raced proposal, several times the CPU of this test)."""
    CASE["bo-gp"] = ("bo", {"batch": 1, "race": False})
    g = gaps("bo-gp")
    assert sum(x <= 0.01 for x in g) >= len(g) - 1, g


def test_beam_is_never_worse_than_greedy():
    for i in INSTANCES:
        assert result("beam", i)[0] <= result("greedy", i)[0] + 1e-12


def test_beam_of_width_one_is_greedy():
    for i in INSTANCES:
        syn = Synthetic.random(L, seed=i)
        b = run(make_searcher("beam", SPACE, params={"width": 1, "race": False}), syn.evaluator())
        g = run(make_searcher("greedy", SPACE, params={"race": False}), syn.evaluator())
        assert b.result() == g.result() and b.used == g.used and b.history == g.history


def test_print_gaps():
    """Every searcher's gap to the optimum, per instance (relative to the optimum's value)."""
    print(f"\nsynthetic L={L} k={K}: gap to optimum per instance, mean evaluations, mean seconds")
    for label, name, params in CASES:
        rows = [result(name, i, params) for i in INSTANCES]
        line = " ".join(f"{g:6.1%}" for g, _, _ in rows)
        print(
            f"  {label:10s} {line}   evals {sum(r[1] for r in rows) / len(rows):6.1f}   "
            f"{sum(r[2] for r in rows) / len(rows):6.2f}s"
        )


def test_racing_finds_the_rugged_optimum_that_greedy_misses():
    """On a landscape that is not cbo's quadratic form (curved, third-order, a threshold; per-row
    noisy losses), whose optimum greedy misses: cbo and bo, racing their proposals, reach the
    optimum within greedy's own budget, and raced greedy returns exact greedy's answer for less."""
    from search_synthetic import Rugged

    from ghostsearch.search import Budget
    from ghostsearch.search.common import greedy_cost

    space = Space(14, 5)
    reached = {"cbo": 0, "bo": 0}
    for seed in (0, 2):
        syn = Rugged.random(14, seed)
        best, value = syn.optimum(5)
        exact = run(make_searcher("greedy", space, params={"race": False}), syn.evaluator())
        raced = run(make_searcher("greedy", space, params={"race": True}), syn.evaluator())
        assert exact.best_value > value + 0.1  # greedy misses the optimum
        assert raced.best_removed == exact.best_removed and raced.best_value == pytest.approx(exact.best_value)
        assert raced.used <= 0.4 * exact.used
        for name, params in (("cbo", {}), ("bo", {"sampler": "tpe"})):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                s = run(make_searcher(name, space, budget=Budget(greedy_cost(space)), params=params), syn.evaluator())
            assert s.used <= greedy_cost(space) + 1e-9
            reached[name] += s.best_removed == best and s.best_value == pytest.approx(value)
    assert reached == {"cbo": 2, "bo": 2}
