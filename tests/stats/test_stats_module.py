"""ghostsearch.stats.inference against scipy and against numbers worked out by hand or by simulation."""

import math

import numpy as np
import pytest
from scipy import stats as ss

from ghostsearch.stats import inference as stats


@pytest.mark.parametrize("p", [1e-12, 1e-6, 0.001, 0.025, 0.2, 0.5, 0.8, 0.975, 0.999999])
def test_norm_ppf_and_cdf_match_scipy(p):
    assert stats.norm_ppf(p) == pytest.approx(ss.norm.ppf(p), rel=1e-9, abs=1e-12)
    x = ss.norm.ppf(p)
    assert stats.norm_cdf(x) == pytest.approx(p, rel=1e-9) and stats.norm_sf(x) == pytest.approx(1 - p, rel=1e-9)


def test_paired_test_without_strata_is_the_paired_t_statistic():
    rng = np.random.default_rng(0)
    a, b = rng.integers(0, 2, 300), rng.integers(0, 2, 300)
    t = stats.paired_test(a, b)
    ref = ss.ttest_rel(a, b)
    assert t.z == pytest.approx(ref.statistic, rel=1e-12)
    assert t.p == pytest.approx(2 * ss.norm.sf(abs(ref.statistic)), rel=1e-9)
    assert t.estimate == pytest.approx(np.mean(a - b))


def test_paired_test_with_strata_weights_tasks_equally():
    """Task x: 10 items, difference 1 on every item; task y: 30 items, difference 0: the macro mean is
    0.5 (not 10/40), and the variance is 0 within both tasks."""
    a = np.array([1] * 10 + [1] * 30)
    b = np.array([0] * 10 + [1] * 30)
    strata = ["x"] * 10 + ["y"] * 30
    t = stats.paired_test(a, b, strata)
    assert (t.estimate, t.se, t.p) == (0.5, 0.0, 0.0)
    assert stats.paired_test(a, a, strata).p == 1.0
    assert stats.stratified_mean(a - b, strata, weights=[1, 3]) == pytest.approx(0.25)


def test_paired_interval_is_seeded_resamples_within_tasks_and_matches_scipy():
    rng = np.random.default_rng(1)
    a, b = rng.integers(0, 2, 400), rng.integers(0, 2, 400)
    ci = stats.paired_diff_ci(a, b, n_boot=4000, seed=3)
    assert ci == stats.paired_diff_ci(a, b, n_boot=4000, seed=3) and ci.level == 0.95 and "percentile" in ci.method
    ref = ss.bootstrap((a - b,), np.mean, n_resamples=4000, method="percentile", random_state=0).confidence_interval
    assert ci.lo == pytest.approx(ref.low, abs=0.01) and ci.hi == pytest.approx(ref.high, abs=0.01)
    bca = stats.paired_diff_ci(a, b, n_boot=4000, seed=3, method="bca")
    ref = ss.bootstrap((a - b,), np.mean, n_resamples=4000, method="BCa", random_state=0).confidence_interval
    assert bca.lo == pytest.approx(ref.low, abs=0.01) and bca.hi == pytest.approx(ref.high, abs=0.01)
    # constant within each task: every within-task resample gives the same macro mean
    x = np.array([1.0] * 5 + [0.0] * 15)
    assert stats.mean_ci(x, ["t"] * 5 + ["u"] * 15, n_boot=200) == stats.Interval(
        0.5, 0.5, 0.5, 0.95, stats.mean_ci(x, ["t"] * 5 + ["u"] * 15, n_boot=200).method
    )
    with pytest.raises(ValueError):
        stats.paired_diff_ci(a, b[:10])


def test_holm_by_hand_and_its_levels():
    p = [0.01, 0.04, 0.03, math.nan, 0.5]
    # m = 4 tested: sorted 0.01, 0.03, 0.04, 0.5 -> 0.04, 0.09, 0.09 (monotone), 0.5
    np.testing.assert_allclose(stats.holm(p), [0.04, 0.09, 0.09, math.nan, 0.5])
    lv = stats.holm_levels(p, 0.05)
    assert lv[0] == pytest.approx(1 - 0.05 / 4)  # rejected at the first step
    assert lv[1] == lv[2] == lv[4] == pytest.approx(1 - 0.05 / 3) and math.isnan(lv[3])  # Holm stopped at step 2


def test_mdd_and_items_needed_reproduce_the_issue_numbers():
    assert stats.mdd(0.163, 80) == pytest.approx(0.126, abs=5e-4)
    assert stats.mdd(0.163, 1200) == pytest.approx(0.033, abs=5e-4)
    n = stats.items_needed(0.163, 0.033)
    assert stats.mdd(0.163, n) <= 0.033 < stats.mdd(0.163, n - 1)


def test_spending_bounds_single_look_and_first_look_are_closed_form():
    assert stats.spending_bounds([1.0], 0.05) == [pytest.approx(1.959964, abs=1e-5)]
    for kind in ("obrien-fleming", "pocock"):
        b = stats.spending_bounds([1 / 3, 2 / 3, 1.0], 0.05, kind)
        assert b[0] == pytest.approx(ss.norm.isf(stats.spend(1 / 3, 0.05, kind) / 2), abs=1e-6)
    obf = stats.spending_bounds([1 / 3, 2 / 3, 1.0], 0.05)
    assert obf[0] > obf[1] > obf[2] > 1.96  # O'Brien-Fleming: strict early, near 1.96 at the end


@pytest.mark.parametrize("kind, fractions", [("obrien-fleming", [0.25, 0.5, 1.0]), ("pocock", [1 / 3, 2 / 3, 1.0])])
def test_spending_bounds_spend_exactly_alpha_by_simulation(kind, fractions):
    """The joint normal of the looks' z statistics simulated (1,000,000 Brownian paths, seeded): the
    probability of crossing some bound is alpha to within 1e-3 (Monte-Carlo sd 2.2e-4)."""
    b = np.array(stats.spending_bounds(fractions, 0.05, kind))
    rng = np.random.default_rng(7)
    t = np.array(fractions)
    w = np.cumsum(rng.standard_normal((1_000_000, len(t))) * np.sqrt(np.diff(np.concatenate([[0], t]))), axis=1)
    crossed = (np.abs(w / np.sqrt(t)) >= b).any(axis=1).mean()
    assert crossed == pytest.approx(0.05, abs=1e-3)
    naive = (np.abs(w / np.sqrt(t)) >= 1.96).any(axis=1).mean()
    assert naive > 0.08  # testing every look at 1.96 is not a 5% rule


def test_sequential_holm_recycles_alpha():
    """Two contrasts at one look (a fixed design): Holm's rule. z = 2.1 alone (p 0.036) is not
    rejected at 0.025, but once the other (z = 5) is rejected it is tested at 0.05 and is."""
    d = stats.sequential_holm([[5.0], [2.1]], [1.0], 0.05)
    assert [x.rejected for x in d] == [True, True] and d[1].alpha == pytest.approx(0.05)
    assert d[0].alpha == pytest.approx(0.025)
    d = stats.sequential_holm([[1.0], [2.1]], [1.0], 0.05)
    assert [x.rejected for x in d] == [False, False] and d[1].alpha == pytest.approx(0.025)
    d = stats.sequential_holm([[4.0, math.nan], [0.3, 2.2]], [0.5, 1.0], 0.05)  # one decided at look 1
    assert (d[0].rejected, d[0].look, d[0].sign) == (True, 0, 1)
    assert d[1].rejected and d[1].look == 1 and d[1].alpha == pytest.approx(0.05)


def test_permutation_test_is_exact_and_never_drops_a_relabelling():
    x = np.array([1.0, 2.0, 10.0, 11.0])
    res = stats.permutation_test(lambda lab: x[lab == 1].mean() - x[lab == 0].mean(), np.array([0, 0, 1, 1]))
    assert res.exact and res.n_perm == 6 and res.p == pytest.approx(1 / 6)
    res = stats.permutation_test(
        lambda lab: x[lab == 1].mean() - x[lab == 0].mean(), np.array([0, 0, 1, 1]), alternative="two-sided"
    )
    assert res.p == pytest.approx(2 / 6)
    # within strata (a, b): 2 x 2 relabellings
    assert stats.n_arrangements([0, 1, 0, 1], ["a", "a", "b", "b"]) == 4
    # a statistic undefined for some relabellings: they count as not extreme, the total stays 6
    res = stats.permutation_test(lambda lab: math.nan if lab[0] == 1 else float(lab[3]), np.array([0, 0, 1, 1]))
    assert res.n_perm == 6 and res.p == pytest.approx(2 / 6)  # 3 undefined, 2 of the rest with lab[3] = 1


def test_spearman_exact_p_matches_the_exact_distribution():
    # n = 5, rho = 0.8: 8 of the 120 orders have |rho| >= 0.8 (two-sided exact p = 0.133)
    res = stats.spearman_exact_p([1, 2, 3, 4, 5], [2, 1, 4, 3, 5])
    assert res.exact and res.estimate == pytest.approx(0.8) and res.p == pytest.approx(16 / 120)
    rng = np.random.default_rng(2)
    x, y = rng.normal(size=30), rng.normal(size=30)
    assert stats.spearman_exact_p(x, y).p == pytest.approx(ss.spearmanr(x, y).pvalue, abs=0.03)


def test_paired_tost_within_for_identical_and_not_for_very_different():
    """Moved from bench/study2_cheap.py's ``tost`` (issue 39 item 5): the paired z TOST."""
    rng = np.random.default_rng(0)
    delta = math.log(1.01)
    a = 3.0 + rng.normal(0, 0.3, 150)
    assert stats.paired_tost(a, a, delta).p == 0.0  # identical: within at any level
    near = a + 0.001 + rng.normal(0, 0.002, 150)
    assert stats.paired_tost(near, a, delta).p < 1e-6  # 0.1% apart, precisely: within
    far = a + 0.05 + rng.normal(0, 0.002, 150)
    assert stats.paired_tost(far, a, delta).p > 0.99 and stats.paired_tost(a, far, delta).p > 0.99  # either sign
    noisy = a + rng.normal(0, 0.2, 150)
    assert stats.paired_tost(noisy, a, delta).p > 0.05 and not stats.paired_tost(noisy, a, delta).within()


def test_tost_tails_match_scipy_and_refuse_a_margin_of_zero():
    z = stats.tost(0.3, 0.2, 0.5)
    assert z.p_low == pytest.approx(ss.norm.sf(0.8 / 0.2)) and z.p_high == pytest.approx(ss.norm.sf(0.2 / 0.2))
    t = stats.tost(0.3, 0.2, 0.5, df=7)
    assert t.p_low == pytest.approx(ss.t.sf(4.0, 7)) and t.p == pytest.approx(ss.t.sf(1.0, 7)) and t.df == 7
    assert stats.tost(0.1, 0.0, 0.5).p == 0.0 and stats.tost(0.6, 0.0, 0.5).p == 1.0
    with pytest.raises(ValueError, match="margin must be positive"):
        stats.tost(0.1, 0.1, 0.0)
