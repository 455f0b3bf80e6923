"""The comparison's statistics against scipy, and its summaries on fixed inputs."""
import math

import numpy as np
import pytest
from scipy import stats

from ghostsearch.report import correlations, rank, spearman, spread, summary


@pytest.mark.parametrize("seed", range(5))
def test_spearman_matches_scipy(seed):
    rng = np.random.default_rng(seed)
    x = rng.integers(0, 5, 12).astype(float)  # with ties
    y = rng.normal(size=12)
    assert spearman(x, y) == pytest.approx(stats.spearmanr(x, y).statistic, abs=1e-12)
    np.testing.assert_allclose(rank(x), stats.rankdata(x))


def test_spearman_undefined_is_nan():
    assert math.isnan(spearman([1.0], [2.0]))
    assert math.isnan(spearman([1.0, 1.0, 1.0], [1.0, 2.0, 3.0]))


ROWS = [  # perplexity ranks opposite to accuracy; margin agrees
    {"cell": "a", "objective": "perplexity", "k": 4, "calib_value": 30.0, "mean_acc": 0.40, "removed": [1]},
    {"cell": "b", "objective": "perplexity", "k": 4, "calib_value": 32.0, "mean_acc": 0.42, "removed": [2]},
    {"cell": "c", "objective": "perplexity", "k": 4, "calib_value": 35.0, "mean_acc": 0.44, "removed": [3]},
    {"cell": "d", "objective": "margin", "k": 4, "calib_value": -0.5, "mean_acc": 0.50, "removed": [4]},
    {"cell": "e", "objective": "margin", "k": 4, "calib_value": -0.3, "mean_acc": 0.49, "removed": [5]},
    {"cell": "f", "objective": "margin", "k": 4, "calib_value": -0.1, "mean_acc": 0.47, "removed": [6]},
]


def test_correlations_and_spread_on_fixed_inputs():
    c = {x["objective"]: x["rho"] for x in correlations(ROWS)}
    assert c["perplexity"] == pytest.approx(stats.spearmanr([30, 32, 35], [0.40, 0.42, 0.44]).statistic)
    assert c["perplexity"] == pytest.approx(1.0) and c["margin"] == pytest.approx(-1.0)
    sp = spread(ROWS)
    assert sp["within"]["perplexity"] == pytest.approx(0.04)
    assert sp["within"]["margin"] == pytest.approx(0.03)
    assert sp["between"] == pytest.approx(np.mean([0.5, 0.49, 0.47]) - 0.42)


def test_summary_says_what_the_numbers_say():
    text = "\n".join(summary(ROWS))
    assert "margin is highest" in text
    assert "the objective matters more than the search" in text
    assert "perplexity, k=4: Spearman rho(calibration value, accuracy) = +1.00" in text
    assert "runs opposite to" in text and "agrees with" in text
    assert "Best downstream: d" in text


def test_summary_calls_a_weak_correlation_weak_and_states_the_noise():
    rows = [{**r, "arc_easy_n": 100, "piqa_n": 100} for r in ROWS]
    rows[1] = {**rows[1], "mean_acc": 0.45}  # perplexity: calib 30, 32, 35, 36 vs acc .40, .45, .44, .41
    rows += [{"cell": "g", "objective": "perplexity", "k": 4, "calib_value": 36.0, "mean_acc": 0.41, "removed": [7],
              "arc_easy_n": 100, "piqa_n": 100}]
    rho = stats.spearmanr([30, 32, 35, 36], [0.40, 0.45, 0.44, 0.41]).statistic
    assert abs(rho) < 0.3
    text = "\n".join(summary(rows))
    assert f"perplexity, k=4: Spearman rho(calibration value, accuracy) = {rho:+.2f} over 4 cells: no clear relation" in text
    se = math.sqrt(np.mean([r["mean_acc"] for r in rows]) * (1 - np.mean([r["mean_acc"] for r in rows])) / 200)
    assert f"rests on 200 task items (standard error about {se:.3f})" in text
