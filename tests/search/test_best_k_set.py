""" "The best full-fidelity k-set", one rule (search.base.new_best) for the searcher's answer and
history (which the progress bar shows: runner.run_cell's ``bar.told(s.best_value)``), the broker's
per-cell best and the report's best-so-far curves (rundir/curves.py, tested in
tests/rundir/test_curves.py). Greedy and beam score smaller sets on the way, ga and cbo screen at
fidelity < 1: none of those values may ever be shown or reported as the best.
(Before the rule was written once, the runner's bar took the best of every row and showed
best=78.17, a 1-block removal, during a k=3 search.)"""

from __future__ import annotations

import math

import pytest
from search_synthetic import Synthetic

from ghostsearch.search import SEARCHERS, Budget, Space, make_searcher, run
from ghostsearch.search.base import new_best

SPACE = Space(12, 3, frozenset({0, 11}))
SYN = Synthetic.random(12, seed=3)


def test_the_rule():
    assert new_best((1, 2, 3), 1.0, 5.0, 3, None)
    assert new_best((1, 2, 3), 1.0, 5.0, 3, math.inf)
    assert new_best((1, 2, 3), 1.0, 5.0, 3, 6.0)
    assert not new_best((1, 2, 3), 1.0, 6.0, 3, 6.0)  # a tie keeps the first
    assert not new_best((1, 2), 1.0, 1.0, 3, 6.0)  # a smaller set on the way to k
    assert not new_best((1, 2, 3, 4), 1.0, 1.0, 3, 6.0)
    assert not new_best((1, 2, 3), 0.5, 1.0, 3, 6.0)  # a screened value


# parameters by searcher, a case's data: bo with TPE, since its default Gaussian-process fits take
# over a minute here (it tells through the same Searcher.tell; the conformance suite runs the default)
QUICK = {"bo": {"sampler": "tpe"}}


@pytest.mark.parametrize("name", SEARCHERS.names())
def test_the_best_shown_is_always_a_full_fidelity_k_set(name):
    cls, params = SEARCHERS.get(name), QUICK.get(name, {})
    budget = Budget(cls.min_budget(SPACE, cls.parse_params(params)) + 8)
    s = make_searcher(name, SPACE, seed=0, budget=budget, params=params)
    told, shown = [], []
    tell = s.tell

    def recording_tell(candidates, values):
        told.extend(zip(candidates, values))
        tell(candidates, values)

    s.tell = recording_tell
    run(s, SYN.evaluator(), on_told=lambda _: shown.append((s.best_value, len(told))))
    assert shown and told
    k_sets = {}  # full-fidelity k-set -> value, in the order told
    for i, (best, n) in enumerate(shown):
        for c, v in told[:n]:
            if c.fidelity >= 1.0 and len(c.removed) == SPACE.k:
                k_sets.setdefault(c.removed, v)
        assert best == min(k_sets.values(), default=math.inf), (name, i)
    assert (s.best_removed is None) == (not k_sets)
    if s.best_removed is not None:
        assert len(s.best_removed) == SPACE.k and s.best_value == k_sets[s.best_removed]
    if cls.uses_prefix:  # R + {j}: the case that broke the bar, smaller sets told with lower values
        assert min(v for c, v in told if len(c.removed) < SPACE.k) < s.best_value
