"""greedy's bar shows its current best while it searches (issue 48: ``best=-`` until its last evaluation,
because greedy is told a k-set only at its last step): the lowest full-fidelity value at the largest set
size evaluated so far, with that size; the searcher's own best once it has one."""

from __future__ import annotations

from ghostsearch.run.runner import Progress
from ghostsearch.rundir.ledger import LedgerRow


def row(removed, value, fidelity=1.0):
    return LedgerRow(
        eval_id=None,
        cell="greedy-perplexity-k3-s0",
        searcher="greedy",
        objective="perplexity",
        objective_key="x",
        removed=list(removed),
        k=3,
        fidelity=fidelity,
        value=value,
        cached=False,
    )


def test_the_bar_shows_the_best_of_the_deepest_step_so_far():
    bar = Progress(10, "cell", enabled=False)
    assert bar.shown() == "-"
    bar(row([1], 20.5))
    bar(row([2], 19.25))
    assert bar.shown() == "19.25@k1"
    bar(row([2, 4], 30.0))
    bar(row([2, 5], 28.0, fidelity=0.5))  # a partial evaluation is not a value of the set
    assert bar.shown() == "30@k2"
    bar.told(31.5)  # the searcher's own answer once it has one
    assert bar.shown() == "31.5"
