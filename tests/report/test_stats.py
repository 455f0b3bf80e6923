"""The comparison's statistics against scipy, and its summaries on fixed inputs."""
import math

import numpy as np
import pytest
from scipy import stats

from ghostsearch.evaluate import binomial_stderr
from ghostsearch.report import (comparison_table, correlations, group_mean, overlap, rank, spearman, spearman_ci,
                                spread, summary)


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
    assert f"perplexity, k=4: Spearman rho(calibration value, accuracy) = {rho:+.2f} (95% CI [" in text
    assert "over 4 cells: no clear relation" in text
    se = math.sqrt(np.mean([r["mean_acc"] for r in rows]) * (1 - np.mean([r["mean_acc"] for r in rows])) / 200)
    assert f"rests on 200 task items (standard error about {se:.3f})" in text


@pytest.mark.parametrize("p, n", [(0.5, 20), (0.73, 100), (0.1, 1172)])
def test_binomial_stderr_is_lm_evals_and_scipys(p, n):
    k = round(p * n)
    scores = np.array([1.0] * k + [0.0] * (n - k))
    assert binomial_stderr(k / n, n) == pytest.approx(stats.sem(scores), rel=1e-12)  # sample sd / sqrt(n)


def test_spearman_interval_is_seeded_and_covers_rho():
    rng = np.random.default_rng(3)
    x, y = rng.normal(size=15), rng.normal(size=15)
    lo, hi = spearman_ci(x, y, seed=1)
    assert (lo, hi) == spearman_ci(x, y, seed=1) and (lo, hi) != spearman_ci(x, y, seed=2)
    assert lo <= spearman(x, y) <= hi and -1 <= lo < hi <= 1
    ref = stats.bootstrap((x, y), lambda a, b: stats.spearmanr(a, b).statistic, paired=True, vectorized=False,
                          n_resamples=2000, method="percentile", random_state=0).confidence_interval
    assert lo == pytest.approx(ref.low, abs=0.1) and hi == pytest.approx(ref.high, abs=0.1)


def test_within_noise_comes_from_the_intervals():
    a = {"cell": "a", "objective": "perplexity", "k": 4, "calib_value": 1.0, "removed": [1], "mean_acc": 0.50,
         "mean_acc_stderr": 0.02}
    b = {**a, "cell": "b", "mean_acc": 0.47, "removed": [2]}
    far = {**a, "cell": "c", "mean_acc": 0.30, "removed": [3]}
    assert overlap((0.46, 0.54), (0.43, 0.51)) and not overlap((0.46, 0.54), (0.26, 0.34))
    assert "within noise of b" in "\n".join(summary([a, b]))
    assert "within noise" not in "\n".join(summary([a, far]))
    m, ci = group_mean([a, b])
    assert m == pytest.approx(0.485) and ci[1] - ci[0] == pytest.approx(2 * 1.96 * math.sqrt(2 * 0.02 ** 2) / 2)


class _Cfg:
    class compare:  # noqa: N801
        recovery = ["none", "ghosted"]


def test_table_has_the_dense_row_first_and_a_row_per_recovery():
    results = [{"cell": "greedy-perplexity-k2-s0", "searcher": "greedy", "objective": "perplexity", "k": 2,
                "seed": 0, "removed": [3, 4], "value": 40.0, "dense_value": 30.0, "relative_change": 1 / 3,
                "evaluations": 5, "budget_used": 5.0, "wall_seconds": 1.0, "cache_hits": 0}]
    evals = {("greedy-perplexity-k2-s0", "none"): {"mean_acc": 0.40, "ppl_wikitext2": 60.0},
             ("greedy-perplexity-k2-s0", "ghosted"): {"mean_acc": 0.44, "ppl_wikitext2": 45.0}}
    t = comparison_table(_Cfg, results, evals, dense={"mean_acc": 0.50, "ppl_wikitext2": 30.0}).to_pylist()
    assert [(r["cell"], r["recovery"]) for r in t] == [("dense", "none"), ("greedy-perplexity-k2-s0", "none"),
                                                       ("greedy-perplexity-k2-s0", "ghosted")]
    assert t[1]["delta_mean_acc"] == pytest.approx(-0.10) and t[2]["delta_ppl_wikitext2"] == pytest.approx(15.0)
    assert "dense" not in "\n".join(summary(t))


def test_correlations_count_a_seed_that_found_the_same_set_once():
    twice = ROWS + [dict(r, cell=r["cell"] + "-s1", seed=1) for r in ROWS]
    got = {x["objective"]: (x["n"], x["rho"], x["rho_lo"], x["rho_hi"]) for x in correlations(twice)}
    assert got == {x["objective"]: (3, x["rho"], x["rho_lo"], x["rho_hi"]) for x in correlations(ROWS)}
