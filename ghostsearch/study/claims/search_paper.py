"""The search paper's claims, tested on a compare run (``report.render``): objectives shape the
removed set, the objective matters more than the search, search algorithms differ little, the
calibration ranking disagrees with the accuracy ranking, complex search buys little
(:func:`all_claims`: every one of them, not yet adjusted; :func:`..base.family` decides them)."""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import replace
from functools import partial
from itertools import combinations

import numpy as np

from ghostsearch.core.comparison_row import ComparisonRow
from ghostsearch.stats import inference as stats
from ghostsearch.stats.bootstrap import ItemMatrix, cross_fit_gap, split_bootstrap_samples
from ghostsearch.stats.inference import spearman, spearman_ci
from ghostsearch.study.claims.base import (
    ALPHA,
    LEVEL,
    MIN_MODELS,
    NO_ITEMS,
    NO_SPLIT,
    SMALL_GAP,
    ClaimRow,
    blind_by_design,
    boot_row,
    claim_row,
    condition_of,
    cost_class,
    distinct,
    finalists,
    group_rows,
    jaccard,
    n_distinct,
    no_verdict,
    not_computed,
    seed_means,
    with_items,
)

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
    for (k,), g in group_rows(rows, "k").items():
        seen: dict[tuple, ComparisonRow] = {}
        for r in g:
            if not blind_by_design(r.searcher):
                seen.setdefault((r.objective, r.searcher, tuple(sorted(r.removed))), r)
        cells = list(seen.values())
        objs = sorted({r.objective for r in cells}, key=str)
        cond = condition_of(k=k) + " (all recoveries)"
        if len(objs) < 2 or any(sum(r.objective == o for r in cells) < 2 for o in objs):
            out.append(not_computed(*SHAPES, cond, 0.0, ">", note="needs 2 objectives with 2 cells each"))
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
    m = seed_means(acc, cells)
    return max(m, key=lambda s: m[s]), min(m, key=lambda s: m[s])


def _gap(acc: dict, choice: tuple[str, str], cells: list[ComparisonRow]) -> float:
    m = seed_means(acc, cells)
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
    for (k, rec), g in group_rows(rows, "k", "recovery").items():
        cond = condition_of(k=k, recovery=rec)
        cells = with_items(g, matrix)
        objs = sorted({r.objective for r in cells}, key=str)
        by = {(r.objective, r.searcher, r.seed): r.eval_key for r in cells if r.searcher not in blind}
        pairs = [
            (o1, o2, [(by[(o1, s, sd)], by[(o2, s, sd)]) for (o, s, sd) in by if o == o1 and (o2, s, sd) in by])
            for o1, o2 in combinations(objs, 2)
        ]
        pairs = [p for p in pairs if p[2]]
        if matrix is None or not pairs:
            out.append(
                not_computed(
                    *BEATS,
                    cond,
                    0.0,
                    ">",
                    NO_ITEMS if matrix is None else "no objective-guided (searcher, seed) under two objectives",
                )
            )
            continue
        if n_distinct(cells) < MIN_MODELS:
            out.append(no_verdict(*BEATS, cond, n_distinct(cells)))
            continue
        if not matrix.splittable():
            out.append(not_computed(*BEATS, cond, 0.0, ">", NO_SPLIT))
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
        out.append(boot_row(*BEATS, cond, point, boot, 0.0, ">", matrix.n_items))
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
    for (obj, k, rec), g in group_rows(rows, "objective", "k", "recovery").items():
        cond = condition_of(objective=obj, k=k, recovery=rec)
        cells = with_items(g, matrix)
        if matrix is None or len({r.searcher for r in cells}) < 2:
            out.append(
                not_computed(*SPREAD, cond, SMALL_GAP, "<", NO_ITEMS if matrix is None else "fewer than 2 searchers")
            )
            continue
        if n_distinct(cells) < MIN_MODELS:
            out.append(no_verdict(*SPREAD, cond, n_distinct(cells)))
            continue
        if not matrix.splittable():
            out.append(not_computed(*SPREAD, cond, SMALL_GAP, "<", NO_SPLIT))
            continue
        full = {key: matrix.mean_acc(key) for r in cells if (key := r.eval_key) is not None}  # all: with_items
        in_sample = _gap(full, _best_worst(full, cells), cells)
        point, boot = split_bootstrap_samples(
            matrix, partial(searcher_spread, cells=cells), n_boot, seed, keys=[r.eval_key for r in cells]
        )
        out.append(
            boot_row(
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
    for (obj, k, rec), g in group_rows(rows, "objective", "k", "recovery").items():
        g = distinct([r for r in g if r.has("mean_acc") and r.calib_value is not None])
        cond = condition_of(objective=obj, k=k, recovery=rec) + f" (n={len(g)})"
        if len(g) < MIN_MODELS:
            out.append(no_verdict(*CALIB, cond, len(g)))
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
    for (obj,), g in group_rows(rows, "objective").items():
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
    for (obj, k, rec), g in group_rows(rows, "objective", "k", "recovery").items():
        cond = condition_of(objective=obj, k=k, recovery=rec)
        cells = with_items(g, matrix)
        cx = list(dict.fromkeys(r.eval_key for r in cells if cost_class(r.searcher) == "complex"))
        sm = list(dict.fromkeys(r.eval_key for r in cells if cost_class(r.searcher) == "simple"))
        if matrix is None or not cx or not sm or not matrix.splittable():
            out.append(
                not_computed(
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
        out.append(boot_row(COST[0] + ": accuracy gain", COST[1], cond, point, boot, SMALL_GAP, "<", matrix.n_items))
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
