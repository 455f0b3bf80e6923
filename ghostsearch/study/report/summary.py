"""The report's numbers and sentences: Spearman per condition, accuracy spreads, best value at a
budget, and the summary, which only restates verdicts computed by :mod:`ghostsearch.study.claims`
(one family per run, Holm at 0.05) and never ranks models by hand."""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass

import numpy as np

from ghostsearch.core.comparison_row import ComparisonRow
from ghostsearch.core.records import Record
from ghostsearch.rundir.curves import best_so_far  # the one best-so-far rule (rundir/curves.py)
from ghostsearch.stats import inference as stats
from ghostsearch.stats.bootstrap import ItemMatrix
from ghostsearch.stats.inference import spearman, spearman_ci
from ghostsearch.study.claims.base import MIN_MODELS, SMALL_GAP, ClaimRow, distinct, finalists

VAR_DIFF_PILOT = 0.163  # variance of a paired per-item accuracy difference in the pilot (issue 23)


@dataclass(frozen=True)
class Correlation(Record):
    """Spearman's rho between calibration value and accuracy in one condition (objective, k,
    recovery) over ``n`` distinct models, its bootstrap interval, the exact permutation p (NaN under
    claims.MIN_MODELS models) and the rows ``dropped`` for a missing accuracy (summary.json's
    ``correlations``)."""

    objective: str | None
    k: int
    recovery: str
    n: int
    rho: float
    rho_lo: float
    rho_hi: float
    p: float
    dropped: int


@dataclass(frozen=True)
class Spread(Record):
    """summary.json's ``spread``: per objective the mean (over k) range of accuracy across its
    distinct models; the mean range between the objectives' mean accuracies (NaN with one
    objective); each objective's mean accuracy."""

    within: dict[str | None, float]
    between: float
    mean_by_objective: dict[str | None, float]


@dataclass(frozen=True)
class PairedAccuracy(Record):
    """One distinct evaluated model's mean accuracy (``acc``, bootstrap interval) and its difference
    from the dense model (``delta``, paired bootstrap interval): summary.json's ``paired_accuracy``."""

    cell: str
    searcher: str
    objective: str | None
    k: int
    recovery: str
    removed: list[int]
    acc: float
    acc_lo: float
    acc_hi: float
    delta: float
    delta_lo: float
    delta_hi: float


@dataclass(frozen=True)
class BudgetRow:
    """A cell's best value within each budget B = fraction x greedy's cost at its k (``best_at``:
    fraction -> value, None where nothing was found by then)."""

    cell: str
    searcher: str
    objective: str | None
    k: int
    budget_used: float | None
    best_at: dict[float, float | None]


def correlations(rows: list[ComparisonRow], acc_key: str = "mean_acc", seed: int = 0) -> list[Correlation]:
    """Spearman between calibration value and downstream accuracy, per objective, k and recovery,
    over the distinct evaluated models (:func:`claims.distinct`: a set found by several searchers or
    seeds counts once), with a seeded bootstrap 95% interval (descriptive) and the exact permutation
    p (stats.spearman_exact_p). Lower calibration value is better, so a NEGATIVE rho means the
    calibration ranking agrees with accuracy. Rows with a NaN accuracy are counted in ``dropped``."""
    groups: defaultdict[tuple, list[ComparisonRow]] = defaultdict(list)
    dropped: defaultdict[tuple, int] = defaultdict(int)
    for r in finalists(rows):
        key = (r.objective, r.k, r.rec)
        if r.has(acc_key):
            groups[key].append(r)
        else:
            dropped[key] += 1
    out = []
    for key, g in sorted(groups.items()):
        g = distinct(g)
        x, y = [r.calib_value for r in g], [r.metric(acc_key) for r in g]
        lo, hi = spearman_ci(x, y, seed)
        p = stats.spearman_exact_p(x, y).p if len(g) >= MIN_MODELS else math.nan
        obj, k, rec = key
        out.append(Correlation(obj, k, rec, len(g), spearman(x, y), lo, hi, p, dropped[key]))
    return out


def spread(rows: list[ComparisonRow], acc_key: str = "mean_acc") -> Spread:
    """Range of downstream accuracy across the distinct models within each objective (per k,
    averaged), and the range between the objectives' mean accuracies (per k, averaged). In-sample and
    descriptive: the maximum of noisy accuracies is biased upward; claims.search_spread is the
    cross-fitted, tested version."""
    by = defaultdict(list)
    for r in distinct(finalists(rows)):
        acc = r.metric(acc_key)
        if acc is not None and not math.isnan(acc):
            by[(r.objective, r.k)].append(acc)
    within = defaultdict(list)
    means: defaultdict[int, dict] = defaultdict(dict)
    for (obj, k), v in by.items():
        within[obj].append(max(v) - min(v))
        means[k][obj] = float(np.mean(v))
    between = [max(m.values()) - min(m.values()) for m in means.values() if len(m) > 1]
    return Spread(
        within={o: float(np.mean(v)) for o, v in within.items()},
        between=float(np.mean(between)) if between else math.nan,
        mean_by_objective={
            o: float(np.mean([means[k][o] for k in means if o in means[k]]))
            for o in sorted({o for m in means.values() for o in m}, key=str)  # the same order in every process
        },
    )


def paired_accuracy(
    matrix: ItemMatrix | None, rows: list[ComparisonRow], n_boot: int = 2000, seed: int = 0
) -> list[PairedAccuracy]:
    """Per distinct evaluated model with items: its mean accuracy minus the dense model's, with the
    paired bootstrap 95% interval (items resampled within tasks, the same resample for both), and
    its own accuracy with its bootstrap interval. Empty without items or a dense row."""
    dense = next((r for r in rows if r.is_dense), None)
    if matrix is None or dense is None or dense.eval_key not in matrix:
        return []
    d = matrix.correct[matrix.keys.index(dense.eval_key)]
    out = []
    for r in distinct(finalists(rows)):
        if r.eval_key not in matrix:
            continue
        a = matrix.correct[matrix.keys.index(r.eval_key)]
        diff = stats.paired_diff_ci(a, d, matrix.task_of, n_boot=n_boot, seed=seed)
        acc = stats.mean_ci(a, matrix.task_of, n_boot=n_boot, seed=seed)
        out.append(
            PairedAccuracy(
                cell=r.cell,
                searcher=r.searcher,
                objective=r.objective,
                k=r.k,
                recovery=r.rec,
                removed=list(r.removed),
                acc=acc.estimate,
                acc_lo=acc.lo,
                acc_hi=acc.hi,
                delta=diff.estimate,
                delta_lo=diff.lo,
                delta_hi=diff.hi,
            )
        )
    return out


def size_note(matrix: ItemMatrix | None, n_rows: int, alpha: float = stats.ALPHA) -> str:
    """What this run's size can decide: the paired minimum detectable difference (80% power) at
    Holm's first level over ``n_rows`` tested rows, from the item variance of paired differences
    (the median over pairs of this run's models; the pilot's 0.163 without items), and the items
    per model that would detect SMALL_GAP."""
    var, src = VAR_DIFF_PILOT, "the pilot's"
    if matrix is not None and len(matrix.keys) >= 2:
        c = matrix.correct
        vs = [stats.item_variance(c[i] - c[j], matrix.task_of) for i in range(len(c)) for j in range(i + 1, len(c))]
        vs = [v for v in vs if v > 0]
        if vs:
            var, src = float(np.median(vs)), "this run's median"
    n = matrix.n_items if matrix is not None else 0
    a = alpha / max(n_rows, 1)
    need = stats.items_needed(var, SMALL_GAP, alpha=a)
    tail = (
        f"about {need:,} items per model would detect {SMALL_GAP:g} (80% power, level {a:.4g} = 0.05 / "
        f"{max(n_rows, 1)} rows, {src} paired item variance {var:.3f})."
    )
    if not n:
        return "Without per-item data this run's size cannot be judged; " + tail
    return (
        f"At {n} items per model the paired minimum detectable difference is {stats.mdd(var, n, alpha=a):.3f} "
        f"in mean accuracy; " + tail
    )


def summary(
    rows: list[ComparisonRow], verdicts: list[ClaimRow] | None = None, matrix: ItemMatrix | None = None
) -> list[str]:
    """Plain sentences that restate computed verdicts (``verdicts``: rows after claims.family) and
    nothing else: how many distinct models and items, each decided row, how many are within noise
    and what size would decide them. Fewer than 3 distinct evaluated models: no verdict, and the
    size that would decide."""
    fin = finalists(rows)
    if not fin:
        return ["No finished cells."]
    models = distinct(fin)
    verdicts = verdicts or []
    tested = [v for v in verdicts if v.p_adj is not None]
    n_items = f" on {matrix.n_items} items per model ({len(matrix.tasks)} tasks)" if matrix is not None else ""
    lines = [
        f"{len(models)} distinct evaluated models (removed set x repair) from {len({r.cell for r in fin})} "
        f"cells{n_items}; {len(tested)} rows tested as one family (Holm, family-wise error 0.05)."
    ]
    if len(models) < MIN_MODELS:
        lines.append(
            f"No verdict: {len(models)} distinct evaluated models, and a comparison needs at least "
            f"{MIN_MODELS}; {MIN_MODELS} or more distinct removed sets (or repairs) would decide. "
            + size_note(matrix, max(len(tested), 1))
        )
        return lines
    decided = [v for v in verdicts if v.verdict in ("holds", "does not hold")]
    for v in decided:
        adj = f"adjusted p {v.p_adj:.3g}" if v.p_adj is not None else v.note or ""
        lines.append(f"{v.claim} ({v.condition}): {v.verdict}; estimate {v.ours:+.3f}, {adj}.")
    for v in verdicts:
        if v.verdict == "within margin":
            lines.append(
                f"{v.claim} ({v.condition}): no difference that matters; estimate {v.ours:+.3f}, {v.note or ''}."
            )
    noise = [v for v in verdicts if v.verdict == "within noise"]
    if noise:
        lines.append(
            f"{len(noise)} of {len(tested)} tested rows are within noise: this run cannot tell. "
            + size_note(matrix, len(tested))
        )
    if not decided and not noise:
        lines.append("No row could be tested. " + size_note(matrix, 1))
    other: defaultdict[str, int] = defaultdict(int)
    for v in verdicts:
        if v.verdict not in ("holds", "does not hold", "within noise", "within margin"):
            other[v.verdict] += 1
    if other:
        lines.append(
            "Rows without a test: "
            + ", ".join(f"{n} {k}" for k, n in sorted(other.items()))
            + "."
            + (
                f" A 'no verdict' row needs {MIN_MODELS} or more distinct evaluated models in its condition "
                "(more searchers, seeds or repairs that give different models)."
                if "no verdict" in other
                else ""
            )
        )
    return lines


def best_at_budget(
    run_dir, rows: list[ComparisonRow], greedy_costs: dict[int, float], fractions=(0.25, 0.5, 1.0)
) -> list[BudgetRow]:
    """Per cell: the best value of a k-set found within B = fraction x greedy's cost at its k, from
    the ledger's histories (None: nothing found yet at that budget)."""
    curves = best_so_far(run_dir)
    out, seen = [], set()
    for r in finalists(rows):
        if r.cell in seen or r.cell not in curves:
            continue
        seen.add(r.cell)
        c, g = curves[r.cell], greedy_costs[r.k]
        best_at = {}
        for f in fractions:
            vals = [v for e, v in zip(c.evaluations, c.best) if e <= f * g + 1e-9]
            best_at[f] = vals[-1] if vals else None
        out.append(BudgetRow(r.cell, r.searcher, r.objective, r.k, r.budget_used, best_at))
    return out
