"""ga owns its random generator: two ga searchers share a process (interleaved step by step, or in
two threads) and each gives the answer it gives alone; the global ``random`` is never touched."""

from __future__ import annotations

import random
import sys
import threading

import pytest
from search_synthetic import Synthetic

from ghostsearch.search import Budget, Race, Space, make_searcher, run
from ghostsearch.search.racing import run_race

SPACE = Space(16, 5, frozenset({0, 15}))
SYN = Synthetic.random(16, seed=1)


def ga(seed: int, race: bool):
    return make_searcher("ga", SPACE, seed=seed, budget=Budget(evaluations=70), params={"race": race})


def step(s, ev) -> bool:
    """One ask/evaluate/tell of the search loop; False once the searcher is done."""
    if s.done:
        return False
    asked = s.ask()
    if isinstance(asked, Race):
        out = run_race(asked, ev, s.name)
        s.tell(out.told, out.values)
    else:
        s.tell(asked, ev.evaluate(asked, s.name))
    return True


def trace(s):
    return s.result(), s.used, s.history


@pytest.mark.parametrize("race", [False, True], ids=["screen", "race"])
def test_two_ga_interleaved_give_their_own_answers(race):
    alone = {seed: trace(run(ga(seed, race), SYN.evaluator(rows=16))) for seed in (0, 1)}
    assert alone[0] != alone[1]  # two seeds, two different runs: the check below can tell them apart
    a, b = ga(0, race), ga(1, race)
    ev_a, ev_b = SYN.evaluator(rows=16), SYN.evaluator(rows=16)
    a.setup(ev_a)
    b.setup(ev_b)
    state = random.getstate()
    while step(a, ev_a) | step(b, ev_b):
        pass
    assert random.getstate() == state  # nothing drew from (or re-seeded) the global generator
    assert trace(a) == alone[0] and trace(b) == alone[1]


def test_two_ga_in_threads_give_their_own_answers():
    """The case the global ``random`` broke: two searchers drawing at the same time (switching
    threads every microsecond so that their draws interleave inside one generation)."""
    alone = {seed: trace(run(ga(seed, False), SYN.evaluator(rows=16))) for seed in range(8)}
    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        found: dict = {}
        threads = [
            threading.Thread(target=lambda s=seed: found.__setitem__(s, trace(run(ga(s, False), SYN.evaluator()))))
            for seed in alone
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        sys.setswitchinterval(old)
    assert found == alone
