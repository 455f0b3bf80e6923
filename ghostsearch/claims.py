"""The study's verdicts, computed from a compare run (never written by hand).

Inputs: the rows of ``RUN_DIR/comparison.parquet`` (one per cell and recovery, plus the dense row)
and, for the accuracy claims, an :class:`ItemMatrix` built from ``RUN_DIR/eval_items.parquet``
(per-item correctness, joined to the rows by ``eval_key``). Every claim function returns rows
``{claim, paper, condition, ours, lo, hi, rule, verdict}`` (plus ``note`` when a value is missing);
:func:`render` prints them as one Markdown table. Every verdict comes from :func:`verdict`.
"""
from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from itertools import combinations

import numpy as np

from ghostsearch.report import distinct, spearman, spearman_ci

LEVEL = 0.95
SEARCH_INDEPENDENT = ("fastblock", "streamline", "lorp", "shortgpt")  # sets not chosen by the objective's search
COMPLEX = ("ga", "bo", "cbo", "beam")
SIMPLE = ("oneshot", "fastblock")
SMALL_GAP = 0.03  # "1-3 percentage points", "marginal gains"
NO_ITEMS = "no per-item data"


def verdict(lo, hi, threshold: float, direction: str) -> str:
    """The one rule of every claim. A claim says "statistic > threshold" (direction ">") or
    "statistic < threshold" (direction "<"); [lo, hi] is the statistic's 95% interval.
    For ">": it holds if lo > threshold, does not hold if hi < threshold, else it is within noise.
    For "<": it holds if hi < threshold, does not hold if lo > threshold, else it is within noise.
    An interval touching the threshold is within noise; a missing interval is "not computed"."""
    if direction not in (">", "<"):
        raise ValueError(f"direction must be '>' or '<', not {direction!r}")
    if lo is None or hi is None or math.isnan(lo) or math.isnan(hi):
        return "not computed"
    above, below = lo > threshold, hi < threshold
    if direction == "<":
        above, below = below, above
    return "holds" if above else "does not hold" if below else "within noise"


RULE = ("Verdict rule (every claim): a claim \"statistic > t\" holds if the lower end of its 95% interval "
        "is above t, does not hold if the upper end is below t, and is within noise otherwise (mirrored for "
        "\"statistic < t\"). Accuracy intervals: paired percentile bootstrap over evaluation items "
        "(resampled within each task, the same resample for every model; accuracy = mean over tasks). "
        "Jaccard intervals: bootstrap over cells within each objective. Spearman intervals: bootstrap over cells. "
        "Statistics that pick a best or worst model (the searcher spread, and the objective and search effects) "
        "are cross-fitted: the pick is made on one half of each task's items and measured on the other half, "
        "both ways, averaged, so the maximum of noisy accuracies does not bias them upward; their intervals "
        "resample each half within its tasks.")


def _rule(direction: str, t: float) -> str:
    return f"holds if {'lo' if direction == '>' else 'hi'} {direction} {t:g} (95%)"


def claim_row(claim: str, paper: str, condition: str, ours, lo, hi, threshold: float, direction: str,
              note: str | None = None) -> dict:
    """One claim's row; its verdict from :func:`verdict`."""
    row = {"claim": claim, "paper": paper, "condition": condition, "ours": ours, "lo": lo, "hi": hi,
           "rule": _rule(direction, threshold), "verdict": verdict(lo, hi, threshold, direction)}
    if note:
        row["note"] = note
    return row


def jaccard(a, b) -> float:
    """|a & b| / |a | b| of two removed sets (1.0 for two empty sets)."""
    a, b = set(a), set(b)
    return len(a & b) / len(a | b) if a | b else 1.0


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
        return cls(tuple(keys.tolist()), tuple(tasks[used].tolist()), remap[pairs[:, 0]], pairs[:, 1].copy(),
                   mat[:, keep])

    @classmethod
    def from_rows(cls, rows: list[dict]) -> ItemMatrix:
        """From item rows {key, task, doc, gold, pred}; correct = pred == gold."""
        return cls.from_columns([r["key"] for r in rows], [r["task"] for r in rows], [r["doc"] for r in rows],
                                [float(r["pred"] == r["gold"]) for r in rows])

    @classmethod
    def from_table(cls, table) -> ItemMatrix:
        """From a pyarrow table with columns key, task, doc, gold, pred."""
        gold = table.column("gold").to_numpy(zero_copy_only=False)
        pred = table.column("pred").to_numpy(zero_copy_only=False)
        return cls.from_columns(table.column("key").to_pylist(), table.column("task").to_pylist(),
                                table.column("doc").to_numpy(zero_copy_only=False), (pred == gold).astype(float))

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
        out = 0.0
        for t, idx in enumerate(self.task_items()):
            hits = rows[:, idx].sum(axis=1) if counts is None else rows[:, idx] @ counts[t].T
            out = out + hits / len(idx)
        return out / len(self.tasks)

    def mean_acc(self, key: str) -> float:
        """The mean over tasks of the per-task accuracy (macro average, like mean_acc of comparison.parquet)."""
        return float(self.macro(self.correct[[self.keys.index(key)]])[0])

    def subset(self, items: np.ndarray) -> ItemMatrix:
        """The same models on the items ``items`` (indices); tasks left without items are dropped."""
        used, task_of = np.unique(self.task_of[items], return_inverse=True)
        return ItemMatrix(self.keys, tuple(self.tasks[t] for t in used), task_of.ravel(), self.docs[items],
                          self.correct[:, items])

    def split(self, seed: int = 0) -> tuple[ItemMatrix, ItemMatrix]:
        """Two disjoint halves of the items, stratified by task (each task's items in a seeded random
        order, the first half to A, the rest to B): for statistics that choose on one half and
        measure on the other (:func:`split_bootstrap`)."""
        rng = np.random.default_rng([seed, 7])
        a = []
        for idx in self.task_items():
            a += rng.permutation(idx)[:(len(idx) + 1) // 2].tolist()
        in_a = np.zeros(self.n_items, dtype=bool)
        in_a[a] = True
        return self.subset(np.flatnonzero(in_a)), self.subset(np.flatnonzero(~in_a))

    def resample_counts(self, n_boot: int, seed: int) -> list[np.ndarray]:
        """Per task, an (n_boot, n_task_items) matrix of how often each item is drawn in each seeded
        resample: a task's items drawn with replacement, as many as it has."""
        rng = np.random.default_rng(seed)
        offsets = np.arange(n_boot)[:, None]
        out = []
        for idx in self.task_items():
            n = len(idx)
            draw = rng.integers(0, n, size=(n_boot, n))
            out.append(np.bincount((draw + offsets * n).ravel(), minlength=n_boot * n)
                       .reshape(n_boot, n).astype(float))
        return out


def _interval(stats: np.ndarray) -> tuple[float, float]:
    stats = stats[~np.isnan(stats)]
    if len(stats) == 0:
        return math.nan, math.nan
    a = (1 - LEVEL) / 2
    return float(np.quantile(stats, a)), float(np.quantile(stats, 1 - a))


def item_bootstrap(matrix: ItemMatrix, stat_fn: Callable[[dict], float], n_boot: int = 2000, seed: int = 0,
                   keys=None, paired: bool = True) -> tuple[float, float, float]:
    """(point, lo, hi): ``stat_fn({eval_key: macro accuracy})`` on all items, and its 95% percentile
    interval over ``n_boot`` resamples of the items (with replacement, within each task). Paired:
    one resample for every model, so differences between models keep their pairing; ``paired=False``
    draws each model its own resample (for comparison only). ``keys`` limits the models computed."""
    keys = list(matrix.keys if keys is None else dict.fromkeys(keys))
    rows = [matrix.keys.index(k) for k in keys]
    c = matrix.correct[rows]
    point = float(stat_fn(dict(zip(keys, matrix.macro(c).tolist()))))
    if paired:
        acc = matrix.macro(c, matrix.resample_counts(n_boot, seed))  # (models, n_boot)
    else:
        acc = np.concatenate([matrix.macro(c[[i]], matrix.resample_counts(n_boot, seed + 1 + i))
                              for i in range(len(keys))])
    stats = np.array([stat_fn(dict(zip(keys, col))) for col in acc.T.tolist()], dtype=float)
    lo, hi = _interval(stats)
    return point, lo, hi


def split_bootstrap(matrix: ItemMatrix, stat_fn: Callable[[dict, dict], float], n_boot: int = 2000, seed: int = 0,
                    keys=None) -> tuple[float, float, float]:
    """Like :func:`item_bootstrap` for a statistic that chooses on one half of the items and measures
    on the other: ``stat_fn(acc_a, acc_b)`` gets the macro accuracies on the halves of
    :meth:`ItemMatrix.split`; each half is resampled within its tasks (paired across models)."""
    keys = list(matrix.keys if keys is None else dict.fromkeys(keys))
    rows = [matrix.keys.index(k) for k in keys]
    A, B = matrix.split(seed)
    ca, cb = A.correct[rows], B.correct[rows]
    point = float(stat_fn(dict(zip(keys, A.macro(ca).tolist())), dict(zip(keys, B.macro(cb).tolist()))))
    acc_a = A.macro(ca, A.resample_counts(n_boot, seed)).T.tolist()
    acc_b = B.macro(cb, B.resample_counts(n_boot, seed + 1)).T.tolist()
    stats = np.array([stat_fn(dict(zip(keys, a)), dict(zip(keys, b))) for a, b in zip(acc_a, acc_b)], dtype=float)
    lo, hi = _interval(stats)
    return point, lo, hi


def cross_fit_gap(acc_a: dict, acc_b: dict, choose: Callable[[dict], tuple], measure: Callable[[dict, tuple], float]) -> float:
    """Choose on one half, measure on the other, both ways, averaged: an estimate of the chosen
    quantity free of the selection bias of choosing and measuring on the same items (the maximum of
    noisy accuracies is biased upward; a cross-fitted one is not)."""
    return 0.5 * (measure(acc_b, choose(acc_a)) + measure(acc_a, choose(acc_b)))


# ---------------------------------------------------------------- grouping
def finalists(rows: list[dict]) -> list[dict]:
    """The comparison's rows without the dense model."""
    return [r for r in rows if r.get("searcher") != "dense"]


def _recovery(r: dict) -> str:
    return r.get("recovery") or "none"


def _groups(rows: list[dict], *fields) -> dict[tuple, list[dict]]:
    out = defaultdict(list)
    for r in finalists(rows):
        out[tuple(_recovery(r) if f == "recovery" else r[f] for f in fields)].append(r)
    return dict(sorted(out.items(), key=lambda kv: tuple(str(x) for x in kv[0])))


def _cond(**kw) -> str:
    return ", ".join(f"{v}" if k == "objective" else f"{k}={v}" if k == "k" else f"recovery {v}"
                     for k, v in kw.items())


def _not_computed(claim, paper, condition, threshold, direction, note=NO_ITEMS) -> dict:
    return claim_row(claim, paper, condition, None, None, None, threshold, direction, note=note)


def _with_items(rows: list[dict], matrix: ItemMatrix | None) -> list[dict]:
    return [] if matrix is None else [r for r in rows if r.get("eval_key") in matrix]


def _seed_means(acc: dict, cells: list[dict]) -> dict[str, float]:
    """Seed-averaged accuracy per searcher."""
    by = defaultdict(list)
    for r in cells:
        by[r["searcher"]].append(acc[r["eval_key"]])
    return {s: sum(v) / len(v) for s, v in by.items()}


# ---------------------------------------------------------------- the claims
SHAPES = ("objectives shape the removed set",
          "the two objectives produce structurally different sets of \"redundant\" layers")


def objective_shapes_sets(rows: list[dict], n_boot: int = 2000, seed: int = 0) -> list[dict]:
    """Per k: mean Jaccard of removed sets between cells of the same objective minus that between cells of
    different objectives (searchers whose sets do not depend on the objective's search left out; the
    sets are the same for every recovery, so cells are taken once, and seeds that found the same set are
    one cell: :func:`distinct`). Interval: cells resampled with replacement within each objective (a
    cell drawn twice is not paired with itself). Holds if > 0."""
    out = []
    for (k,), g in _groups(rows, "k").items():
        cells = distinct([dict(r, recovery="none") for r in g if r["searcher"] not in SEARCH_INDEPENDENT])
        objs = sorted({r["objective"] for r in cells})
        cond = _cond(k=k) + " (all recoveries)"
        if len(objs) < 2 or any(sum(r["objective"] == o for r in cells) < 2 for o in objs):
            out.append(_not_computed(*SHAPES, cond, 0.0, ">", note="needs 2 objectives with 2 cells each"))
            continue
        n = len(cells)
        J = np.array([[jaccard(a["removed"], b["removed"]) for b in cells] for a in cells])
        ob = np.array([objs.index(r["objective"]) for r in cells])
        same = (ob[:, None] == ob[None, :]) & ~np.eye(n, dtype=bool)
        diff = ob[:, None] != ob[None, :]

        def stat(w, J=J, same=same, diff=diff):  # w: (B, n) draw counts
            ws = np.einsum("bi,ij,bj->b", w, same.astype(float), w)
            wd = np.einsum("bi,ij,bj->b", w, diff.astype(float), w)
            with np.errstate(invalid="ignore", divide="ignore"):
                return (np.einsum("bi,ij,bj->b", w, J * same, w) / ws
                        - np.einsum("bi,ij,bj->b", w, J * diff, w) / wd)

        point = float(stat(np.ones((1, n)))[0])
        rng = np.random.default_rng(seed)
        w = np.zeros((n_boot, n))
        for o in range(len(objs)):
            idx = np.flatnonzero(ob == o)
            draw = rng.integers(0, len(idx), size=(n_boot, len(idx)))
            w[:, idx] = np.stack([np.bincount(d, minlength=len(idx)) for d in draw])
        lo, hi = _interval(stat(w))
        out.append(claim_row(*SHAPES, cond, point, lo, hi, 0.0, ">"))
    return out


BEATS = ("objective matters more than search",
         ("\"the choice of calibration objective has far more influence on final performance than the choice "
          "of search algorithm\""))


def _best_worst(acc: dict, cells: list[dict]) -> tuple[str, str]:
    """The searchers with the highest and lowest seed-averaged accuracy (ties: the first listed)."""
    m = _seed_means(acc, cells)
    return max(m, key=m.get), min(m, key=m.get)


def _gap(acc: dict, choice: tuple[str, str], cells: list[dict]) -> float:
    m = _seed_means(acc, cells)
    return m[choice[0]] - m[choice[1]]


def searcher_spread(acc_a: dict, acc_b: dict, cells: list[dict]) -> float:
    """Best minus worst searcher, cross-fitted (:func:`cross_fit_gap`): chosen on one half of the
    items, measured on the other. Near 0 when the searchers are truly alike, however noisy the items."""
    return cross_fit_gap(acc_a, acc_b, lambda acc: _best_worst(acc, cells), lambda acc, c: _gap(acc, c, cells))


def objective_beats_search(rows: list[dict], matrix: ItemMatrix | None, n_boot: int = 2000,
                           seed: int = 0) -> list[dict]:
    """Per (k, recovery): objective effect minus search effect, in mean accuracy, both cross-fitted
    (chosen on one half of the items, measured on the other: :func:`split_bootstrap`). Objective
    effect: the paired mean difference acc(first) - acc(second) over (searcher, seed) present under
    both objectives, signed by its sign on the other half (averaged over pairs of objectives when
    there are more than two); search effect: mean over objectives of :func:`searcher_spread`.
    Interval: split_bootstrap. Holds if > 0."""
    out = []
    for (k, rec), g in _groups(rows, "k", "recovery").items():
        cond = _cond(k=k, recovery=rec)
        cells = _with_items(g, matrix)
        objs = sorted({r["objective"] for r in cells})
        by = {(r["objective"], r["searcher"], r["seed"]): r["eval_key"] for r in cells}
        pairs = [(o1, o2, [(by[(o1, s, sd)], by[(o2, s, sd)]) for (o, s, sd) in by
                           if o == o1 and (o2, s, sd) in by]) for o1, o2 in combinations(objs, 2)]
        pairs = [p for p in pairs if p[2]]
        if matrix is None or not pairs:
            out.append(_not_computed(*BEATS, cond, 0.0, ">",
                                     NO_ITEMS if matrix is None else "no (searcher, seed) under two objectives"))
            continue
        per_obj = [[r for r in cells if r["objective"] == o] for o in objs]

        def stat(acc_a, acc_b, pairs=pairs, per_obj=per_obj):
            def diff(acc, ps):
                return float(np.mean([acc[a] - acc[b] for a, b in ps]))
            obj = np.mean([cross_fit_gap(acc_a, acc_b, lambda acc, ps=ps: np.sign(diff(acc, ps)),
                                         lambda acc, sign, ps=ps: sign * diff(acc, ps)) for _, _, ps in pairs])
            return obj - np.mean([searcher_spread(acc_a, acc_b, c) for c in per_obj])

        point, lo, hi = split_bootstrap(matrix, stat, n_boot, seed, keys=[r["eval_key"] for r in cells])
        out.append(claim_row(*BEATS, cond, point, lo, hi, 0.0, ">"))
    return out


SPREAD = ("search algorithms differ little",
          "best minus worst searcher: \"typically 1-3 percentage points\" (margin objective); ours cross-fitted")


def search_spread(rows: list[dict], matrix: ItemMatrix | None, n_boot: int = 2000, seed: int = 0) -> list[dict]:
    """Per (objective, k, recovery): best minus worst searcher by seed-averaged accuracy, cross-fitted
    (:func:`searcher_spread`; split_bootstrap interval). Holds if < 0.03. The note gives the in-sample
    max - min over all items, which is what a table of accuracies shows and is biased upward (the
    maximum of noisy values)."""
    out = []
    for (obj, k, rec), g in _groups(rows, "objective", "k", "recovery").items():
        cond = _cond(objective=obj, k=k, recovery=rec)
        cells = _with_items(g, matrix)
        if matrix is None or len({r["searcher"] for r in cells}) < 2:
            out.append(_not_computed(*SPREAD, cond, SMALL_GAP, "<",
                                     NO_ITEMS if matrix is None else "fewer than 2 searchers"))
            continue
        full = {r["eval_key"]: matrix.mean_acc(r["eval_key"]) for r in cells}
        in_sample = _gap(full, _best_worst(full, cells), cells)
        point, lo, hi = split_bootstrap(matrix, lambda a, b, cells=cells: searcher_spread(a, b, cells), n_boot, seed,
                                        keys=[r["eval_key"] for r in cells])
        out.append(claim_row(*SPREAD, cond, point, lo, hi, SMALL_GAP, "<", note=f"in-sample max-min {in_sample:.3f}"))
    return out


CALIB = ("calibration ranking disagrees with accuracy ranking",
         "Spearman of calibration rank vs accuracy rank: -0.78 to near zero, mostly negative")


def paper_rho(calib, acc, seed: int = 0, n_boot: int = 2000) -> tuple[float, float, float]:
    """Spearman rho in the paper's convention, with its 95% interval. Sign convention: ghostsearch's
    calib_value is lower-is-better and accuracy higher-is-better, while the paper correlates the two
    RANKINGS (rank 1 = best for both). So paper_rho = -spearman(calib_value, acc): +1 when the cell
    with the best (lowest) calibration value is also the most accurate, -1 when the orders are
    opposite. The interval is report.spearman_ci's, negated and swapped."""
    lo, hi = spearman_ci(calib, acc, seed, n_boot, LEVEL)
    return -spearman(calib, acc), -hi, -lo


def calibration_vs_accuracy(rows: list[dict], n_boot: int = 2000, seed: int = 0) -> list[dict]:
    """Per (objective, k, recovery): paper_rho (see :func:`paper_rho`) over the distinct cells
    (:func:`distinct`), from the rows' mean_acc; verdict for "paper_rho < 0" (opposite orders). Then one
    summary row: holds if most conditions have paper_rho < 0 and at least one interval lies entirely
    below 0; does not hold if most intervals lie entirely above 0; else within noise."""
    out = []
    for (obj, k, rec), g in _groups(rows, "objective", "k", "recovery").items():
        g = distinct([r for r in g if r.get("mean_acc") is not None and r.get("calib_value") is not None
                      and not math.isnan(r["mean_acc"])])
        rho, lo, hi = paper_rho([r["calib_value"] for r in g], [r["mean_acc"] for r in g], seed, n_boot)
        out.append(claim_row(*CALIB, _cond(objective=obj, k=k, recovery=rec) + f" (n={len(g)})",
                             None if math.isnan(rho) else rho, lo, hi, 0.0, "<"))
    done = [r for r in out if r["ours"] is not None]
    if not done:
        return out
    neg = sum(r["ours"] < 0 for r in done)
    below = sum(r["hi"] is not None and not math.isnan(r["hi"]) and r["hi"] < 0 for r in done)
    above = sum(r["lo"] is not None and not math.isnan(r["lo"]) and r["lo"] > 0 for r in done)
    n = len(done)
    v = ("holds" if neg > n / 2 and below >= 1 else "does not hold" if above > n / 2 else "within noise")
    out.append({"claim": CALIB[0] + " (summary)", "paper": CALIB[1],
                "condition": f"all {n} conditions: {neg} with rho < 0, {below} with interval below 0, "
                             f"{above} above 0",
                "ours": neg / n, "lo": None, "hi": None,
                "rule": "holds if most rho < 0 and one interval < 0; does not hold if most intervals > 0",
                "verdict": v, "note": "share of conditions with rho < 0"})
    return out


COST = ("complex search buys little",
        "simple methods are near-optimal in minutes; complex ones take hours for marginal gains")


def cost_of_search(rows: list[dict], matrix: ItemMatrix | None, n_boot: int = 2000, seed: int = 0) -> list[dict]:
    """Per objective: the compute of the complex searchers (ga, bo, cbo, beam) over that of the simple
    ones (oneshot, fastblock), in evaluations (budget_used: full-evaluation equivalents) summed over
    cells (reported, no verdict; wall seconds are not used: cells share one pool and wait for each
    other, so a cell's wall time is mostly queueing). Per (objective, k, recovery): accuracy of the
    best complex cell minus that of the best simple cell, item_bootstrap interval; holds if < 0.03."""
    out = []
    for (obj,), g in _groups(rows, "objective").items():
        cells = {r["cell"]: r for r in g}.values()
        cx = sum(r.get("budget_used") or 0.0 for r in cells if r["searcher"] in COMPLEX)
        sm = sum(r.get("budget_used") or 0.0 for r in cells if r["searcher"] in SIMPLE)
        out.append({"claim": COST[0] + ": compute ratio", "paper": "minutes vs hours",
                    "condition": f"{obj}: evaluations complex {cx:.0f} / simple {sm:.0f}",
                    "ours": cx / sm if sm > 0 and cx > 0 else None, "lo": None, "hi": None,
                    "rule": "reported", "verdict": "reported"})
    for (obj, k, rec), g in _groups(rows, "objective", "k", "recovery").items():
        cond = _cond(objective=obj, k=k, recovery=rec)
        cells = _with_items(g, matrix)
        cx = [r["eval_key"] for r in cells if r["searcher"] in COMPLEX]
        sm = [r["eval_key"] for r in cells if r["searcher"] in SIMPLE]
        if matrix is None or not cx or not sm:
            out.append(_not_computed(COST[0] + ": accuracy gain", COST[1], cond, SMALL_GAP, "<",
                                     NO_ITEMS if matrix is None else "needs complex and simple cells"))
            continue
        point, lo, hi = item_bootstrap(matrix, lambda acc, cx=cx, sm=sm: max(acc[x] for x in cx) - max(acc[x] for x in sm),
                                       n_boot, seed, keys=cx + sm)
        out.append(claim_row(COST[0] + ": accuracy gain", COST[1], cond, point, lo, hi, SMALL_GAP, "<"))
    return out


def recovery_comparison(matrix: ItemMatrix | None, pairs, n_boot: int = 2000, seed: int = 0) -> list[dict]:
    """Paired accuracy difference of two evaluated models, for each (label_a, key_a, label_b, key_b,
    paper_text) in ``pairs`` (e.g. ghosted vs replaceme on the same removed set); item_bootstrap
    interval; holds if acc(a) - acc(b) > 0."""
    out = []
    for la, ka, lb, kb, paper in pairs:
        claim, cond = f"{la} beats {lb}", f"{la} - {lb}"
        if matrix is None or ka not in matrix or kb not in matrix:
            out.append(_not_computed(claim, paper, cond, 0.0, ">",
                                     NO_ITEMS if matrix is None else "model missing from the items"))
            continue
        point, lo, hi = item_bootstrap(matrix, lambda acc, ka=ka, kb=kb: acc[ka] - acc[kb], n_boot, seed, keys=[ka, kb])
        out.append(claim_row(claim, paper, cond, point, lo, hi, 0.0, ">"))
    return out


def all_claims(rows: list[dict], matrix: ItemMatrix | None, n_boot: int = 2000, seed: int = 0) -> list[dict]:
    """Every claim of the study on one run (the recovery comparison, which needs named pairs, aside)."""
    return (objective_shapes_sets(rows, n_boot, seed) + objective_beats_search(rows, matrix, n_boot, seed)
            + search_spread(rows, matrix, n_boot, seed) + calibration_vs_accuracy(rows, n_boot, seed)
            + cost_of_search(rows, matrix, n_boot, seed))


# ---------------------------------------------------------------- Markdown
def _num(v) -> str:
    return "–" if v is None or (isinstance(v, float) and math.isnan(v)) else f"{v + 0.0:.3f}"


def _cell(s) -> str:
    return str(s).replace("|", "\\|").replace("\n", " ")


def render(claims: list[dict]) -> str:
    """The claims as one Markdown table: | claim | condition | paper | ours [95% CI] | verdict |."""
    lines = ["| claim | condition | paper | ours [95% CI] | verdict |", "|---|---|---|---|---|"]
    for c in claims:
        if c.get("ours") is None:
            ours = c.get("note") or "–"
        elif c.get("lo") is None:
            ours = _num(c["ours"]) + (f" ({c['note']})" if c.get("note") else "")
        else:
            ours = f"{_num(c['ours'])} [{_num(c['lo'])}, {_num(c['hi'])}]" + (f"; {c['note']}" if c.get("note") else "")
        lines.append("| " + " | ".join(_cell(x) for x in (c["claim"], c["condition"], c["paper"], ours,
                                                             c["verdict"])) + " |")
    return "\n".join(lines)
