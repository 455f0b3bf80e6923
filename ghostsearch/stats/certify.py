"""The certification rule of ``ghostsearch target``: the largest k whose quality drop is below a
stated target, with the probability of certifying a k whose true drop is at or above it at most
alpha = 1 - level. Pure functions over per-item differences; numpy only, no model, no run.

**Per k, a one-sided non-inferiority test.** For each candidate k (its removed set fixed by the
search, its repair fitted on repair data that no evaluation reads), the paired per-item
difference d_i (dense minus pruned for an accuracy, pruned minus dense per-token NLL for a
perplexity: a larger d is a larger drop) estimates the drop. H0_k: drop_k >= delta against
H1_k: drop_k < delta, at the full level alpha.

**Group-sequential looks.** Items come in looks (``looks``: items per model at each look, prefixes
of one draw). At look j the statistic is Z_j = (delta - estimate_j) / se_j, and H0_k is rejected
(the k is *certified*) when Z_j >= c_j, the one-sided boundaries of a Lan-DeMets spending
function (``stats.spend``: O'Brien-Fleming or Pocock type) at the planned information fractions
looks / looks[-1] (``stats.spending_bounds`` with ``sides=1``: P_H0(Z_i < c_i for i < j, Z_j >= c_j) =
spend(t_j) - spend(t_{j-1}), so the total is alpha). Equivalently the repeated upper confidence
bound ub_j = estimate_j + c_j se_j lies below delta; these bounds hold at every look at once, so the
bound reported where the looks stopped is valid after early stopping. A k stops early for
futility (non-binding: the boundaries assume it never happens, so it only removes chances to
reject) when its repeated lower bound estimate_j - c_j se_j is at or above delta, or, from half the
design on, when its estimate is at or above delta.

**Across k, fixed-sequence.** The ks are tested in increasing order, each at the full alpha; the
first k not certified ends the procedure, and the answer is the last certified k (0 when the
first fails). Every error needs a rejected true null: let j be the first k in the order whose
H0 is true; certifying any k >= j requires rejecting H0_j first, so P(any true H0 rejected) <=
P(H0_j rejected) <= alpha, whatever the drops' shape in k (non-monotone included). In particular
P(the certified k's true drop >= delta) <= alpha. See docs/target.md.

Without strata every item is one stratum; with ``strata`` (an accuracy over several tasks) the
estimate is the macro mean over tasks and se the stratified item-level one (``stats.paired_test``).

**0/1 items (an accuracy): the null's least se.** A difference of two 0/1 answers is -1, 0 or 1, and
when the models rarely disagree the sample variance is near 0 (exactly 0 when they never do): the
z test then certifies on a handful of items although the data cannot exclude a drop of delta (with
P(d = 1) = delta = 0.02 and no d = -1, 400 items are all 0 with probability 0.98^400 = 3e-4, but 100
items with probability 0.13). Measured before this rule, at a true drop exactly delta = 0.02 with
the default looks: certified 20.7% of the time instead of <= 5% (73% with looks 16/32/64). Under
H0 a drop of at least delta forces disagreement, and so variance: a stratum's differences with mean
m have variance >= |m| (1 - |m|), so the estimate's variance under the null is at least
``null_se(delta, ...)``^2 (the least over every H0 configuration at the boundary; ``null_se``).
With ``Sample.binary`` the test uses se = max(observed se, null se) (``judged_se``): Z_j = (delta - estimate) /
se never exceeds the Wald statistic, so the rule only gets more conservative where the Wald one
was too bold, and the repeated upper bound estimate + c_j se is still what certification compares.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, fields
from typing import Any

import numpy as np

from ghostsearch.core.errors import GhostsearchError
from ghostsearch.core.records import required_fields
from ghostsearch.stats import inference as stats

SPENDINGS = ("obrien-fleming", "pocock")


def one_sided(looks: Sequence[int], alpha: float, spending: str) -> list[float]:
    """The one-sided critical z of each look of a design (items per model at each look):
    ``stats.spending_bounds`` with ``sides=1`` at the fractions looks / looks[-1]."""
    return stats.spending_bounds([n / looks[-1] for n in looks], alpha, spending, sides=1)


@dataclass(frozen=True)
class Sample:
    """A k's paired per-item differences on the first n items of the draw (a larger value is a
    larger drop), with each item's stratum (task) or None."""

    diff: np.ndarray
    strata: np.ndarray | None = None
    binary: bool = False  # differences of 0/1 items (an accuracy): -1, 0 or 1; se floored at null_se


def null_se(delta: float, counts: Sequence[int]) -> float:
    """The least se of the (macro) mean of 0/1 items' differences that a drop of exactly ``delta``
    allows, over strata of ``counts`` items with equal weights w = 1 / len(counts).

    A stratum with mean m has per-item variance >= g(m) = |m| (1 - |m|) (d in {-1, 0, 1}), so the
    estimate's variance is >= sum_t w^2 g(m_t) / n_t subject to sum_t w m_t = delta. g is concave on
    [-1, 0] and on [0, 1], so the least is where every m_t but one is -1, 0 or 1 (no variance) and one
    stratum u carries the rest: |m_u| w = x with x = delta mod w or w - (delta mod w), and
    w^2 g(m_u) = x (w - x) either way; the smallest n_u is the largest stratum. One stratum: delta
    (1 - delta) / n. Zero when delta is a multiple of w (a task of weight w flipped entirely)."""
    if not counts or delta <= 0:
        return 0.0
    w = 1.0 / len(counts)
    x = math.fmod(delta, w)
    return math.sqrt(max(x * (w - x), 0.0) / max(counts))


def drop_estimate(s: Sample) -> tuple[float, float]:
    """(estimate, se) of the drop: the (macro) mean of the differences and its stratified se."""
    if s.strata is None:  # one stratum: the same numbers as stats.paired_test, without its bookkeeping
        n = len(s.diff)
        if n == 0 or np.isnan(s.diff).any():
            raise ValueError("the items' differences must be a non-empty array without NaN")
        total, squares = float(np.add.reduce(s.diff)), float(np.dot(s.diff, s.diff))
        mean = total / n
        var = max(squares - total * mean, 0.0) / (n - 1) if n > 1 else 0.0
        return mean, math.sqrt(var / n)
    t = stats.paired_test(s.diff, np.zeros(len(s.diff)), s.strata)
    return float(t.estimate), float(t.se)


def judged_se(s: Sample, delta: float) -> tuple[float, float]:
    """(estimate, the se the test uses): ``drop_estimate``'s, floored at ``null_se`` for 0/1 items."""
    est, se = drop_estimate(s)
    if s.binary:
        if not np.isin(s.diff, (-1.0, 0.0, 1.0)).all():
            raise ValueError("a binary sample's differences must be -1, 0 or 1 (differences of 0/1 items)")
        counts = [len(s.diff)] if s.strata is None else list(np.unique(np.asarray(s.strata), return_counts=True)[1])
        se = max(se, null_se(delta, counts))
    return est, se


@dataclass(frozen=True)
class KVerdict:
    """One k as the rule judged it. ``estimate``, ``se``, ``upper`` (the repeated one-sided upper
    bound, valid after early stopping) and ``items`` are at the look it stopped at (``looks``,
    1-based count of looks run); ``stop``: certified | futility | last look | not tested."""

    k: int
    removed: list[int]
    certified: bool
    stop: str
    estimate: float | None = None
    se: float | None = None
    upper: float | None = None
    items: int = 0
    looks: int = 0
    estimate_by_look: list[float] | None = None
    upper_by_look: list[float] | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> KVerdict:
        _check_keys(cls, d, "a k's verdict")
        return cls(**d)


@dataclass(frozen=True)
class Certification:
    """The rule's answer: every k judged (in order; the ks after the first failure are ``not
    tested``), the certified k (0: none) with its removed set, and the first failed k with its
    estimate. ``delta`` is on the test's scale (a perplexity ratio r is log r: see ``metric_delta``)."""

    metric: str
    delta: float
    level: float
    spending: str
    design: list[int]  # items per model at each look
    bounds: list[float]  # the one-sided c_j per look
    ks: list[KVerdict]
    certified_k: int
    removed: list[int]
    estimate: float | None  # the certified k's, with its upper bound (None when none certified)
    upper: float | None
    first_failed_k: int | None
    first_failed_estimate: float | None
    first_failed_upper: float | None

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["ks"] = [v.to_dict() for v in self.ks]
        return out

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Certification:
        _check_keys(cls, d, "a certification")
        return cls(**{**d, "ks": [KVerdict.from_dict(v) for v in d["ks"]]})

    def items_used(self) -> int:
        """Items per model the largest judged k used (the dense model's count: every k's items are a
        prefix of the same draw)."""
        return max((v.items for v in self.ks), default=0)


def _check_keys(cls, d: Mapping[str, Any], what: str) -> None:
    names = [f.name for f in fields(cls)]
    required = required_fields(cls)
    unknown = [k for k in d if k not in names]
    missing = [k for k in required if k not in d]
    if unknown or missing:
        raise GhostsearchError(f"{what}: unknown keys {unknown}, missing keys {missing}; it has {', '.join(names)}")


def judge_k(
    k: int,
    removed: Sequence[int],
    sample: Callable[[int], Sample],
    looks: Sequence[int],
    delta: float,
    alpha: float,
    spending: str = "obrien-fleming",
    futility: bool = True,
) -> KVerdict:
    """The one-sided group-sequential test of H0: drop >= ``delta`` for one k; ``sample(n)`` gives its
    differences on the first n items (called once per look, in increasing n)."""
    bounds = one_sided(looks, alpha, spending)
    if len(bounds) != len(looks):
        raise AssertionError("one bound per look")
    ests: list[float] = []
    ubs: list[float] = []
    est = se = ub = math.nan
    for j, (n, c) in enumerate(zip(looks, bounds)):
        est, se = judged_se(sample(n), delta)
        ub = est + c * se
        ests.append(est)
        ubs.append(ub)
        done = j + 1 == len(looks)
        if ub < delta:
            stop = "certified"
        elif done:
            stop = "last look"
        elif futility and (est - c * se >= delta or (n >= looks[-1] / 2 and est >= delta)):
            stop = "futility"
        else:
            continue
        return KVerdict(k, list(removed), stop == "certified", stop, est, se, ub, n, j + 1, ests, ubs)
    raise AssertionError("unreachable: the last look always decides")


def certify(
    ks: Sequence[int],
    removed: Mapping[int, Sequence[int]],
    sample: Callable[[int, int], Sample],
    looks: Sequence[int],
    delta: float,
    level: float = stats.LEVEL,
    spending: str = "obrien-fleming",
    metric: str = "drop",
    futility: bool = True,
) -> Certification:
    """The fixed-sequence rule over ``ks`` in increasing order (``removed[k]``: each k's set;
    ``sample(k, n)``: its differences on the first n items). Stops at the first k not certified."""
    if list(ks) != sorted(set(ks)) or not ks or ks[0] < 1:
        raise GhostsearchError(f"target ks {list(ks)}: give distinct ks >= 1 in increasing order")
    if not looks or any(b <= a for a, b in zip(looks, looks[1:])) or looks[0] < 2:
        raise GhostsearchError(f"target looks {list(looks)}: give increasing item counts, the first >= 2")
    if not 0.5 < level < 1:
        raise GhostsearchError(f"target.level={level}: give a level in (0.5, 1), e.g. 0.95")
    if spending not in SPENDINGS:
        raise GhostsearchError(f"spending {spending!r}: choose from {', '.join(SPENDINGS)}")
    alpha = 1 - level
    verdicts: list[KVerdict] = []
    failed: KVerdict | None = None
    for k in ks:
        if failed is not None:
            verdicts.append(KVerdict(k, list(removed[k]), False, "not tested"))
            continue
        v = judge_k(k, removed[k], functools.partial(sample, k), looks, delta, alpha, spending, futility)
        verdicts.append(v)
        if not v.certified:
            failed = v
    good = [v for v in verdicts if v.certified]
    best = good[-1] if good else None
    return Certification(
        metric=metric,
        delta=delta,
        level=level,
        spending=spending,
        design=list(looks),
        bounds=one_sided(looks, alpha, spending),
        ks=verdicts,
        certified_k=best.k if best else 0,
        removed=list(best.removed) if best else [],
        estimate=best.estimate if best else None,
        upper=best.upper if best else None,
        first_failed_k=failed.k if failed else None,
        first_failed_estimate=failed.estimate if failed else None,
        first_failed_upper=failed.upper if failed else None,
    )


def certify_matrix(
    diffs: np.ndarray,
    looks: Sequence[int],
    delta: float,
    level: float = stats.LEVEL,
    ks: Sequence[int] | None = None,
    strata: np.ndarray | None = None,
    spending: str = "obrien-fleming",
    futility: bool = True,
    binary: bool = False,
) -> Certification:
    """:func:`certify` over an item matrix: ``diffs[i]`` the per-item differences of the i-th k of
    ``ks`` (default 1..len(diffs)), on the same items (columns, in draw order); ``binary``: of 0/1 items."""
    diffs = np.asarray(diffs, dtype=float)
    ks = list(ks) if ks is not None else list(range(1, len(diffs) + 1))
    row = {k: i for i, k in enumerate(ks)}
    return certify(
        ks,
        {k: [] for k in ks},
        lambda k, n: Sample(diffs[row[k], :n], None if strata is None else np.asarray(strata)[:n], binary),
        looks,
        delta,
        level,
        spending,
        futility=futility,
    )


# ---------------------------------------------------------------- metrics
def metric_delta(metric: str, max_drop: float | None = None, max_ratio: float | None = None) -> float:
    """The target on the test's scale. An accuracy (``mean_acc`` or ``<task>_acc``) with ``max_drop``:
    delta = max_drop, on dense minus pruned accuracy. A perplexity (``ppl_<set>``) with ``max_ratio`` r:
    ppl_pruned / ppl_dense <= r  <=>  mean per-token NLL_pruned - mean per-token NLL_dense <= log r,
    so delta = log r on the per-window difference of mean per-token NLLs (every window has the same
    number of predicted tokens, so their mean is the corpus's mean per-token NLL)."""
    if metric.startswith("ppl_"):
        if max_ratio is None or max_drop is not None:
            raise GhostsearchError(f"target.quality: a perplexity ({metric}) takes max_ratio (e.g. 1.25), not max_drop")
        if not max_ratio > 1:
            raise GhostsearchError(f"target.quality.max_ratio={max_ratio}: give a ratio above 1, e.g. 1.25")
        return math.log(max_ratio)
    if max_drop is None or max_ratio is not None:
        raise GhostsearchError(f"target.quality: an accuracy ({metric}) takes max_drop (e.g. 0.02), not max_ratio")
    if not 0 < max_drop < 1:
        raise GhostsearchError(f"target.quality.max_drop={max_drop}: give a drop in (0, 1), e.g. 0.02")
    return float(max_drop)
