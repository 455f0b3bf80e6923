"""The item matrix and its bootstraps (ghostsearch.stats.bootstrap): per-task items, resample counts, the
paired bootstrap as one matrix product (moved from tests/study/test_claims.py with the code, issue 50)."""

import numpy as np
import pytest

from ghostsearch.core.eval_numbers import ItemRow
from ghostsearch.stats.bootstrap import ItemMatrix, item_bootstrap, item_bootstrap_samples


def item(key: str, task: str, doc: int, gold: int, pred: int) -> ItemRow:
    return ItemRow(0, (), "none", task, doc, gold, pred, None, (), key=key)


def test_item_matrix_macro_average_and_common_items():
    rows = (
        [item("a", "x", d, 0, 0) for d in range(2)]
        + [item("a", "y", d, 1, int(d == 0)) for d in range(4)]
        + [item("a", "y", 9, 1, 1)]  # only model a has it: left out
        + [item("b", t, d, 1, 0) for t, n in (("x", 2), ("y", 4)) for d in range(n)]
    )
    m = ItemMatrix.from_rows(rows)
    assert m.keys == ("a", "b") and m.tasks == ("x", "y") and m.n_items == 6
    assert m.mean_acc("a") == pytest.approx((1.0 + 0.25) / 2)  # macro, not the micro 3/6
    assert m.mean_acc("b") == 0.0


def test_item_matrix_drops_a_task_some_model_lacks():
    rows = [item(k, "x", d, 1, 1) for k in "ab" for d in range(3)] + [item("a", "z", 0, 1, 0)]
    m = ItemMatrix.from_rows(rows)
    assert m.tasks == ("x",) and m.mean_acc("a") == 1.0


def test_resample_counts_stay_within_tasks():
    rng = np.random.default_rng(0)
    m = ItemMatrix.from_columns(
        ["a"] * 30, ["x"] * 10 + ["y"] * 20, list(range(10)) + list(range(20)), rng.integers(0, 2, 30)
    )
    cx, cy = m.resample_counts(50, seed=3)
    assert cx.shape == (50, 10) and cy.shape == (50, 20)
    assert (cx.sum(axis=1) == 9).all() and (cy.sum(axis=1) == 19).all()  # n - 1 draws: unbiased variance
    assert len({tuple(r) for r in cy}) > 40  # resamples differ
    assert all((a == b).all() for a, b in zip(m.resample_counts(50, seed=3), (cx, cy)))  # seeded


def test_bootstrap_resamples_within_each_task():
    """All right on task x, all wrong on task y (different sizes): the macro accuracy is 0.5 in every
    resample when items are drawn within each task (and would vary if drawn across tasks)."""
    m = ItemMatrix.from_columns(
        ["a"] * 30, ["x"] * 10 + ["y"] * 20, list(range(10)) + list(range(20)), [1] * 10 + [0] * 20
    )
    assert item_bootstrap(m, lambda acc: acc["a"], n_boot=500) == (0.5, 0.5, 0.5)


def test_bootstrap_equals_a_loop_over_resamples_and_is_one_matrix_product(monkeypatch):
    """The vectorised bootstrap (resample counts, one matrix product per task for every resample)
    gives what the plain definition gives, resample by resample: draw n - 1 of each task's n items
    with replacement, average within each task, then over tasks. And it is vectorised: the macro
    accuracies of all resamples come from one ``macro`` call, not one per resample (what a
    wall-clock limit used to guard, flakily)."""

    rng = np.random.default_rng(3)
    sizes = {"x": 5, "y": 8, "z": 3}
    task = [t for t, n in sizes.items() for _ in range(n)]
    doc = [d for n in sizes.values() for d in range(n)]
    correct = {k: rng.integers(0, 2, len(task)) for k in ("a", "b", "c")}
    m = ItemMatrix.from_columns(
        np.repeat(list(correct), len(task)), task * 3, doc * 3, np.concatenate(list(correct.values()))
    )
    stat = lambda acc: acc["a"] - 0.5 * acc["b"] + acc["c"] ** 2  # any statistic of the accuracies
    n_boot, seed = 40, 11

    draws, g = [], np.random.default_rng(seed)  # the resamples' draws, task by task (matrix order)
    for t in m.tasks:
        n = sizes[t]
        draws.append(g.integers(0, n, size=(n_boot, n - 1)))
    want = []
    for b in range(n_boot):
        acc = {}
        for k, c in correct.items():
            per_task = []
            for t, d in zip(m.tasks, draws):
                items = [i for i, tt in enumerate(task) if tt == t]
                per_task.append(np.mean([c[items[j]] for j in d[b]]))
            acc[k] = float(np.mean(per_task))
        want.append(stat(acc))
    point_want = stat(
        {
            k: float(np.mean([np.mean([c[i] for i, tt in enumerate(task) if tt == t]) for t in sizes]))
            for k, c in correct.items()
        }
    )

    calls = []
    macro = ItemMatrix.macro
    monkeypatch.setattr(ItemMatrix, "macro", lambda self, *a, **kw: calls.append(1) or macro(self, *a, **kw))
    point, boot = item_bootstrap_samples(m, stat, n_boot=n_boot, seed=seed)
    assert point == pytest.approx(point_want, abs=1e-12)
    assert boot.tolist() == pytest.approx(want, abs=1e-12)
    assert len(set(np.round(boot, 9))) > n_boot // 2  # the resamples differ
    assert len(calls) == 2  # the point, then every resample at once
    _, lo, hi = item_bootstrap(m, stat, n_boot=n_boot, seed=seed)
    assert (lo, hi) == pytest.approx(tuple(np.quantile(want, [0.025, 0.975])), abs=1e-12)
