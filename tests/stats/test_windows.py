"""stats.windows and stats.repeated (moved from bench/study2.py, issue 50): intervals over clusters
and blocks of windows, the repeated p-value and the last look's power, against values written out
here."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats as sps

from ghostsearch.stats import inference
from ghostsearch.stats.repeated import inflation_factor, power_at, repeated_p
from ghostsearch.stats.windows import adjacent_blocks, cluster_diff, lag1, ppl_ratio, window_clusters


def test_clusters_of_one_window_give_the_paired_t_interval():
    rng = np.random.default_rng(1)
    a, b = rng.normal(3, 1, 40), rng.normal(3.2, 1, 40)
    d = a - b
    q = sps.t.ppf(0.975, 39)
    se = d.std(ddof=1) / math.sqrt(40)
    r = cluster_diff(a, b, [1] * 40)
    assert (r["estimate"], r["se"], r["df"]) == (pytest.approx(d.mean()), pytest.approx(se), 39)
    assert (r["lo"], r["hi"]) == (pytest.approx(d.mean() - q * se), pytest.approx(d.mean() + q * se))


def test_adjacent_blocks_and_lag1():
    sums, sizes = adjacent_blocks(range(10), size=4)
    assert (sums, sizes) == ([6.0, 22.0, 17.0], [4, 4, 2])
    assert lag1([1, -1] * 10) == pytest.approx(-0.95)
    assert window_clusters([1.0, 2.0, 0.0, 0.0, 0.0]) == ([1.0, 2.0], [3, 2])


def test_repeated_p_is_the_level_whose_bound_the_z_meets():
    fr = [0.25, 0.5, 1.0]
    bound = inference.spending_bounds(fr, 0.01, "obrien-fleming", n_grid=200)[2]
    assert repeated_p([0.0, 0.0, bound], fr) == pytest.approx(0.01, rel=1e-3)
    assert repeated_p([0.1, 0.2, 0.3], fr) > 0.5
    assert power_at(0.03, 0.01, 2.58) == pytest.approx(inference.norm_cdf(3 - 2.58))


def test_ppl_ratio_over_windows():
    """ppl_a / ppl_b from per-window mean NLLs: a constant shift d is exactly e^d with no width; otherwise the
    ratio of the geometric means inside its interval, and swapping the models inverts all three."""
    b = np.random.default_rng(0).normal(3.0, 0.2, 50)
    assert ppl_ratio(b + 0.1, b, n_boot=200) == pytest.approx((math.exp(0.1),) * 3)
    a = b + np.random.default_rng(1).normal(0.05, 0.1, 50)
    r, lo, hi = ppl_ratio(a, b, n_boot=500, seed=3)
    assert r == pytest.approx(math.exp(a.mean() - b.mean())) and lo < r < hi and lo > 1
    assert ppl_ratio(b, a, n_boot=500, seed=3) == pytest.approx((1 / r, 1 / hi, 1 / lo))


def test_inflation_factor_of_pocock_and_of_one_look():
    """bench/target.py's "fixed design of the same power" (moved, issue 50): Pocock's three equal looks
    (one-sided 0.025, power 0.8) need 1.166 x the one-look test's items (Jennison & Turnbull, Table 2.2's
    R_P(3) at two-sided 0.05), a single look 1 (20k paths: both within 1%)."""
    assert inflation_factor([1, 2, 3], 0.025, "pocock", paths=20_000) == pytest.approx(1.166, rel=0.01)
    assert inflation_factor([5], 0.025, "obrien-fleming", paths=20_000) == pytest.approx(1.0, rel=0.01)
