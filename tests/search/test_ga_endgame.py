"""ga's endgame (issue 40): the last ``endgame`` fraction of the budget is a one-swap local search
around the best k-set. Checked on synthetic landscapes where the neighbourhood is known: every set
the endgame asks is an unscored one-swap neighbour of the best at that moment, a long enough endgame
ends on a one-swap local optimum, and ``endgame: 0`` (the default) is the old ga, ask for ask."""

from __future__ import annotations

import pytest
from search_synthetic import Synthetic

from ghostsearch.search import Budget, Race, Space, make_searcher, run
from ghostsearch.search.base import canonical
from ghostsearch.search.racing import run_race

SPACE = Space(14, 4, frozenset({0, 13}))


def ga(seed: int, budget: float, **params):
    return make_searcher("ga", SPACE, seed=seed, budget=Budget(evaluations=budget), params=params)


def swaps(s):
    return {canonical([b for b in s if b != o] + [i]) for o in s for i in SPACE.free if i not in s}


def asks(s, ev) -> list[tuple[str, list, object]]:
    """Drive ``s`` to the end; per ask: its phase, the sets asked, and the centre before the ask."""
    out = []
    while not s.done:
        phase, centre = s.phase(), s.centre()
        asked = s.ask()
        cands = asked.candidates if isinstance(asked, Race) else asked
        out.append((phase, [c.removed for c in cands], centre))
        if isinstance(asked, Race):
            r = run_race(asked, ev, s.name)
            s.tell(r.told, r.values)
        else:
            s.tell(asked, ev.evaluate(asked, s.name))
    return out


@pytest.mark.parametrize("race", [True, False])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_the_endgame_asks_unscored_neighbours_of_the_best_and_ends_on_a_local_optimum(seed, race):
    syn = Synthetic.random(14, seed=seed)
    s = ga(seed, 120, race=race, endgame=0.8)
    seen_before: set = set()
    log = asks(s, syn.evaluator(rows=32))
    phases = [p for p, _, _ in log]
    assert "endgame" in phases
    for phase, sets, centre in log:
        if phase == "endgame":
            assert set(sets) <= swaps(centre) and not set(sets) & seen_before  # fresh one-swap neighbours
        seen_before |= set(sets)
    best = s.result()[0]
    assert all(n in seen_before for n in swaps(best)), "the endgame stopped before a one-swap local optimum"
    assert s.used <= 120 + 1e-9


def test_endgame_zero_is_the_old_ga_and_a_run_is_deterministic():
    syn = Synthetic.random(14, seed=3)
    old = run(ga(4, 80, race=True), syn.evaluator(rows=32))
    zero = run(ga(4, 80, race=True, endgame=0.0), syn.evaluator(rows=32))
    assert (old.result(), old.used, old.history) == (zero.result(), zero.used, zero.history)
    a = run(ga(4, 80, race=True, endgame=0.25), syn.evaluator(rows=32))
    b = run(ga(4, 80, race=True, endgame=0.25), syn.evaluator(rows=32))
    assert (a.result(), a.used, a.history) == (b.result(), b.used, b.history)
    # the two share everything before the endgame starts (at 75% of the budget)
    n = next(i for i, (u, _) in enumerate(a.history) if u > 0.75 * 80 - 2)
    assert a.history[:n] == old.history[:n]


def test_endgame_must_be_a_fraction():
    from ghostsearch.core.errors import GhostsearchError

    with pytest.raises(GhostsearchError, match="endgame"):
        ga(0, 80, endgame=1.5)
