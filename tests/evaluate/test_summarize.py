"""evaluate.summarize: the mean accuracy's interval is at the run's one level (stats.LEVEL)."""

from __future__ import annotations

import pytest

from ghostsearch import stats
from ghostsearch.evaluate import binomial_stderr, summarize


def test_mean_accuracy_interval_is_at_the_one_level():
    out = summarize({"piqa_acc": 0.6, "piqa_n": 100, "arc_easy_acc": 0.55, "arc_easy_n": 80}, ["piqa", "arc_easy"])
    se = (binomial_stderr(0.6, 100) ** 2 + binomial_stderr(0.55, 80) ** 2) ** 0.5 / 2
    assert out["mean_acc"] == pytest.approx(0.575) and out["mean_acc_stderr"] == pytest.approx(se)
    lo, hi = out["mean_acc_lo"], out["mean_acc_hi"]
    assert lo < out["mean_acc"] < hi and out["mean_acc"] - lo == pytest.approx(hi - out["mean_acc"])
    coverage = stats.norm_cdf((hi - out["mean_acc"]) / se) - stats.norm_cdf((lo - out["mean_acc"]) / se)
    assert coverage == pytest.approx(stats.LEVEL, abs=1e-9)  # a literal 1.96 gives 0.950004
