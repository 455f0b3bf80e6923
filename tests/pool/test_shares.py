"""How the broker divides one look of a race among its scorers (``actors.shares``) and joins a
candidate's parts back (``actors.joined``): every (candidate, row) once, no scorer left without a
share while the look has work for it, rows split before candidates, parts joined in row order."""

from __future__ import annotations

import pytest

from ghostsearch.pool.actors import Served, joined, shares
from ghostsearch.scoring import RowScore


@pytest.mark.parametrize(
    "m, n, scorers", [(28, 4, 2), (28, 4, 8), (3, 32, 8), (1, 32, 32), (5, 2, 32), (1, 1, 4), (3, 5, 8), (2, 3, 7)]
)
def test_a_look_is_divided_so_that_no_scorer_waits_while_work_remains(m, n, scorers):
    todo = list(range(10, 10 + m))
    got = shares(todo, n, scorers)
    cells = [(c, r) for group, (_, lo, hi) in got for c in group for r in range(lo, hi)]
    assert sorted(cells) == sorted((c, r) for c in todo for r in range(n))  # every candidate x row, once
    most = max(h * g for h in range(1, n + 1) for g in range(1, m + 1) if h * g <= scorers)
    assert len(got) == most and all(group and hi > lo for group, (_, lo, hi) in got)  # as many as can be
    if m * n >= scorers and n >= scorers:
        assert len(got) == scorers and all(len(group) == m for group, _ in got)  # rows split: prefix once per row


def test_no_work_no_share():
    assert shares([], 4, 8) == []


def test_a_candidates_parts_join_in_row_order():
    def part(sums, actor):
        return Served(RowScore(sums=sums, counts=[1.0] * len(sums), tokens=len(sums), seconds=0.5, start=3), actor, "n")

    one = joined([part([1.0, 2.0], "a"), part([3.0], "b")])
    assert one.score.sums == [1.0, 2.0, 3.0] and one.score.counts == [1.0] * 3
    assert (one.score.tokens, one.score.seconds, one.actor) == (3, 1.0, "a")
