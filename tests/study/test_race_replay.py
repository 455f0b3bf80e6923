"""ghostsearch.study.race_replay (bench/race_replay.py's replay) on the committed row losses of exact
greedy's path at C4 64 x 64
(docs/results/bench-race-64/step<t>.parquet, issue 27): the library's own racing.run_race, replayed
with no model, spends what the live raced runs spent (their ledgers are committed beside: 54.625 of
153 evaluations at k = 6, 69.875 of 196 at k = 8) and picks exact greedy's block at every step; a
policy that drops the true best is seen as such."""

from __future__ import annotations

from pathlib import Path

import pytest

from ghostsearch.search.racing import RaceParams
from ghostsearch.study import race_replay as rr

RUN = Path(__file__).resolve().parents[2] / "docs" / "results" / "bench-race-64"


@pytest.mark.skipif(not (RUN / "step8.parquet").exists(), reason="no committed row losses")
@pytest.mark.parametrize("k, used, exact", [(6, 54.625, 153), (8, 69.875, 196)])
def test_replay_spends_what_the_live_race_spent(k, used, exact):
    out = rr.replay(rr.load_steps(RUN, k), RaceParams(), verbose=False)
    assert out["exact"] == exact and out["same"]
    assert out["used"] == pytest.approx(used, abs=1e-9)
    assert out["floor"] < out["ideal"] < out["used"] < exact  # the floor, the idealised race, the race


@pytest.mark.skipif(not (RUN / "step8.parquet").exists(), reason="no committed row losses")
def test_a_weaker_promise_loses_the_answer_at_step_8():
    """delta 0.1 with the default schedule drops the true best at step 8 (a 0.03% near-tie)."""
    steps = rr.load_steps(RUN, 8)
    assert rr.replay_step(steps[7], RaceParams())["same"]
    assert not rr.replay_step(steps[7], RaceParams(delta=0.1))["same"]


@pytest.mark.skipif(not (RUN / "step8.parquet").exists(), reason="no committed row losses")
def test_uniform_spending_is_the_race_itself():
    """--spending's race with the looks' alpha split evenly is run_race's (54.625 of 153 at k = 6);
    the weighted splits it compares are other races on the same rows (they differ in cost)."""
    import numpy as np

    steps, p = rr.load_steps(RUN, 6), RaceParams()
    cost = {}
    for kind in rr.SPENDING:
        cost[kind] = 0.0
        for recs in steps:
            X = np.array([r["row_losses"] for r in recs])[:, p.order(64)][None]
            cost[kind] += float(rr.spent_race(X, p, kind)[1][0])
    assert cost["uniform"] == pytest.approx(54.625, abs=1e-9)
    assert len({round(c, 6) for c in cost.values()}) == len(cost)


def test_dunnett_alpha_spans_the_union_bound_to_one_comparison():
    """--correlation's max_alpha: independent rivals give Sidak's level (just above a / m); perfectly
    correlated ones behave as one comparison (a); Monte Carlo within 5% (200k draws: 1.4% and 0.5% off; the
    default 400k took 0.8 s here, 200k 0.13 s)."""
    import numpy as np

    a, m, n = 0.0125, 20, 200_000
    assert rr.max_alpha(np.eye(m), a, draws=n) == pytest.approx(1 - (1 - a) ** (1 / m), rel=0.05)
    assert rr.max_alpha(np.full((m, m), 1.0), a, draws=n) == pytest.approx(a, rel=0.05)


@pytest.mark.skipif(not (RUN / "step8.parquet").exists(), reason="no committed row losses")
def test_race_looks_are_the_replayed_races_split_as_the_broker_splits_them():
    """bench/race_breakdown.py --looks's shares: step 3's raced looks as two scorers' row shares (docs/benchmarks.md:
    "step 3's ten shares"); each look's two shares hold its survivors on halves of its rows, and the candidates
    are the stored path's (path_table, what a stand-in scorer answers with)."""
    shares = rr.race_looks(RUN, [3])
    assert len(shares) == 10 and {t for t, *_ in shares} == {3}
    table = rr.path_table(RUN, 3)
    for (_, p1, c1, r1), (_, p2, c2, r2) in zip(shares[::2], shares[1::2]):
        assert p1 == p2 and c1 == c2 and set(r1).isdisjoint(r2) and abs(len(r1) - len(r2)) <= 1
        assert all(tuple(sorted(c)) in table for c in c1)
