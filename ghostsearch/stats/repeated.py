"""Group-sequential reading of a study's contrasts (bench/study2.py's, moved here: issue 50): the
repeated p-value of a contrast over its looks and the power of its last look; what a design's looks cost
against one look of the same power (its inflation factor)."""

from __future__ import annotations

import math

import numpy as np

from ghostsearch.stats import inference as stats


def repeated_p(z_by_look, fractions, kind: str = "obrien-fleming") -> float:
    """The repeated p-value of a group-sequential test (Jennison & Turnbull 9.1): the smallest alpha at
    which the contrast's |z| crossed that alpha's spending boundary at some look run (a look's boundary
    falls as alpha grows; bisection on log alpha)."""
    best = 1.0
    for k, z in enumerate(z_by_look):
        if not math.isfinite(z):
            continue
        lo, hi = math.log(1e-12), 0.0  # log alpha
        if stats.spending_bounds(fractions, math.exp(hi) * (1 - 1e-9), kind, n_grid=200)[k] > abs(z):
            continue
        for _ in range(40):
            mid = 0.5 * (lo + hi)
            if stats.spending_bounds(fractions, math.exp(mid), kind, n_grid=200)[k] <= abs(z):
                hi = mid
            else:
                lo = mid
        best = min(best, math.exp(hi))
    return best


def power_at(delta: float, se: float, bound: float) -> float:
    """Power of the last look's test to find a true difference ``delta``: Phi(delta / se - bound)
    (the far tail and the earlier looks left out: a close approximation at O'Brien-Fleming's bounds)."""
    return float(stats.norm_cdf(delta / se - bound))


def inflation_factor(looks, alpha: float, spending: str, power: float = 0.8, paths: int = 200_000) -> float:
    """(theta_seq / theta_fix)^2: the drift the one-sided group-sequential test at ``looks`` (item counts; their
    fractions of the last) and ``spending`` needs for ``power``, over the one-look test's (z_{1-alpha} +
    z_power). A fixed design of the same power needs n_max / inflation_factor items. By simulation of the looks'
    joint normal (``paths`` paths, seeded) and bisection on the drift."""
    fr = np.array(looks, dtype=float) / looks[-1]
    c = np.array(stats.spending_bounds(list(fr), alpha, spending, sides=1))
    rng = np.random.default_rng(0)
    w = (rng.normal(size=(paths, len(fr))) * np.sqrt(np.diff(np.concatenate([[0.0], fr])))).cumsum(1)
    lo, hi = 0.0, 10.0
    for _ in range(50):
        mid = (lo + hi) / 2
        z = (w + mid * fr) / np.sqrt(fr)
        lo, hi = (mid, hi) if (z >= c).any(1).mean() < power else (lo, mid)
    fixed = stats.norm_ppf(1 - alpha) + stats.norm_ppf(power)
    return ((lo + hi) / 2 / fixed) ** 2
