"""The report's statistics against scipy, and its summary on fixed inputs: it restates computed
verdicts, never ranks by hand, and makes no verdict on fewer than 3 distinct models."""

import math

import numpy as np
import pytest
from scipy import stats

from ghostsearch.core.comparison_row import ComparisonRow
from ghostsearch.core.eval_numbers import FinalistNumbers
from ghostsearch.evaluation.evaluate import binomial_stderr
from ghostsearch.rundir.cell import CellResult
from ghostsearch.stats.inference import rank, spearman, spearman_ci
from ghostsearch.study.claims.base import ClaimRow, Hypothesis, family
from ghostsearch.study.report import comparison_table, correlations, spread, summary


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


def cr(dicts):
    """Comparison rows of hand-written dicts (searcher greedy where a dict names none)."""
    return [ComparisonRow.from_dict({"searcher": "greedy", **d}) for d in dicts]


ROWS = [  # perplexity ranks opposite to accuracy; margin agrees
    {"cell": "a", "objective": "perplexity", "k": 4, "calib_value": 30.0, "mean_acc": 0.40, "removed": [1]},
    {"cell": "b", "objective": "perplexity", "k": 4, "calib_value": 32.0, "mean_acc": 0.42, "removed": [2]},
    {"cell": "c", "objective": "perplexity", "k": 4, "calib_value": 35.0, "mean_acc": 0.44, "removed": [3]},
    {"cell": "d", "objective": "margin", "k": 4, "calib_value": -0.5, "mean_acc": 0.50, "removed": [4]},
    {"cell": "e", "objective": "margin", "k": 4, "calib_value": -0.3, "mean_acc": 0.49, "removed": [5]},
    {"cell": "f", "objective": "margin", "k": 4, "calib_value": -0.1, "mean_acc": 0.47, "removed": [6]},
]


def test_correlations_and_spread_on_fixed_inputs():
    c = {x.objective: x.rho for x in correlations(cr(ROWS))}
    p = {x.objective: x.p for x in correlations(cr(ROWS))}
    assert p["perplexity"] == pytest.approx(2 / 6)  # n=3: the two perfect orders of 3! are as extreme
    assert c["perplexity"] == pytest.approx(stats.spearmanr([30, 32, 35], [0.40, 0.42, 0.44]).statistic)
    assert c["perplexity"] == pytest.approx(1.0) and c["margin"] == pytest.approx(-1.0)
    sp = spread(cr(ROWS))
    assert sp.within["perplexity"] == pytest.approx(0.04)
    assert sp.within["margin"] == pytest.approx(0.03)
    assert sp.between == pytest.approx(np.mean([0.5, 0.49, 0.47]) - 0.42)


def test_summary_makes_no_verdict_on_two_distinct_models_and_says_what_would_decide():
    """compare-quick's shape: fastblock and lorp under two objectives, each finding one set: two
    distinct models however many cells; rho over 2 cells is not a verdict."""
    rows = [
        {"cell": f"{s}-{o}", "searcher": s, "objective": o, "k": 4, "calib_value": v, "mean_acc": a, "removed": rm}
        for o in ("perplexity", "margin")
        for s, v, a, rm in (("fastblock", 1.0, 0.40, [1, 2]), ("lorp", 2.0, 0.45, [5, 6]))
    ]
    text = "\n".join(summary(cr(rows), []))
    assert "2 distinct evaluated models" in text and "No verdict" in text
    assert "items per model would detect 0.03" in text
    assert "Spearman" not in text and "agrees with" not in text and "highest" not in text


def test_summary_restates_only_the_decided_rows():
    verdicts = family(
        [
            ClaimRow(
                claim="A beats B",
                condition="a - b",
                paper="",
                ours=0.08,
                lo=0.05,
                hi=0.11,
                rule="",
                verdict="",
                p=1e-6,
                tested=Hypothesis(0.0, ">", se=0.015),
            ),
            ClaimRow(
                claim="C beats D",
                condition="c - d",
                paper="",
                ours=0.01,
                lo=-0.02,
                hi=0.04,
                rule="",
                verdict="",
                p=0.4,
                tested=Hypothesis(0.0, ">", se=0.015),
            ),
        ]
    )
    text = "\n".join(summary(cr(ROWS), verdicts))
    assert "A beats B (a - b): holds; estimate +0.080, adjusted p 2e-06." in text
    assert "C beats D" not in text and "1 of 2 tested rows are within noise" in text
    assert "6 distinct evaluated models" in text


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
    ref = stats.bootstrap(
        (x, y),
        lambda a, b: stats.spearmanr(a, b).statistic,
        paired=True,
        vectorized=False,
        n_resamples=2000,
        method="percentile",
        random_state=0,
    ).confidence_interval
    assert lo == pytest.approx(ref.low, abs=0.1) and hi == pytest.approx(ref.high, abs=0.1)


class _Cfg:
    class compare:  # noqa: N801
        recovery = ["none", "ghosted"]


def test_table_has_the_dense_row_first_and_a_row_per_recovery():
    results = [
        CellResult(
            cell="greedy-perplexity-k2-s0",
            searcher="greedy",
            objective="perplexity",
            k=2,
            seed=0,
            removed=(3, 4),
            value=40.0,
            dense_value=30.0,
            relative_change=1 / 3,
            evaluations=5,
            budget_used=5.0,
            wall_seconds=1.0,
            cache_hits=0,
        )
    ]

    def numbers(acc, ppl):
        return FinalistNumbers(mean_acc=acc, perplexity={"wikitext2": ppl})

    evals = {
        ("greedy-perplexity-k2-s0", "none"): numbers(0.40, 60.0),
        ("greedy-perplexity-k2-s0", "ghosted"): numbers(0.44, 45.0),
    }
    t = comparison_table(_Cfg, results, evals, dense=numbers(0.50, 30.0)).to_pylist()
    assert [(r["cell"], r["recovery"]) for r in t] == [
        ("dense", "none"),
        ("greedy-perplexity-k2-s0", "none"),
        ("greedy-perplexity-k2-s0", "ghosted"),
    ]
    assert t[1]["delta_mean_acc"] == pytest.approx(-0.10) and t[2]["delta_ppl_wikitext2"] == pytest.approx(15.0)
    assert "2 distinct evaluated models (removed set x repair) from 1 cells" in "\n".join(summary(cr(t)))  # not dense


def test_correlations_count_a_seed_that_found_the_same_set_once():
    twice = ROWS + [dict(r, cell=r["cell"] + "-s1", seed=1) for r in ROWS]
    got = {x.objective: (x.n, x.rho, x.rho_lo, x.rho_hi) for x in correlations(cr(twice))}
    assert got == {x.objective: (3, x.rho, x.rho_lo, x.rho_hi) for x in correlations(cr(ROWS))}


def test_correlations_count_the_same_set_found_by_two_searchers_once():
    """The unit is a distinct evaluated model: a set that greedy and fastblock both found is one model."""
    dup = ROWS + [dict(ROWS[0], cell="a2", searcher="fastblock")]
    got = {x.objective: x.n for x in correlations(cr(dup))}
    assert got == {"perplexity": 3, "margin": 3}


def test_correlations_count_rows_without_accuracy():
    rows = ROWS + [dict(ROWS[0], cell="z", removed=[9], mean_acc=math.nan)]
    got = {x.objective: x.dropped for x in correlations(cr(rows))}
    assert got == {"perplexity": 1, "margin": 0}


def test_spread_is_the_same_in_every_process():
    """summary.json's spread on the committed study: the same bytes under two string-hash seeds (its
    per-objective means once came out in set order, which follows PYTHONHASHSEED)."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    code = (
        "import json, pyarrow.parquet as pq; from ghostsearch.core.comparison_row import from_arrow; "
        "from ghostsearch.study.report.summary import spread; "
        "print(json.dumps(spread(from_arrow(pq.read_table('docs/results/study-cpu/comparison.parquet'))).to_dict()))"
    )
    outs = [
        subprocess.run(
            [sys.executable, "-c", code],
            cwd=root,
            capture_output=True,
            text=True,
            check=True,
            env={**os.environ, "PYTHONHASHSEED": seed},
        ).stdout
        for seed in ("1", "2", "3")
    ]
    assert '"perplexity"' in outs[0] and '"margin"' in outs[0] and outs[0] == outs[1] == outs[2]
