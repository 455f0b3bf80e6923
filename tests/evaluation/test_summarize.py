"""evaluate.summarize: the mean accuracy's interval is at the run's one level (stats.LEVEL)."""

from __future__ import annotations

import pytest

from ghostsearch.core.eval_numbers import FinalistNumbers, TaskNumbers
from ghostsearch.evaluation.evaluate import binomial_stderr, summarize
from ghostsearch.stats import inference as stats


def test_mean_accuracy_interval_is_at_the_one_level():
    accs = FinalistNumbers(tasks={"piqa": TaskNumbers(n=100, acc=0.6), "arc_easy": TaskNumbers(n=80, acc=0.55)})
    numbers = summarize(accs, ["piqa", "arc_easy"])
    assert numbers.tasks["piqa"].acc_stderr == binomial_stderr(0.6, 100)
    out = numbers.to_dict()
    se = (binomial_stderr(0.6, 100) ** 2 + binomial_stderr(0.55, 80) ** 2) ** 0.5 / 2
    assert out["mean_acc"] == pytest.approx(0.575) and out["mean_acc_stderr"] == pytest.approx(se)
    lo, hi = out["mean_acc_lo"], out["mean_acc_hi"]
    assert lo < out["mean_acc"] < hi and out["mean_acc"] - lo == pytest.approx(hi - out["mean_acc"])
    coverage = stats.norm_cdf((hi - out["mean_acc"]) / se) - stats.norm_cdf((lo - out["mean_acc"]) / se)
    assert coverage == pytest.approx(stats.LEVEL, abs=1e-9)  # a literal 1.96 gives 0.950004
