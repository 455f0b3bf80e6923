"""Per-item correctness and its bootstraps: :class:`ItemMatrix` (0/1 correctness of evaluated models
on the items every model has, by task), the item bootstrap (items resampled within tasks, paired
across models), the split bootstrap of a cross-fitted statistic (chosen on one half of the items,
measured on the other) and a percentile-bootstrap p. Moved from ``study/claims.py`` (issue 50):
the claims read them, and so do ``study.report`` and ``study.eval``."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from ghostsearch.core.eval_numbers import ItemRow
from ghostsearch.stats.inference import percentile as _percentile


def boot_p(boot: np.ndarray, threshold: float) -> float:
    """Two-sided percentile-bootstrap p of "statistic = threshold": twice the smaller share of the
    resampled statistics on either side of it, (1 + count) / (1 + B) (never 0)."""
    boot = np.asarray(boot, dtype=float)
    if len(boot) == 0 or np.isnan(boot).any():
        return math.nan
    lo, hi = np.sum(boot <= threshold), np.sum(boot >= threshold)
    return float(min(1.0, 2 * (1 + min(lo, hi)) / (1 + len(boot))))


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
