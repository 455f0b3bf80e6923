"""The study's verdicts, computed from a compare run (never written by hand).

Inputs: the rows of ``RUN_DIR/comparison.parquet`` (one per cell and recovery, plus the dense row)
and, for the accuracy claims, an :class:`ItemMatrix` built from ``RUN_DIR/eval_items.parquet``
(per-item correctness, joined to the rows by ``eval_key``). Every claim function returns rows
(:class:`ClaimRow`: claim, paper, condition, ours, lo, hi, rule, verdict, plus ``note``; ``p`` where
the row is tested; ``ClaimRow.to_dict`` is the row as written). The rows of one run are ONE family
(:func:`family`): Holm's step-down adjustment at family-wise level 0.05 over every tested row, each
row's interval shown at its Holm level, its verdict from its adjusted p. :func:`render` prints them
as one Markdown table (applying :func:`family` to rows not yet adjusted). The statistics come from
:mod:`ghostsearch.stats.inference`.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from functools import partial
from itertools import combinations

import numpy as np

from ghostsearch.core.comparison_row import ComparisonRow
from ghostsearch.core.eval_numbers import ItemRow
from ghostsearch.stats import inference as stats
from ghostsearch.stats.inference import percentile as _percentile
from ghostsearch.stats.inference import spearman, spearman_ci

ALPHA = stats.ALPHA  # family-wise error of a run's verdict rows (Holm)
LEVEL = stats.LEVEL
MIN_MODELS = 3  # no verdict on fewer distinct evaluated models
SMALL_GAP = 0.03  # "1-3 percentage points", "marginal gains"


def searcher_trait(name: str, trait: str, default=None):
    """A trait of a row's searcher, read from its class (search/base.py ``Searcher``: ``objective_blind``,
    ``cost_class``); ``default`` for a name no registry knows now (a plug-in of another process)."""
    from ghostsearch.core.errors import GhostsearchError
    from ghostsearch.search.base import get_searcher

    try:
        return getattr(get_searcher(name), trait)
    except GhostsearchError:
        return default


def blind_by_design(name: str) -> bool:
    """Its set is not chosen by searching the objective (``Searcher.objective_blind``); compare
    ``objective_blind``, which finds such searchers in a run's rows."""
    return bool(searcher_trait(name, "objective_blind", False))


def cost_class(name: str) -> str | None:
    """The searcher's group in the complex-vs-simple claim: "complex", "simple" or None (``Searcher.cost_class``)."""
    return searcher_trait(name, "cost_class")


NO_ITEMS = "no per-item data"
NO_SPLIT = "too few items to cross-fit (every task needs 2 or more shared items)"


def verdict(lo, hi, threshold: float, direction: str) -> str:
    """The interval rule, for rows that carry no p value (e.g. bench/ghosted_study.py's own rows):
    a claim "statistic > threshold" (direction ">") holds if lo > threshold, does not hold if
    hi < threshold, else it is within noise (mirrored for "<"). An interval touching the threshold
    is within noise; a missing interval is "not computed". Tested rows get their verdict from
    :func:`decide` through :func:`family` instead."""
    if direction not in (">", "<"):
        raise ValueError(f"direction must be '>' or '<', not {direction!r}")
    if lo is None or hi is None or math.isnan(lo) or math.isnan(hi):
        return "not computed"
    above, below = lo > threshold, hi < threshold
    if direction == "<":
        above, below = below, above
    return "holds" if above else "does not hold" if below else "within noise"


def decide(estimate: float | None, p_adj: float | None, threshold: float, direction: str, alpha: float = ALPHA) -> str:
    """The one decision rule of a tested row: "statistic = threshold" is rejected when its Holm-adjusted
    p is <= alpha; then the claim ("statistic > t" or "< t") holds if the estimate lies on the
    claimed side of t and does not hold if on the other; otherwise the row is within noise."""
    if direction not in (">", "<"):
        raise ValueError(f"direction must be '>' or '<', not {direction!r}")
    if p_adj is None or math.isnan(p_adj) or estimate is None or math.isnan(estimate):
        return "not computed"
    if p_adj > alpha:
        return "within noise"
    return "holds" if (estimate > threshold) == (direction == ">") else "does not hold"


RULE = (
    'Verdict rule (one family per run): every tested row is a two-sided test of "statistic = t"; Holm\'s '
    "step-down adjustment over all tested rows of the run keeps the family-wise error at 0.05; a row whose "
    "adjusted p is <= 0.05 holds (estimate on the claimed side of t) or does not hold (the other side), "
    "every other row is within noise. Each interval is shown at its row's Holm level (1 - 0.05/(m - i) for "
    "the i-th smallest p), so it excludes t exactly when the row is decided (up to bootstrap resolution). "
    "p values: accuracy differences of two models, the paired z test of the macro mean over tasks with the "
    "item variance within tasks; statistics that pick a best or worst model (searcher spread, objective vs "
    "search, complex vs simple) are cross-fitted (picked on one half of each task's items, measured on the "
    "other, both ways, averaged over 20 random splits) with a paired percentile-bootstrap p (items "
    'resampled within tasks, the same resample for every model); "objectives shape the removed set" is an '
    "exact permutation test of the objective labels within each searcher; Spearman rows an exact "
    "permutation test of the ranks. A row whose design cannot reach p <= 0.05 (too few relabellings or "
    "cells) is descriptive and not tested; no verdict on fewer than 3 distinct evaluated models (a removed "
    "set under one repair, whichever searchers and seeds found it). A row within noise states the minimum "
    "detectable difference at its level (80% power) and the items per model that would detect 0.03."
)


def _rule(direction: str, t: float) -> str:
    return f"H0: stat = {t:g}; claim stat {direction} {t:g}"


@dataclass(frozen=True)
class Hypothesis:
    """What :func:`family` needs to decide a tested row, never written: the threshold t and the
    direction of "statistic = t", the bootstrap statistics (its interval at the Holm level), the
    statistic's standard error and the items per model (the note of a row within noise)."""

    threshold: float
    direction: str
    boot: np.ndarray | None = None
    se: float | None = None
    n_items: int | None = None


@dataclass(frozen=True, kw_only=True)
class ClaimRow:
    """One verdict row: the claim, the paper's statement, the condition, our estimate and interval,
    the rule and the verdict; ``note``; a tested row's raw ``p`` and, once :func:`family` decided it,
    ``p_adj`` (Holm), ``level``, ``family`` (its size) and ``ci_level`` (the interval's level)."""

    claim: str
    paper: str
    condition: str
    ours: float | None
    lo: float | None
    hi: float | None
    rule: str
    verdict: str
    note: str | None = None
    p: float | None = None
    p_adj: float | None = None
    level: float | None = None
    family: int | None = None
    ci_level: float | None = None
    tested: Hypothesis | None = field(default=None, repr=False, compare=False)

    def to_dict(self) -> dict:
        """The row as written (summary.json's ``verdicts``): the eight columns, then those that are set."""
        out = {
            "claim": self.claim,
            "paper": self.paper,
            "condition": self.condition,
            "ours": self.ours,
            "lo": self.lo,
            "hi": self.hi,
            "rule": self.rule,
            "verdict": self.verdict,
        }
        for name in ("note", "p", "p_adj", "level", "family", "ci_level"):
            if getattr(self, name) is not None:
                out[name] = getattr(self, name)
        return out


def claim_row(
    claim: str,
    paper: str,
    condition: str,
    ours,
    lo,
    hi,
    threshold: float,
    direction: str,
    note: str | None = None,
    p: float | None = None,
    boot=None,
    se: float | None = None,
    n_items: int | None = None,
) -> ClaimRow:
    """One claim's row. Without ``p``: its verdict from :func:`verdict` on [lo, hi]. With ``p`` (the
    raw two-sided p of "statistic = threshold"): a tested row; :func:`family` adjusts it (Holm),
    recomputes [lo, hi] at its Holm level from ``boot`` (the bootstrap statistics) and decides it;
    ``se`` (the statistic's standard error) and ``n_items`` (items per model) size the note of a
    row within noise."""
    row = ClaimRow(
        claim=claim,
        paper=paper,
        condition=condition,
        ours=ours,
        lo=lo,
        hi=hi,
        rule=_rule(direction, threshold),
        verdict=verdict(lo, hi, threshold, direction),
        note=note or None,
    )
    if p is not None:
        row = replace(
            row,
            p=float(p),
            tested=Hypothesis(threshold, direction, boot, se, n_items),
            verdict="within noise" if not math.isnan(p) else "not computed",
        )
    return row


def boot_p(boot: np.ndarray, threshold: float) -> float:
    """Two-sided percentile-bootstrap p of "statistic = threshold": twice the smaller share of the
    resampled statistics on either side of it, (1 + count) / (1 + B) (never 0)."""
    boot = np.asarray(boot, dtype=float)
    if len(boot) == 0 or np.isnan(boot).any():
        return math.nan
    lo, hi = np.sum(boot <= threshold), np.sum(boot >= threshold)
    return float(min(1.0, 2 * (1 + min(lo, hi)) / (1 + len(boot))))


def family(rows: list[ClaimRow], alpha: float = ALPHA) -> list[ClaimRow]:
    """Every tested row of ``rows`` (those with a ``p``) decided as one family: ``p_adj`` (Holm),
    ``level`` (:func:`stats.holm_levels`), [lo, hi] recomputed at that level from the row's bootstrap,
    the verdict from :func:`decide`, and for a row within noise a note with the minimum detectable
    difference at its level and the items per model that would detect 0.03. Rows without p pass
    unchanged. Returns new rows."""
    out = list(rows)
    tested = [(i, r.p) for i, r in enumerate(out) if r.p is not None and not math.isnan(r.p)]
    if tested:
        idx, ps = [i for i, _ in tested], [p for _, p in tested]
        adj, levels = stats.holm(ps), stats.holm_levels(ps, alpha)
        for i, pa, lv in zip(idx, adj, levels):
            r, t = out[i], out[i].tested
            if t is None:
                raise ValueError(f"claim row {r.claim!r} ({r.condition}) has a p but no test (make it with claim_row)")
            lo, hi, ci_level = r.lo, r.hi, r.ci_level
            if t.boot is not None and len(t.boot):
                b = np.asarray(t.boot, dtype=float)
                lo, hi = float(np.quantile(b, (1 - lv) / 2)), float(np.quantile(b, 1 - (1 - lv) / 2))
                ci_level = float(lv)
            decided = decide(r.ours, pa, t.threshold, t.direction, alpha)
            note = r.note
            if decided == "within noise" and t.se:
                d = stats.mdd(t.se**2, 1, alpha=1 - lv)
                more = ""
                if t.n_items:
                    more = (
                        f"; ~{math.ceil(t.n_items * (d / SMALL_GAP) ** 2):,} items per model would detect {SMALL_GAP:g}"
                    )
                note = "; ".join(x for x in (r.note, f"MDD {d:.3f} at this size and level{more}") if x)
            out[i] = replace(
                r,
                p_adj=float(pa),
                level=float(lv),
                family=len(idx),
                lo=lo,
                hi=hi,
                ci_level=ci_level,
                verdict=decided,
                rule=f"Holm over {len(idx)} rows at {alpha:g}; " + r.rule,
                note=note,
            )
    return out


def jaccard(a, b) -> float:
    """|a & b| / |a | b| of two removed sets (1.0 for two empty sets)."""
    a, b = set(a), set(b)
    return len(a & b) / len(a | b) if a | b else 1.0


def distinct(rows: list[ComparisonRow]) -> list[ComparisonRow]:
    """One row per distinct evaluated model: (removed set, recovery), whichever searchers and seeds
    found it (the first row listed stands for it). Counting one model twice would pair a set with its
    own copy and shrink an interval for nothing (at perplexity k=6 greedy, fastblock and streamline
    all remove the same blocks)."""
    seen: dict[tuple, ComparisonRow] = {}
    for r in rows:
        seen.setdefault((tuple(sorted(r.removed)), r.rec), r)
    return list(seen.values())


# ---------------------------------------------------------------- per-item correctness
@dataclass(frozen=True)
class ItemMatrix:
    """0/1 correctness of evaluated models (rows, by eval_key) on items (columns, (task, doc) pairs
    every model has), and each item's task (index into ``tasks``)."""

    keys: tuple[str, ...]
    tasks: tuple[str, ...]
    task_of: np.ndarray  # (n_items,) int
    docs: np.ndarray  # (n_items,) int
    correct: np.ndarray  # (n_models, n_items) float64 of 0/1

    @classmethod
    def from_columns(cls, key, task, doc, correct) -> ItemMatrix:
        """From parallel columns (one entry per model, task and doc; a repeated one: the last wins).
        Items that some model lacks are left out."""
        key, task = np.asarray(key, dtype=object).astype(str), np.asarray(task, dtype=object).astype(str)
        doc, correct = np.asarray(doc, dtype=np.int64), np.asarray(correct, dtype=float)
        keys, ki = np.unique(key, return_inverse=True)
        tasks, ti = np.unique(task, return_inverse=True)
        pairs, ii = np.unique(np.stack([ti.ravel(), doc], axis=1), axis=0, return_inverse=True)
        ii = ii.ravel()
        mat = np.full((len(keys), len(pairs)), np.nan)
        mat[ki.ravel(), ii] = correct
        keep = ~np.isnan(mat).any(axis=0)
        pairs = pairs[keep]
        used = np.unique(pairs[:, 0])  # tasks left with at least one item
        remap = np.full(len(tasks), -1)
        remap[used] = np.arange(len(used))
        return cls(
            tuple(keys.tolist()), tuple(tasks[used].tolist()), remap[pairs[:, 0]], pairs[:, 1].copy(), mat[:, keep]
        )

    @classmethod
    def from_rows(cls, rows: list[ItemRow]) -> ItemMatrix:
        """From item rows (``eval_numbers.ItemRow``, each with its ``key``); correct = pred == gold."""
        return cls.from_columns(
            [r.key for r in rows],
            [r.task for r in rows],
            [r.doc for r in rows],
            [float(r.correct) for r in rows],
        )

    @classmethod
    def from_table(cls, table) -> ItemMatrix:
        """From a pyarrow table with columns key, task, doc, gold, pred."""
        gold = table.column("gold").to_numpy(zero_copy_only=False)
        pred = table.column("pred").to_numpy(zero_copy_only=False)
        return cls.from_columns(
            table.column("key").to_pylist(),
            table.column("task").to_pylist(),
            table.column("doc").to_numpy(zero_copy_only=False),
            (pred == gold).astype(float),
        )

    @classmethod
    def read(cls, path) -> ItemMatrix | None:
        """RUN_DIR/eval_items.parquet as a matrix; None when the file is missing (older runs)."""
        import os

        import pyarrow.parquet as pq

        if not os.path.exists(path):
            return None
        return cls.from_table(pq.read_table(path, columns=["key", "task", "doc", "gold", "pred"]))

    def __contains__(self, key) -> bool:
        return key in self.keys

    @property
    def n_items(self) -> int:
        return self.correct.shape[1]

    def task_items(self) -> list[np.ndarray]:
        """The item indices of each task."""
        return [np.flatnonzero(self.task_of == t) for t in range(len(self.tasks))]

    def macro(self, rows: np.ndarray, counts: list[np.ndarray] | None = None) -> np.ndarray:
        """Macro (mean over tasks) accuracy of correctness rows (models, n_items): on all items, or
        (models, n_boot) under resample ``counts`` (see :meth:`resample_counts`). Per-task sums are
        integer-exact, so identical models get identical accuracies."""
        out: float | np.ndarray = 0.0
        for t, idx in enumerate(self.task_items()):
            if counts is None:
                out = out + rows[:, idx].sum(axis=1) / len(idx)
            else:
                out = out + (rows[:, idx] @ counts[t].T) / counts[t].sum(axis=1)
        return np.asarray(out / len(self.tasks))

    def mean_acc(self, key: str) -> float:
        """The mean over tasks of the per-task accuracy (macro average, like mean_acc of comparison.parquet)."""
        return float(self.macro(self.correct[[self.keys.index(key)]])[0])

    def subset(self, items: np.ndarray) -> ItemMatrix:
        """The same models on the items ``items`` (indices); tasks left without items are dropped."""
        used, task_of = np.unique(self.task_of[items], return_inverse=True)
        return ItemMatrix(
            self.keys, tuple(self.tasks[t] for t in used), task_of.ravel(), self.docs[items], self.correct[:, items]
        )

    def splittable(self) -> bool:
        """Every task has 2 or more items, so both halves of :meth:`split` keep every task."""
        return self.n_items > 0 and min(len(idx) for idx in self.task_items()) >= 2

    def split(self, seed: int = 0) -> tuple[ItemMatrix, ItemMatrix]:
        """Two disjoint halves of the items, stratified by task (each task's items in a seeded random
        order, the first half to A, the rest to B): for statistics that choose on one half and
        measure on the other (:func:`split_bootstrap`)."""
        rng = np.random.default_rng([seed, 7])
        a = []
        for idx in self.task_items():
            a += rng.permutation(idx)[: (len(idx) + 1) // 2].tolist()
        in_a = np.zeros(self.n_items, dtype=bool)
        in_a[a] = True
        return self.subset(np.flatnonzero(in_a)), self.subset(np.flatnonzero(~in_a))

    def resample_counts(self, n_boot: int, seed: int) -> list[np.ndarray]:
        """Per task, an (n_boot, n_task_items) matrix of how often each item is drawn in each seeded
        resample: n - 1 of a task's n items drawn with replacement (the rescaled bootstrap, whose
        variance of a task's mean is unbiased: ghostsearch.stats.inference)."""
        rng = np.random.default_rng(seed)
        offsets = np.arange(n_boot)[:, None]
        out = []
        for idx in self.task_items():
            n = len(idx)
            draw = rng.integers(0, n, size=(n_boot, max(n - 1, 1)))
            out.append(np.bincount((draw + offsets * n).ravel(), minlength=n_boot * n).reshape(n_boot, n).astype(float))
        return out


def item_bootstrap_samples(
    matrix: ItemMatrix,
    stat_fn: Callable[[dict], float],
    n_boot: int = 2000,
    seed: int = 0,
    keys=None,
    paired: bool = True,
) -> tuple[float, np.ndarray]:
    """(point, the n_boot resampled statistics) of ``stat_fn({eval_key: macro accuracy})``: items
    resampled with replacement within each task; paired: one resample for every model;
    ``paired=False`` draws each model its own resample (for comparison only)."""
    keys = list(matrix.keys if keys is None else dict.fromkeys(keys))
    rows = [matrix.keys.index(k) for k in keys]
    c = matrix.correct[rows]
    point = float(stat_fn(dict(zip(keys, matrix.macro(c).tolist()))))
    if paired:
        acc = matrix.macro(c, matrix.resample_counts(n_boot, seed))  # (models, n_boot)
    else:
        acc = np.concatenate(
            [matrix.macro(c[[i]], matrix.resample_counts(n_boot, seed + 1 + i)) for i in range(len(keys))]
        )
    return point, np.array([stat_fn(dict(zip(keys, col))) for col in acc.T.tolist()], dtype=float)


def item_bootstrap(
    matrix: ItemMatrix,
    stat_fn: Callable[[dict], float],
    n_boot: int = 2000,
    seed: int = 0,
    keys=None,
    paired: bool = True,
) -> tuple[float, float, float]:
    """(point, lo, hi): :func:`item_bootstrap_samples` with its 95% percentile interval."""
    point, boot = item_bootstrap_samples(matrix, stat_fn, n_boot, seed, keys, paired)
    return (point, *_percentile(boot))


N_SPLITS = 20  # random half-splits a cross-fitted statistic is averaged over


def split_bootstrap_samples(
    matrix: ItemMatrix,
    stat_fn: Callable[[dict, dict], float],
    n_boot: int = 2000,
    seed: int = 0,
    keys=None,
    n_splits: int = N_SPLITS,
) -> tuple[float, np.ndarray]:
    """(point, resampled statistics) of a statistic that chooses on one half of the items and
    measures on the other: ``stat_fn(acc_a, acc_b)`` gets the macro accuracies on the halves of
    :meth:`ItemMatrix.split`. The point is its mean over ``n_splits`` seeded random splits (one
    split's value depends on which items fell where); the bootstrap spreads its n_boot resamples
    over those splits, each half resampled within its tasks (paired across models)."""
    keys = list(matrix.keys if keys is None else dict.fromkeys(keys))
    rows = [matrix.keys.index(k) for k in keys]
    points, boot = [], []
    per = [n_boot // n_splits + (i < n_boot % n_splits) for i in range(n_splits)]
    for s in range(n_splits):
        A, B = matrix.split(seed + s)
        ca, cb = A.correct[rows], B.correct[rows]
        points.append(float(stat_fn(dict(zip(keys, A.macro(ca).tolist())), dict(zip(keys, B.macro(cb).tolist())))))
        if per[s] == 0:
            continue
        acc_a = A.macro(ca, A.resample_counts(per[s], seed + 1000 + 2 * s)).T.tolist()
        acc_b = B.macro(cb, B.resample_counts(per[s], seed + 1001 + 2 * s)).T.tolist()
        boot += [stat_fn(dict(zip(keys, a)), dict(zip(keys, b))) for a, b in zip(acc_a, acc_b)]
    return float(np.mean(points)), np.array(boot, dtype=float)


def split_bootstrap(
    matrix: ItemMatrix,
    stat_fn: Callable[[dict, dict], float],
    n_boot: int = 2000,
    seed: int = 0,
    keys=None,
    n_splits: int = N_SPLITS,
) -> tuple[float, float, float]:
    """(point, lo, hi): :func:`split_bootstrap_samples` with its 95% percentile interval."""
    point, boot = split_bootstrap_samples(matrix, stat_fn, n_boot, seed, keys, n_splits)
    return (point, *_percentile(boot))


def cross_fit_gap(
    acc_a: dict, acc_b: dict, choose: Callable[[dict], tuple], measure: Callable[[dict, tuple], float]
) -> float:
    """Choose on one half, measure on the other, both ways, averaged: an estimate of the chosen
    quantity free of the selection bias of choosing and measuring on the same items (the maximum of
    noisy accuracies is biased upward; a cross-fitted one is not)."""
    return 0.5 * (measure(acc_b, choose(acc_a)) + measure(acc_a, choose(acc_b)))


def _boot_row(claim, paper, cond, point, boot, threshold, direction, n_items, note=None) -> ClaimRow:
    lo, hi = _percentile(boot)
    return claim_row(
        claim,
        paper,
        cond,
        point,
        lo,
        hi,
        threshold,
        direction,
        note=note,
        p=boot_p(boot, threshold),
        boot=boot,
        se=float(np.std(boot, ddof=1)) if len(boot) > 1 else None,
        n_items=n_items,
    )


# ---------------------------------------------------------------- grouping
def finalists(rows: list[ComparisonRow]) -> list[ComparisonRow]:
    """The comparison's rows without the dense model."""
    return [r for r in rows if not r.is_dense]


def _groups(rows: list[ComparisonRow], *fields) -> dict[tuple, list[ComparisonRow]]:
    out = defaultdict(list)
    for r in finalists(rows):
        out[tuple(r.rec if f == "recovery" else getattr(r, f) for f in fields)].append(r)
    return dict(sorted(out.items(), key=lambda kv: tuple(str(x) for x in kv[0])))


def _cond(**kw) -> str:
    return ", ".join(f"{v}" if k == "objective" else f"{k}={v}" if k == "k" else f"recovery {v}" for k, v in kw.items())


def _not_computed(claim, paper, condition, threshold, direction, note=NO_ITEMS) -> ClaimRow:
    return claim_row(claim, paper, condition, None, None, None, threshold, direction, note=note)


def _no_verdict(claim, paper, condition, n: int) -> ClaimRow:
    return ClaimRow(
        claim=claim,
        paper=paper,
        condition=condition,
        ours=None,
        lo=None,
        hi=None,
        rule=f"no verdict on fewer than {MIN_MODELS} distinct models",
        verdict="no verdict",
        note=f"{n} distinct evaluated model{'s' if n != 1 else ''}; {MIN_MODELS} or more would decide",
    )


def _with_items(rows: list[ComparisonRow], matrix: ItemMatrix | None) -> list[ComparisonRow]:
    return [] if matrix is None else [r for r in rows if r.eval_key in matrix]


def _n_distinct(cells: list[ComparisonRow]) -> int:
    return len(distinct(cells))


def _seed_means(acc: dict, cells: list[ComparisonRow]) -> dict[str, float]:
    """Seed-averaged accuracy per searcher."""
    by = defaultdict(list)
    for r in cells:
        by[r.searcher].append(acc[r.eval_key])
    return {s: sum(v) / len(v) for s, v in by.items()}


# ---------------------------------------------------------------- the claims
SHAPES = (
    "objectives shape the removed set",
    'the two objectives produce structurally different sets of "redundant" layers',
)


def shapes_statistic(sets: list, labels: np.ndarray) -> float:
    """Mean Jaccard of removed sets between units of the same label minus that between units of
    different labels (NaN when either kind of pair is missing)."""
    J = np.array([[jaccard(a, b) for b in sets] for a in sets])
    return _shapes(J, np.asarray(labels))


def _shapes(J: np.ndarray, labels: np.ndarray) -> float:
    same = (labels[:, None] == labels[None, :]) & ~np.eye(len(labels), dtype=bool)
    diff = labels[:, None] != labels[None, :]
    if not same.any() or not diff.any():
        return math.nan
    return float(J[same].mean() - J[diff].mean())


def objective_shapes_sets(rows: list[ComparisonRow], n_boot: int = 2000, seed: int = 0) -> list[ClaimRow]:
    """Per k: mean Jaccard of removed sets within an objective minus between objectives, tested by an
    exact permutation test of the objective labels within each searcher (the labels are exchangeable
    when the objective does not shape the set; relabelling within a searcher keeps its own habits out
    of the comparison). Units: one per (objective, searcher, removed set), so seeds that found the
    same set count once and different calibration seeds that found different sets count each;
    objective-blind searchers (whose set does not come from the objective's search) are left out.
    A design with too few relabellings to reach p <= 0.05 is descriptive. Two-sided p; holds if the
    statistic is > 0 and the family rejects."""
    out = []
    for (k,), g in _groups(rows, "k").items():
        seen: dict[tuple, ComparisonRow] = {}
        for r in g:
            if not blind_by_design(r.searcher):
                seen.setdefault((r.objective, r.searcher, tuple(sorted(r.removed))), r)
        cells = list(seen.values())
        objs = sorted({r.objective for r in cells}, key=str)
        cond = _cond(k=k) + " (all recoveries)"
        if len(objs) < 2 or any(sum(r.objective == o for r in cells) < 2 for o in objs):
            out.append(_not_computed(*SHAPES, cond, 0.0, ">", note="needs 2 objectives with 2 cells each"))
            continue
        J = np.array([[jaccard(a.removed, b.removed) for b in cells] for a in cells])
        labels = np.array([objs.index(r.objective) for r in cells])
        strata = np.array([r.searcher for r in cells])
        n_perm = stats.n_arrangements(labels, strata)
        point = _shapes(J, labels)
        note = f"{len(cells)} cells; exact permutation over {n_perm} relabellings within searchers"
        if n_perm * ALPHA < 1:
            out.append(
                replace(
                    claim_row(
                        *SHAPES,
                        cond,
                        point,
                        None,
                        None,
                        0.0,
                        ">",
                        note=note + f": p cannot go below 1/{n_perm}, so this size cannot decide",
                    ),
                    verdict="descriptive",
                )
            )
            continue
        res = stats.permutation_test(partial(_shapes, J), labels, strata, alternative="two-sided", seed=seed)
        note = note if res.exact else f"{len(cells)} cells; {res.n_perm} random relabellings within searchers"
        out.append(claim_row(*SHAPES, cond, point, None, None, 0.0, ">", note=note, p=res.p))
    return out


BEATS = (
    "objective matters more than search",
    (
        '"the choice of calibration objective has far more influence on final performance than the choice '
        'of search algorithm"'
    ),
)


def _best_worst(acc: dict, cells: list[ComparisonRow]) -> tuple[str, str]:
    """The searchers with the highest and lowest seed-averaged accuracy (ties: the first listed)."""
    m = _seed_means(acc, cells)
    return max(m, key=lambda s: m[s]), min(m, key=lambda s: m[s])


def _gap(acc: dict, choice: tuple[str, str], cells: list[ComparisonRow]) -> float:
    m = _seed_means(acc, cells)
    return m[choice[0]] - m[choice[1]]


def searcher_spread(acc_a: dict, acc_b: dict, cells: list[ComparisonRow]) -> float:
    """Best minus worst searcher, cross-fitted (:func:`cross_fit_gap`): chosen on one half of the
    items, measured on the other. Near 0 when the searchers are truly alike, however noisy the items."""
    return cross_fit_gap(acc_a, acc_b, lambda acc: _best_worst(acc, cells), lambda acc, c: _gap(acc, c, cells))


def objective_blind(rows: list[ComparisonRow]) -> set[str]:
    """Searchers whose removed set never depends on the objective in this run: at every (k, seed)
    where they ran under two or more objectives they found one set (in the pilot: lorp and
    streamline; fastblock and shortgpt read the objective's calibration data and differ)."""
    sets: dict[tuple, set] = defaultdict(set)
    n_obj: dict[tuple, set] = defaultdict(set)
    for r in finalists(rows):
        key = (r.searcher, r.k, r.seed)
        sets[key].add(tuple(sorted(r.removed)))
        n_obj[key].add(r.objective)
    out: dict[str, bool] = {}
    for key, v in sets.items():
        if len(n_obj[key]) >= 2:
            out[key[0]] = out.get(key[0], True) and len(v) == 1
    return {s for s, blind in out.items() if blind}


def objective_beats_search(
    rows: list[ComparisonRow], matrix: ItemMatrix | None, n_boot: int = 2000, seed: int = 0
) -> list[ClaimRow]:
    """Per (k, recovery): objective effect minus search effect, in mean accuracy, both cross-fitted
    and averaged over random splits (:func:`split_bootstrap_samples`). Objective effect: the paired
    mean difference acc(first) - acc(second) over (searcher, seed) present under both objectives,
    signed by its sign on the other half (averaged over pairs of objectives when there are more than
    two), objective-blind searchers (:func:`objective_blind`: same set under every objective, a
    difference of exactly 0 that says nothing about the objective) left out; search effect: mean
    over objectives of :func:`searcher_spread`. Bootstrap p; holds if > 0."""
    out = []
    blind = objective_blind(rows)
    for (k, rec), g in _groups(rows, "k", "recovery").items():
        cond = _cond(k=k, recovery=rec)
        cells = _with_items(g, matrix)
        objs = sorted({r.objective for r in cells}, key=str)
        by = {(r.objective, r.searcher, r.seed): r.eval_key for r in cells if r.searcher not in blind}
        pairs = [
            (o1, o2, [(by[(o1, s, sd)], by[(o2, s, sd)]) for (o, s, sd) in by if o == o1 and (o2, s, sd) in by])
            for o1, o2 in combinations(objs, 2)
        ]
        pairs = [p for p in pairs if p[2]]
        if matrix is None or not pairs:
            out.append(
                _not_computed(
                    *BEATS,
                    cond,
                    0.0,
                    ">",
                    NO_ITEMS if matrix is None else "no objective-guided (searcher, seed) under two objectives",
                )
            )
            continue
        if _n_distinct(cells) < MIN_MODELS:
            out.append(_no_verdict(*BEATS, cond, _n_distinct(cells)))
            continue
        if not matrix.splittable():
            out.append(_not_computed(*BEATS, cond, 0.0, ">", NO_SPLIT))
            continue
        per_obj = [[r for r in cells if r.objective == o] for o in objs]

        def stat(acc_a, acc_b, pairs=pairs, per_obj=per_obj):
            def diff(acc, ps):
                return float(np.mean([acc[a] - acc[b] for a, b in ps]))

            def pick_sign(acc, ps):
                return np.sign(diff(acc, ps))

            def signed_gap(acc, sign, ps):
                return sign * diff(acc, ps)

            obj = np.mean(
                [
                    cross_fit_gap(
                        acc_a,
                        acc_b,
                        partial(pick_sign, ps=ps),
                        partial(signed_gap, ps=ps),
                    )
                    for _, _, ps in pairs
                ]
            )
            return obj - np.mean([searcher_spread(acc_a, acc_b, c) for c in per_obj])

        point, boot = split_bootstrap_samples(matrix, stat, n_boot, seed, keys=[r.eval_key for r in cells])
        out.append(_boot_row(*BEATS, cond, point, boot, 0.0, ">", matrix.n_items))
    return out


SPREAD = (
    "search algorithms differ little",
    'best minus worst searcher: "typically 1-3 percentage points" (margin objective); ours cross-fitted',
)


def search_spread(
    rows: list[ComparisonRow], matrix: ItemMatrix | None, n_boot: int = 2000, seed: int = 0
) -> list[ClaimRow]:
    """Per (objective, k, recovery): best minus worst searcher by seed-averaged accuracy, cross-fitted
    and averaged over random splits (:func:`searcher_spread`, :func:`split_bootstrap_samples`).
    Bootstrap p of "spread = 0.03"; holds if < 0.03. No verdict on fewer than 3 distinct models. The
    note gives the in-sample max - min over all items, which is what a table of accuracies shows and
    is biased upward (the maximum of noisy values)."""
    out = []
    for (obj, k, rec), g in _groups(rows, "objective", "k", "recovery").items():
        cond = _cond(objective=obj, k=k, recovery=rec)
        cells = _with_items(g, matrix)
        if matrix is None or len({r.searcher for r in cells}) < 2:
            out.append(
                _not_computed(*SPREAD, cond, SMALL_GAP, "<", NO_ITEMS if matrix is None else "fewer than 2 searchers")
            )
            continue
        if _n_distinct(cells) < MIN_MODELS:
            out.append(_no_verdict(*SPREAD, cond, _n_distinct(cells)))
            continue
        if not matrix.splittable():
            out.append(_not_computed(*SPREAD, cond, SMALL_GAP, "<", NO_SPLIT))
            continue
        full = {key: matrix.mean_acc(key) for r in cells if (key := r.eval_key) is not None}  # all: _with_items
        in_sample = _gap(full, _best_worst(full, cells), cells)
        point, boot = split_bootstrap_samples(
            matrix, partial(searcher_spread, cells=cells), n_boot, seed, keys=[r.eval_key for r in cells]
        )
        out.append(
            _boot_row(
                *SPREAD, cond, point, boot, SMALL_GAP, "<", matrix.n_items, note=f"in-sample max-min {in_sample:.3f}"
            )
        )
    return out


CALIB = (
    "calibration ranking disagrees with accuracy ranking",
    "Spearman of calibration rank vs accuracy rank: -0.78 to near zero, mostly negative",
)


def paper_rho(calib, acc, seed: int = 0, n_boot: int = 2000) -> tuple[float, float, float]:
    """Spearman rho in the paper's convention, with its 95% interval. Sign convention: ghostsearch's
    calib_value is lower-is-better and accuracy higher-is-better, while the paper correlates the two
    RANKINGS (rank 1 = best for both). So paper_rho = -spearman(calib_value, acc): +1 when the cell
    with the best (lowest) calibration value is also the most accurate, -1 when the orders are
    opposite. The interval is stats.spearman_ci's, negated and swapped."""
    lo, hi = spearman_ci(calib, acc, seed, n_boot, LEVEL)
    return -spearman(calib, acc), -hi, -lo


def calibration_vs_accuracy(rows: list[ComparisonRow], n_boot: int = 2000, seed: int = 0) -> list[ClaimRow]:
    """Per (objective, k, recovery): paper_rho (see :func:`paper_rho`) over the distinct evaluated
    models (:func:`distinct`), from the rows' mean_acc, with its 95% bootstrap interval (descriptive)
    and an exact permutation p of the ranks (stats.spearman_exact_p) for "paper_rho < 0" (opposite
    orders). No verdict on fewer than 3 models; descriptive where n cannot reach p <= 0.05 (n <= 4:
    the smallest two-sided p is 2/n!). Then one summary row, reported: how many conditions have
    rho < 0 and how many the family decided."""
    out = []
    for (obj, k, rec), g in _groups(rows, "objective", "k", "recovery").items():
        g = distinct([r for r in g if r.has("mean_acc") and r.calib_value is not None])
        cond = _cond(objective=obj, k=k, recovery=rec) + f" (n={len(g)})"
        if len(g) < MIN_MODELS:
            out.append(_no_verdict(*CALIB, cond, len(g)))
            continue
        calib, acc = [r.calib_value for r in g], [r.metric("mean_acc") for r in g]
        r_paper, lo, hi = paper_rho(calib, acc, seed, n_boot)
        rho = None if math.isnan(r_paper) else r_paper
        if 2 / math.factorial(len(g)) > ALPHA or rho is None:
            out.append(
                replace(
                    claim_row(
                        *CALIB,
                        cond,
                        rho,
                        lo,
                        hi,
                        0.0,
                        "<",
                        note=f"n={len(g)}: the smallest possible p is 2/{len(g)}!, so this size cannot decide"
                        if rho is not None
                        else "rho undefined (tied ranks)",
                    ),
                    verdict="descriptive",
                )
            )
            continue
        res = stats.spearman_exact_p(calib, acc, seed=seed)
        out.append(
            claim_row(
                *CALIB,
                cond,
                rho,
                lo,
                hi,
                0.0,
                "<",
                p=res.p,
                note="95% bootstrap interval; p: exact permutation"
                if res.exact
                else "95% bootstrap interval; p: 10,000 random permutations",
            )
        )
    done = [r.ours for r in out if r.ours is not None]
    if not done:
        return out
    neg = sum(ours < 0 for ours in done)
    n = len(done)
    out.append(
        ClaimRow(
            claim=CALIB[0] + " (summary)",
            paper=CALIB[1],
            condition=f"{n} conditions with a rho: {neg} with rho < 0",
            ours=neg / n,
            lo=None,
            hi=None,
            rule="reported (the rows above carry the verdicts)",
            verdict="reported",
            note="share of conditions with rho < 0",
        )
    )
    return out


COST = (
    "complex search buys little",
    "simple methods are near-optimal in minutes; complex ones take hours for marginal gains",
)


def cost_of_search(
    rows: list[ComparisonRow], matrix: ItemMatrix | None, n_boot: int = 2000, seed: int = 0
) -> list[ClaimRow]:
    """Per objective: the compute of the complex searchers (ga, bo, cbo, beam) over that of the simple
    ones (oneshot, fastblock), in evaluations (budget_used: full-evaluation equivalents) summed over
    cells (reported, no verdict; wall seconds are not used: cells share one pool and wait for each
    other, so a cell's wall time is mostly queueing). Per (objective, k, recovery): accuracy of the
    best complex cell minus that of the best simple cell, cross-fitted (both picked on one half of
    the items, measured on the other, both ways, averaged over random splits: the in-sample best of
    several noisy cells is biased upward); bootstrap p of "gain = 0.03"; holds if < 0.03."""
    out = []
    for (obj,), g in _groups(rows, "objective").items():
        by_cell = {r.cell: r for r in g}.values()
        used_cx = sum(r.budget_used or 0.0 for r in by_cell if cost_class(r.searcher) == "complex")
        used_sm = sum(r.budget_used or 0.0 for r in by_cell if cost_class(r.searcher) == "simple")
        out.append(
            ClaimRow(
                claim=COST[0] + ": compute ratio",
                paper="minutes vs hours",
                condition=f"{obj}: evaluations complex {used_cx:.0f} / simple {used_sm:.0f}",
                ours=used_cx / used_sm if used_sm > 0 and used_cx > 0 else None,
                lo=None,
                hi=None,
                rule="reported",
                verdict="reported",
            )
        )
    for (obj, k, rec), g in _groups(rows, "objective", "k", "recovery").items():
        cond = _cond(objective=obj, k=k, recovery=rec)
        cells = _with_items(g, matrix)
        cx = list(dict.fromkeys(r.eval_key for r in cells if cost_class(r.searcher) == "complex"))
        sm = list(dict.fromkeys(r.eval_key for r in cells if cost_class(r.searcher) == "simple"))
        if matrix is None or not cx or not sm or not matrix.splittable():
            out.append(
                _not_computed(
                    COST[0] + ": accuracy gain",
                    COST[1],
                    cond,
                    SMALL_GAP,
                    "<",
                    NO_ITEMS if matrix is None else "needs complex and simple cells" if not (cx and sm) else NO_SPLIT,
                )
            )
            continue

        def stat(acc_a, acc_b, cx=cx, sm=sm):
            return cross_fit_gap(
                acc_a,
                acc_b,
                lambda acc: (max(cx, key=lambda c: acc[c]), max(sm, key=lambda c: acc[c])),
                lambda acc, pick: acc[pick[0]] - acc[pick[1]],
            )

        point, boot = split_bootstrap_samples(matrix, stat, n_boot, seed, keys=cx + sm)
        out.append(_boot_row(COST[0] + ": accuracy gain", COST[1], cond, point, boot, SMALL_GAP, "<", matrix.n_items))
    return out


def paired_row(
    matrix: ItemMatrix, claim: str, paper: str, cond: str, ka: str, kb: str, n_boot: int = 2000, seed: int = 0
) -> ClaimRow:
    """A tested row for acc(ka) - acc(kb) > 0: the paired z test of the macro mean difference
    (stats.paired_test, item variance within tasks; the statistic the adaptive looks use) and its
    paired percentile-bootstrap interval (shown at the row's Holm level by :func:`family`)."""
    a, b = matrix.correct[matrix.keys.index(ka)], matrix.correct[matrix.keys.index(kb)]
    t = stats.paired_test(a, b, matrix.task_of)
    _, boot = item_bootstrap_samples(matrix, lambda acc: acc[ka] - acc[kb], n_boot, seed, keys=[ka, kb])
    lo, hi = _percentile(boot)
    return claim_row(
        claim, paper, cond, t.estimate, lo, hi, 0.0, ">", p=t.p, boot=boot, se=t.se, n_items=matrix.n_items
    )


def recovery_comparison(matrix: ItemMatrix | None, pairs, n_boot: int = 2000, seed: int = 0) -> list[ClaimRow]:
    """Paired accuracy difference of two evaluated models, for each (label_a, key_a, label_b, key_b,
    paper_text) in ``pairs`` (e.g. ghosted vs replaceme on the same removed set): :func:`paired_row`;
    holds if acc(a) - acc(b) > 0 and the family rejects."""
    out = []
    for la, ka, lb, kb, paper in pairs:
        claim, cond = f"{la} beats {lb}", f"{la} - {lb}"
        if matrix is None or ka not in matrix or kb not in matrix:
            out.append(
                _not_computed(
                    claim, paper, cond, 0.0, ">", NO_ITEMS if matrix is None else "model missing from the items"
                )
            )
            continue
        if ka == kb:
            out.append(
                replace(
                    claim_row(claim, paper, cond, 0.0, 0.0, 0.0, 0.0, ">", note="the same evaluated model"),
                    verdict="identical",
                )
            )
            continue
        out.append(paired_row(matrix, claim, paper, cond, ka, kb, n_boot, seed))
    return out


def contrast_claims(matrix: ItemMatrix | None, pairs, n_boot: int = 2000, seed: int = 0) -> list[ClaimRow]:
    """The run's pre-registered contrasts (``contrasts.ContrastPair``: name, left_key, right_key,
    left, right labels) as tested rows: claim = the contrast as written, condition = the two models."""
    out = []
    for c in pairs:
        cond = f"{getattr(c, 'left', '') or c.left_key} - {getattr(c, 'right', '') or c.right_key}"
        paper = "pre-registered (compare.contrasts)"
        if matrix is None or c.left_key not in matrix or c.right_key not in matrix:
            out.append(
                _not_computed(
                    c.name, paper, cond, 0.0, ">", NO_ITEMS if matrix is None else "model missing from the items"
                )
            )
        elif c.left_key == c.right_key:
            out.append(
                replace(
                    claim_row(c.name, paper, cond, 0.0, 0.0, 0.0, 0.0, ">", note="the same evaluated model"),
                    verdict="identical",
                )
            )
        else:
            out.append(paired_row(matrix, c.name, paper, cond, c.left_key, c.right_key, n_boot, seed))
    return out


def all_claims(
    rows: list[ComparisonRow], matrix: ItemMatrix | None, n_boot: int = 2000, seed: int = 0
) -> list[ClaimRow]:
    """Every claim of the study on one run (the recovery comparison, which needs named pairs, aside),
    not yet adjusted: pass them (with any other rows of the run) to :func:`family` once."""
    return (
        objective_shapes_sets(rows, n_boot, seed)
        + objective_beats_search(rows, matrix, n_boot, seed)
        + search_spread(rows, matrix, n_boot, seed)
        + calibration_vs_accuracy(rows, n_boot, seed)
        + cost_of_search(rows, matrix, n_boot, seed)
    )


# ---------------------------------------------------------------- the papers' own claims
# bench/study_table.py and bench/ghosted_study.py print these; the rules live here (issue 39 item 5), the
# methods a paper compares are the caller's (no rule here decides by a searcher's name).
GHOSTED_PAPER = (
    "Ghosted > ReplaceMe > LinearPatch in mean accuracy (LLaMA-3.1-8B, 7 blocks removed: 60.01 / 59.68 / 53.27 %)"
)
SATURATION_PAPER = "accuracy saturates at 32 calibration sequences"
DATASET_PAPER = "C4 vs WikiText-2 as calibration: minimal impact"
ANTISYM_PAPER = "W* = I + M has a substantial antisymmetric part, which symmetric operators (LinearPatch) cannot reach"
GHOSTED_RIVALS = ("replaceme lstsq", "replaceme cosine", "linearpatch hadamard", "ghosted symmetric", "none")


def _fmt(v, places: int = 3) -> str:
    return "–" if v is None or (isinstance(v, float) and math.isnan(v)) else f"{v:.{places}f}"


def method_comparison(
    rows: list[ComparisonRow], matrix: ItemMatrix | None, subject: str, rivals: Sequence[str], paper: str
) -> tuple[list[ClaimRow], list[str]]:
    """A paper's "``subject`` beats ``rivals`` without repair" (e.g. LoRP against ShortGPT and
    Streamline: bench/study_table.py names them), per k, on the unrepaired perplexity-objective cells of
    seed 0 (their sets do not depend on the objective's search): paired accuracy differences
    (:func:`recovery_comparison`) and a perplexity line per k (one evaluation, no interval)."""
    methods = (subject, *rivals)
    pick = {
        (r.searcher, r.k): r for r in finalists(rows) if r.rec == "none" and r.objective == "perplexity" and r.seed == 0
    }
    pairs, lines = [], []
    for k in sorted({k for _, k in pick}):
        lo = pick.get((subject, k))
        if lo is None:
            continue
        for other in rivals:
            o = pick.get((other, k))
            if o is not None:
                pairs.append(
                    (
                        f"{subject} (k={k}, {list(lo.removed)})",
                        lo.eval_key,
                        f"{other} ({list(o.removed)})",
                        o.eval_key,
                        paper,
                    )
                )
        ppl = {s: pick[(s, k)].metric("ppl_wikitext2") for s in methods if (s, k) in pick}
        lines.append(
            f"k={k}, unrepaired WikiText-2 perplexity: "
            + ", ".join(f"{s} {_fmt(v, 1)}" for s, v in ppl.items())
            + (f" (lowest: {min(ppl, key=lambda s: ppl[s] or math.inf)})" if ppl else "")
        )
    return recovery_comparison(matrix, pairs), lines


def repair_label(r: dict) -> str:
    """A Ghosted-study row's repair: its method, and its variant unless that is the default (dense)."""
    return r["method"] + (f" {r['variant']}" if r["variant"] and r["variant"] != "dense" else "")


def _acc_gap(a: str, b: str, acc: dict) -> float:
    return acc[a] - acc[b]


def _abs_acc_gap(a: str, b: str, acc: dict) -> float:
    return abs(acc[a] - acc[b])


def _ghosted_vs_rivals(by_set: dict, matrix: ItemMatrix | None) -> tuple[list[ClaimRow], list[str]]:
    """Ghosted against every other repair of the same set (paired accuracy), and a line per set with
    each repair's WikiText-2 perplexity and Ghosted's antisymmetric shares."""
    pairs, lines = [], []
    for (kind, k), m in sorted(by_set.items()):
        g = m.get("ghosted")
        if g is None:
            continue
        for other in GHOSTED_RIVALS:
            if other in m:
                pairs.append((f"ghosted ({kind} k={k})", g["key"], other, m[other]["key"], GHOSTED_PAPER))
        ppl = {lab: r.get("ppl_wikitext2") for lab, r in m.items()}
        best = min(ppl, key=lambda x: ppl[x] if ppl[x] is not None else float("inf"))
        lines.append(
            f"{kind} k={k} {g['removed']}: WikiText-2 perplexity "
            + ", ".join(f"{lab} {v:.1f}" for lab, v in sorted(ppl.items(), key=lambda x: x[1] or 0))
            + f" (lowest: {best}); "
            f"antisymmetric share of W* {g.get('antisymmetric_share_w') or 0:.2f}, of M "
            f"{g.get('antisymmetric_share_m') or 0:.2f}"
        )
    return recovery_comparison(matrix, pairs), lines


def _ghosted_saturation(
    rows: list[dict], main_rows: list[dict], matrix: ItemMatrix | None
) -> tuple[list[ClaimRow], list[str]]:
    """Ghosted fitted on more calibration sequences (the saturation rows, and the main model at that
    k): the accuracy the most sequences gain over each count from 32 up, tested against 0.01."""
    extra = [r for r in rows if r["role"] == "saturation"]
    sat = sorted(
        extra
        + [
            r
            for r in main_rows
            if extra and r["set"] == extra[0]["set"] and r["k"] == extra[0]["k"] and repair_label(r) == "ghosted"
        ],
        key=lambda r: r["n_seq"],
    )
    out: list[ClaimRow] = []
    if matrix is None or len(sat) <= 1:
        return out, []
    top = sat[-1]
    for r in sat[:-1]:
        if r["n_seq"] >= 32 and r["key"] in matrix and top["key"] in matrix:
            p, lo, hi = item_bootstrap(matrix, partial(_acc_gap, top["key"], r["key"]), keys=[top["key"], r["key"]])
            cond = f"acc({top['n_seq']}) - acc({r['n_seq']}), {r['set']} k={r['k']}"
            out.append(
                claim_row("accuracy gained beyond n sequences is < 0.01", SATURATION_PAPER, cond, p, lo, hi, 0.01, "<")
            )
    line = f"saturation ({top['set']} k={top['k']}): " + ", ".join(
        f"{r['n_seq']} seq: ppl {r.get('ppl_wikitext2', float('nan')):.1f}, acc {r.get('mean_acc', float('nan')):.3f}"
        for r in sat
    )
    return out, [line]


def _ghosted_dataset(rows: list[dict], by_set: dict, matrix: ItemMatrix | None) -> tuple[list[ClaimRow], list[str]]:
    """Ghosted calibrated on WikiText-2 instead of C4 (the dataset rows): |accuracy difference| < 0.01."""
    out, lines = [], []
    for w in (r for r in rows if r["role"] == "dataset"):
        c4 = by_set.get((w["set"], w["k"]), {}).get("ghosted")  # the same set repaired on C4
        if c4 is None or matrix is None or c4["key"] not in matrix or w["key"] not in matrix:
            continue
        p, lo, hi = item_bootstrap(matrix, partial(_abs_acc_gap, c4["key"], w["key"]), keys=[c4["key"], w["key"]])
        cond = f"ghosted, {w['set']} k={w['k']}"
        out.append(
            claim_row("|acc(C4 calib) - acc(WikiText-2 calib)| < 0.01", DATASET_PAPER, cond, p, lo, hi, 0.01, "<")
        )
        lines.append(
            f"calibration data ({w['set']} k={w['k']}): C4 ppl {c4.get('ppl_wikitext2', float('nan')):.1f} / "
            f"acc {c4.get('mean_acc', float('nan')):.3f}; WikiText-2 ppl "
            f"{w.get('ppl_wikitext2', float('nan')):.1f}"
            f" / acc {w.get('mean_acc', float('nan')):.3f} (WikiText-2 perplexity is measured on its test "
            "split, calibration read its validation split)"
        )
    return out, lines


def _antisymmetric_share(main_rows: list[dict]) -> list[ClaimRow]:
    """The antisymmetric share of W* = I + M over the sets Ghosted (dense) repaired: reported, not tested."""
    shares = [
        r["antisymmetric_share_w"]
        for r in main_rows
        if r["method"] == "ghosted" and r["variant"] == "dense" and r.get("antisymmetric_share_w") is not None
    ]
    if not shares:
        return []
    return [
        ClaimRow(
            claim="antisymmetric share of W* = I + M",
            paper=ANTISYM_PAPER,
            condition=f"ghosted, {len(shares)} sets",
            ours=float(sum(shares) / len(shares)),
            lo=float(min(shares)),
            hi=float(max(shares)),
            rule="reported (range over sets)",
            verdict="reported",
        )
    ]


def ghosted_claims(rows: list[dict], matrix: ItemMatrix | None) -> tuple[list[ClaimRow], list[str]]:
    """The Ghosted paper's claims on the Ghosted study's finalists (``rows``: bench/ghosted_study.py's
    OUT.parquet, one dict per finalist: role, set, k, method, variant, key, n_seq, ppl_wikitext2,
    mean_acc, antisymmetric shares): paired accuracy differences (the :func:`verdict` rule) and the
    perplexity / antisymmetric-share lines (one evaluation each, no interval)."""
    main_rows = [r for r in rows if r["role"] == "main"]
    by_set: dict = {}
    for r in main_rows:
        by_set.setdefault((r["set"], r["k"]), {})[repair_label(r)] = r
    out, lines = _ghosted_vs_rivals(by_set, matrix)
    for more, more_lines in (_ghosted_saturation(rows, main_rows, matrix), _ghosted_dataset(rows, by_set, matrix)):
        out += more
        lines += more_lines
    return out + _antisymmetric_share(main_rows), lines


# ---------------------------------------------------------------- Markdown
def _num(v) -> str:
    return "–" if v is None or (isinstance(v, float) and math.isnan(v)) else f"{v + 0.0:.3f}"


def _p(v) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "–"
    return f"{v:.3f}" if v >= 0.001 else "<0.001"


def _cell(s) -> str:
    return str(s).replace("|", "\\|").replace("\n", " ")


def render(claims: list[ClaimRow]) -> str:
    """The claims as one Markdown table: | claim | condition | paper | ours [interval] | p (Holm) | verdict |.
    Rows with a p not yet adjusted are adjusted here as one family (:func:`family`); an interval is
    labelled with its level when that is not 95%."""
    if any(c.p is not None and c.p_adj is None for c in claims):
        claims = family(claims)
    lines = [
        "| claim | condition | paper | ours [interval] | p (Holm-adjusted) | verdict |",
        "|---|---|---|---|---|---|",
    ]
    for c in claims:
        if c.ours is None:
            ours = c.note or "–"
        elif c.lo is None:
            ours = _num(c.ours) + (f" ({c.note})" if c.note else "")
        else:
            lv = LEVEL if c.ci_level is None else c.ci_level  # the level the interval was computed at
            tag = "" if abs(lv - LEVEL) < 1e-9 else f" at {100 * lv:.2f}%"
            ours = f"{_num(c.ours)} [{_num(c.lo)}, {_num(c.hi)}]{tag}" + (f"; {c.note}" if c.note else "")
        p = f"{_p(c.p_adj)} (raw {_p(c.p)})" if c.p_adj is not None else "–"
        lines.append("| " + " | ".join(_cell(x) for x in (c.claim, c.condition, c.paper, ours, p, c.verdict)) + " |")
    return "\n".join(lines)
