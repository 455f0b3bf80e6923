"""Paired intervals over perplexity windows (issues 37, 47): a model's per-window mean NLL against
another's on the same windows, as clusters of windows (single windows, study 2's batch-position
sums, or blocks of adjacent windows, whose paired differences correlate). Moved from
bench/study2.py (issue 50)."""

from __future__ import annotations

import math


def ppl_ratio(a, b, n_boot: int = 2000, seed: int = 0) -> tuple[float, float, float]:
    """ppl_a / ppl_b over the same windows (``a``, ``b``: per-window mean NLL): exp of the mean paired
    difference and of its percentile-bootstrap interval over windows (``inference.paired_diff_ci``, level
    ``stats.LEVEL``), as (ratio, lo, hi)."""
    import numpy as np

    from ghostsearch.stats.inference import paired_diff_ci

    ci = paired_diff_ci(np.asarray(a, float), np.asarray(b, float), n_boot=n_boot, seed=seed)
    return math.exp(ci.estimate), math.exp(ci.lo), math.exp(ci.hi)


def window_clusters(values) -> tuple[list[float], list[int]]:
    """A committed per-window NLL list as (cluster sums, windows per cluster). Written before the fix of
    ``evaluation_native.window_items`` (issue 37), such a list holds B batch-position sums (slot j: the sum
    of the mean NLLs of windows j, j + B, j + 2B, ...) followed by zeros; a list without zeros holds each
    window's own value (B clusters of one). A real window's mean NLL is never exactly 0."""
    v = [float(x) for x in values]
    b = next((i for i, x in enumerate(v) if x == 0.0), len(v))
    if any(x != 0.0 for x in v[b:]):
        raise ValueError("a per-window list with zeros between non-zero values is neither kind")
    return v[:b], [len(range(j, len(v), b)) for j in range(b)]


def cluster_diff(a_sums, b_sums, sizes, level: float = 0.95) -> dict:
    """Left - right in mean NLL per window (log-perplexity; every window has the same tokens), paired
    over the same clusters of windows: the ratio estimate sum(D_j) / sum(n_j) and its linearised
    standard error sqrt(C / (C - 1) * sum((D_j - est n_j)^2)) / sum(n_j), D_j = a_j - b_j, with a
    Student t interval on C - 1 degrees of freedom. With clusters of one window each this is the
    paired t interval over windows; with study 2's 16 batch-position sums it is a cluster interval
    over 16 systematic samples of the windows (tests/report/test_study2_ppl.py: its coverage)."""
    import numpy as np
    from scipy import stats as sps

    a, b, n = np.asarray(a_sums, float), np.asarray(b_sums, float), np.asarray(sizes, float)
    if not len(a) == len(b) == len(n) or len(n) < 2:
        raise ValueError("paired clusters of the same windows, two at least")
    d = a - b
    est = float(d.sum() / n.sum())
    c = len(n)
    se = float(math.sqrt(c / (c - 1) * ((d - est * n) ** 2).sum()) / n.sum())
    q = float(sps.t.ppf(1 - (1 - level) / 2, c - 1))
    return {
        "estimate": est,
        "se": se,
        "df": c - 1,
        "lo": est - q * se,
        "hi": est + q * se,
        "clusters": c,
        "windows": int(n.sum()),
    }


BLOCK = 8  # adjacent windows per block: paired differences of neighbouring windows correlate (lag-1 r ~ 0.5)


def adjacent_blocks(values, size: int = BLOCK) -> tuple[list[float], list[int]]:
    """Per-window values as (sums over blocks of ``size`` adjacent windows, windows per block); the
    last block takes the remainder. Clusters for :func:`cluster_diff` that keep neighbouring windows'
    correlation inside a cluster (issue 47)."""
    v = [float(x) for x in values]
    starts = range(0, len(v), size)
    return [sum(v[i : i + size]) for i in starts], [len(v[i : i + size]) for i in starts]


def lag1(values) -> float:
    """The lag-1 autocorrelation of a series (e.g. the paired per-window differences)."""
    import numpy as np

    x = np.asarray(values, float) - float(np.mean(values))
    return float((x[1:] * x[:-1]).sum() / (x * x).sum())
