"""The study's verdicts, computed from a compare run (never written by hand).

Inputs: the rows of ``RUN_DIR/comparison.parquet`` (one per cell and recovery, plus the dense row)
and, for the accuracy claims, an :class:`ItemMatrix` built from ``RUN_DIR/eval_items.parquet``
(per-item correctness, joined to the rows by ``eval_key``). Every claim function returns rows
(:class:`ClaimRow`: claim, paper, condition, ours, lo, hi, rule, verdict, plus ``note``; ``p`` where
the row is tested; ``ClaimRow.to_dict`` is the row as written). The rows of one run are ONE family
(:func:`family`): Holm's step-down adjustment at family-wise level 0.05 over every tested row, each
row's interval shown at its Holm level, its verdict from its adjusted p. :func:`render` prints them
as one Markdown table (applying :func:`family` to rows not yet adjusted). The statistics come from
:mod:`ghostsearch.stats.inference` and :mod:`ghostsearch.stats.bootstrap` (the item matrix and its
bootstraps). This module holds what every claim shares: the row, the decision rule, the family,
the grouping of a run's rows, claims built from paired models, and the Markdown table; each
paper's claims are a module beside it (``search_paper``, ``ghosted_paper``).
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

import numpy as np

from ghostsearch.core.comparison_row import ComparisonRow
from ghostsearch.stats import inference as stats
from ghostsearch.stats.bootstrap import ItemMatrix, boot_p, item_bootstrap_samples
from ghostsearch.stats.inference import percentile as _percentile

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


def boot_row(claim, paper, cond, point, boot, threshold, direction, n_items, note=None) -> ClaimRow:
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


def finalists(rows: list[ComparisonRow]) -> list[ComparisonRow]:
    """The comparison's rows without the dense model."""
    return [r for r in rows if not r.is_dense]


def group_rows(rows: list[ComparisonRow], *fields) -> dict[tuple, list[ComparisonRow]]:
    out = defaultdict(list)
    for r in finalists(rows):
        out[tuple(r.rec if f == "recovery" else getattr(r, f) for f in fields)].append(r)
    return dict(sorted(out.items(), key=lambda kv: tuple(str(x) for x in kv[0])))


def condition_of(**kw) -> str:
    return ", ".join(f"{v}" if k == "objective" else f"{k}={v}" if k == "k" else f"recovery {v}" for k, v in kw.items())


def not_computed(claim, paper, condition, threshold, direction, note=NO_ITEMS) -> ClaimRow:
    return claim_row(claim, paper, condition, None, None, None, threshold, direction, note=note)


def no_verdict(claim, paper, condition, n: int) -> ClaimRow:
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


def with_items(rows: list[ComparisonRow], matrix: ItemMatrix | None) -> list[ComparisonRow]:
    return [] if matrix is None else [r for r in rows if r.eval_key in matrix]


def n_distinct(cells: list[ComparisonRow]) -> int:
    return len(distinct(cells))


def seed_means(acc: dict, cells: list[ComparisonRow]) -> dict[str, float]:
    """Seed-averaged accuracy per searcher."""
    by = defaultdict(list)
    for r in cells:
        by[r.searcher].append(acc[r.eval_key])
    return {s: sum(v) / len(v) for s, v in by.items()}


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
                not_computed(
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
                not_computed(
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


def fmt(v, places: int = 3) -> str:
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
            + ", ".join(f"{s} {fmt(v, 1)}" for s, v in ppl.items())
            + (f" (lowest: {min(ppl, key=lambda s: ppl[s] or math.inf)})" if ppl else "")
        )
    return recovery_comparison(matrix, pairs), lines


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
