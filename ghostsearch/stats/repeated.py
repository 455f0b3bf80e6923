"""Group-sequential reading of a study's contrasts (bench/study2.py's, moved here: issue 50): the
repeated p-value of a contrast over its looks and the power of its last look."""

from __future__ import annotations

import math

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
