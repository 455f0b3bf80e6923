"""The certification rule's error rate, simulated (issue 47): which small-sample correction holds the
level, the least first look, and the reruns a person makes. Nulls drawn from real populations of
paired differences (:class:`Pop`, :func:`load`); the rule's arithmetic vectorised over replications
(:func:`judge`: per look each stratum's count and sums of d, d^2, d^3 -> ``certify.look_stats``,
``certify.corrected``, the spending bounds of ``certify.one_sided``; checked against
``certify.certify_matrix`` draw by draw in tests/target/test_level.py); :func:`rate`,
:func:`rerun_extend`, :func:`repairs_in_turn`. study/target_level.py builds the populations file
and the tables (bench/target_level.py prints them)."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ghostsearch.stats import certify as cert

PPL_DELTA = math.log(1.25)
ACC_DELTA = 0.02


@dataclass(frozen=True)
class Pop:
    """A null to draw from: ``values`` (one stratum, continuous: shifted to mean delta) or ``tasks``
    (0/1 items: per task (P(d = 1), P(d = -1)) already at the null, macro mean delta)."""

    name: str
    values: np.ndarray | None = None
    tasks: tuple[tuple[float, float], ...] | None = None

    @property
    def binary(self) -> bool:
        return self.tasks is not None

    @property
    def delta(self) -> float:
        return ACC_DELTA if self.binary else PPL_DELTA


def at_null_tasks(counts: list[tuple[int, int, int]], delta: float = ACC_DELTA) -> tuple[tuple[float, float], ...]:
    """Per task (lost, gained, n) -> (P(d=1), P(d=-1)) with every loss rate moved by one amount so that
    the macro mean drop is delta (a rate that would go below 0 stays at 0, the rest moves more)."""
    plus = np.array([a / n for a, _, n in counts])
    minus = np.array([b / n for _, b, n in counts])
    for _ in range(50):
        gap = delta - float((plus - minus).mean())
        if abs(gap) < 1e-12:
            break
        movable = plus > 0 if gap < 0 else np.ones_like(plus, dtype=bool)
        plus = np.maximum(plus + gap * len(plus) / movable.sum() * movable, 0.0)
    return tuple((float(p), float(m)) for p, m in zip(plus, minus))


def load(path: Path) -> dict[str, list[Pop]]:
    """The populations file (study/target_level.py builds it; bench/target_level.py --build writes
    it) as nulls to draw from: per-window differences (``ppl``, ``repairs``) and per-task counts moved
    to the null (``acc``), plus the constructed accuracy nulls."""
    data = json.loads(path.read_text())
    ppl = [Pop(n, values=np.array(v["values"], dtype=float)) for n, v in data["ppl"].items()]
    acc = [Pop(n, tasks=at_null_tasks([tuple(c) for c in v["counts"]])) for n, v in data["acc"].items()]
    acc += [
        Pop("constructed: one task, loses delta, never gains", tasks=((ACC_DELTA, 0.0),)),
        Pop(
            "constructed: one of 8 tasks carries delta (loses 8 delta)",
            tasks=((8 * ACC_DELTA, 0.0),) + ((0.0, 0.0),) * 7,
        ),
        Pop("constructed: 8 tasks each lose delta, never gain", tasks=((ACC_DELTA, 0.0),) * 8),
        Pop("constructed: 8 tasks each lose delta + 0.05, gain 0.05", tasks=((ACC_DELTA + 0.05, 0.05),) * 8),
    ]
    rep = {n: np.array(v["values"], dtype=float) for n, v in data["repairs"].items()}
    return {"ppl": ppl, "acc": acc, "repairs": [Pop(n, values=v) for n, v in rep.items()]}


# ---------------------------------------------------------------- the rule, vectorised
def draw(pop: Pop, reps: int, per_task: list[int], rng: np.random.Generator, idx: np.ndarray | None = None):
    """(reps, strata, n) differences at the null (0/1 items: per task, ``per_task[t]`` items)."""
    if pop.tasks is None:
        assert pop.values is not None
        v = pop.values - pop.values.mean() + pop.delta
        if idx is None:
            idx = rng.integers(0, len(v), size=(reps, per_task[0]))
        return v[idx][:, None, :]
    n = max(per_task)
    u = rng.random((reps, len(pop.tasks), n))
    p = np.array([t[0] for t in pop.tasks])[None, :, None]
    m = np.array([t[1] for t in pop.tasks])[None, :, None]
    return (u < p).astype(float) - (u >= 1 - m).astype(float)


def counts_at(looks: list[int], strata: int) -> list[list[int]]:
    """Items per stratum at each look: n split evenly, the remainder to the first strata."""
    return [[n // strata + (1 if t < n % strata else 0) for t in range(strata)] for n in looks]


def judge(
    d: np.ndarray,
    looks: list[int],
    delta: float,
    alpha: float,
    spending: str = "obrien-fleming",
    correction: str = cert.CORRECTION,
    binary: bool = False,
    futility: bool = True,
    bounds: list[float] | None = None,
    fixed_looks: int = 0,
) -> tuple[np.ndarray, np.ndarray]:
    """``judge_k`` on every replication at once: d (reps, strata, n) -> (certified, looks run).
    ``bounds``: the (normal) bounds, default the design's; the first ``fixed_looks`` looks take no
    futility stop (a continued test goes on past the looks an earlier run stopped at)."""
    reps, strata, _ = d.shape
    c = bounds if bounds is not None else cert.one_sided(looks, alpha, spending)
    per = counts_at(looks, strata)
    cs = [np.cumsum(d**p, axis=2) for p in (1, 2, 3)]
    alive = np.ones(reps, dtype=bool)
    certified = np.zeros(reps, dtype=bool)
    ran = np.zeros(reps, dtype=int)
    for j, (n, counts) in enumerate(zip(looks, per)):
        cnt = np.array(counts, dtype=float)
        s1, s2, s3 = (np.stack([x[:, t, counts[t] - 1] for t in range(strata)], axis=1) for x in cs)
        est, se, gamma, df = cert.look_stats(cnt[None, :], s1, s2, s3, delta, binary, correction != "z")
        cc = cert.corrected(c[j], df, gamma, correction)
        ub = est + cc * se
        ran[alive] = j + 1
        hit = alive & (ub < delta)
        certified |= hit
        alive &= ~hit
        if futility and j >= fixed_looks and j + 1 < len(looks):
            alive &= ~((est - cc * se >= delta) | ((n >= looks[-1] / 2) & (est >= delta)))
    return certified, ran


def rate(
    pop: Pop,
    looks: list[int],
    level: float = 0.95,
    correction: str = cert.CORRECTION,
    reps: int = 20_000,
    seed: int = 0,
    spending: str = "obrien-fleming",
    chunk: int = 4000,
) -> tuple[float, float]:
    """(the rate of certifying a k at the null, its MC SE)."""
    rng = np.random.default_rng(seed)
    strata = 1 if pop.tasks is None else len(pop.tasks)
    hits = 0
    for lo in range(0, reps, chunk):
        r = min(chunk, reps - lo)
        d = draw(pop, r, counts_at([looks[-1]], strata)[0], rng)
        hits += int(judge(d, looks, pop.delta, 1 - level, spending, correction, pop.binary)[0].sum())
    p = hits / reps
    return p, math.sqrt(max(p * (1 - p), 1e-12) / reps)


# ---------------------------------------------------------------- reruns
def continued_bounds(old: list[int], new: list[int], alpha: float, ran: int, spending: str = "obrien-fleming"):
    """A test continued on the same items with a larger design: the ``ran`` looks the first run made
    keep their bounds, the later looks of ``new`` spend what the spending function has left."""
    return cert.one_sided(new, alpha, spending, cert.one_sided(old, alpha, spending)[:ran])


def rerun_extend(
    pop: Pop,
    old: list[int],
    new: list[int],
    rule: str,
    level: float = 0.95,
    reps: int = 20_000,
    seed: int = 0,
    correction: str = cert.CORRECTION,
) -> tuple[float, float]:
    """A person's sequence: run with ``old`` looks; when nothing is certified, rerun with ``new`` looks.
    ``rule``: ``again`` (before issue 47: the rerun a new test at the full level on the same items),
    ``fresh`` (a new test at the full level on items the first did not read: independent items do not
    make two chances one), ``extend`` (the spending continued past the planned last look, the looks
    run keeping their bounds: what the account refuses), ``tries`` (two tests planned, target.tries: 2,
    each at alpha / 2, the second on the same items: what the account allows). The rate that some run
    certifies a k at the null, and its MC SE."""
    rng = np.random.default_rng(seed)
    alpha = 1 - level
    a1 = alpha / 2 if rule == "tries" else alpha
    assert pop.values is not None
    idx = rng.integers(0, len(pop.values), size=(reps, new[-1] + (old[-1] if rule == "fresh" else 0)))
    d = draw(pop, reps, [idx.shape[1]], rng, idx)
    first, ran = judge(d[:, :, : old[-1]], old, pop.delta, a1, correction=correction)
    second = np.zeros(reps, dtype=bool)
    if rule == "extend":
        for m in range(1, len(old) + 1):
            sel = ~first & (ran == m)
            if sel.any():
                b = continued_bounds(old, new, alpha, m)
                second[sel] = judge(d[sel, :, : new[-1]], new, pop.delta, alpha, bounds=b, fixed_looks=m)[0]
    elif rule == "fresh":
        second = judge(d[:, :, old[-1] :], new, pop.delta, alpha, correction=correction)[0]
    else:
        second = judge(d[:, :, : new[-1]], new, pop.delta, a1, correction=correction)[0]
    p = float((first | (~first & second)).mean())
    return p, math.sqrt(max(p * (1 - p), 1e-12) / reps)


def repairs_in_turn(
    pops: list[Pop],
    looks: list[int],
    rule: str,
    level: float = 0.95,
    reps: int = 20_000,
    seed: int = 0,
    correction: str = cert.CORRECTION,
) -> tuple[float, float]:
    """Try the repairs in turn on the same items until one certifies (every repair at the null):
    ``again`` (today's: each at the full level) or ``family`` (one family: each at alpha / m, as
    ``target.recovery: [..]`` or ``target.tries: m`` judge them)."""
    rng = np.random.default_rng(seed)
    alpha = (1 - level) / (len(pops) if rule == "family" else 1)
    n0 = len(pops[0].values)  # type: ignore[arg-type]
    idx = rng.integers(0, n0, size=(reps, looks[-1]))
    any_ = np.zeros(reps, dtype=bool)
    for pop in pops:
        any_ |= judge(draw(pop, reps, [looks[-1]], rng, idx), looks, pop.delta, alpha, correction=correction)[0]
    p = float(any_.mean())
    return p, math.sqrt(max(p * (1 - p), 1e-12) / reps)
