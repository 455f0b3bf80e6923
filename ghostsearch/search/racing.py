"""Racing: paired successive elimination of a batch of candidates on calibration rows.

Every candidate of a race is scored on the same calibration rows, in one fixed seeded order
(``order``), look after look: rows [0, n_1), then [n_1, n_2), ... (``schedule``); a row scored at one
look is never scored again. After each look the per-row loss sums are compared in pairs: for
candidates a and b on the n of N rows seen so far, d_r = loss_r(a) - loss_r(b), and a is
*confidently worse* than b when ``mean(d) - radius > 0``. A candidate confidently worse than
``keep`` others is dropped; survivors go on; every survivor ends at full fidelity, where the
comparison is exact (n = N: the mean over all rows is the value's ordering itself).

The radius (``bound``), both with the finite-population correction (the N calibration rows are
the whole population and the race draws them without replacement in a random order):

* ``t`` (default): ``t_{1-alpha, n-1} * sd(d) / sqrt(n) * sqrt(1 - n/N)``, a one-sided Student-t
  bound: an approximation, accurate when the mean of the seen differences is close to normal.
  Measured (tests/search/test_racing_bound.py): false drops <= delta for normal, t(2), t(3) and
  near-tied differences at 8-128 rows. It cannot hold when a few rows decide the ordering and
  none of them has been seen yet (the outlier-row case: the best loses slightly on 7 of 8 rows and
  wins by a lot on the 8th). No rule that looks only at the rows seen can: a hidden row of any
  size is possible, and it stays unseen with probability (N - n) / N.
* ``serfling``: an empirical-Bernstein-Serfling bound (Bardenet & Maillard 2015, Theorem 3) or the
  Hoeffding-Serfling bound, whichever is tighter, each at alpha / 2; valid whatever the
  distribution of the differences, given ``range``: the width of an interval every per-row loss
  difference lies in (in loss-sum units), which the user states. It holds in the outlier-row case
  when ``range`` covers the outlier; its price is in docs/searchers.md (racing).

``alpha = delta / (keep * (m - 1) * (looks - 1))``: a union bound over the winners, their m - 1
rivals and the looks before the last (the last look is exact and spends nothing), so a true
top-``keep`` candidate is dropped with probability at most ``delta`` under the bound's condition.

The ranking of two candidates follows the sign of sum_r d_r when the objective's value is
increasing in its loss sum at a fixed count and the per-row counts do not depend on the candidate
(perplexity, margin and kl: they do not).

Cost: a candidate scored on n of N rows costs n / N full-evaluation equivalents (fidelity n / N),
so raced and exact scoring spend the same budget unit. A race costs at most its number of
candidates (every one at full fidelity): a searcher asks for a race it can afford, and no
candidate is dropped without the bound. ``cut`` (off unless a searcher names it) is a separate
heuristic with no guarantee: spend at most ``cut``; when the next look for every survivor would
leave too little for ``keep`` survivors to finish, the survivors with the worst partial mean are
cut (before any row when even the first look is unaffordable: those are not scored). Cut
candidates are listed in ``Outcome.cut`` and counted in the result (result.json); in the ledger
they are what any raced candidate stopped early is: rows of partial fidelity, never an answer. (No
ledger column marks them apart: the ledger is append-only and a cut is decided after the
candidate's last row is written; a marker row would be charged as budget by the readers.)
"""

from __future__ import annotations

import json
import math
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Protocol, Sequence

import numpy as np
from scipy import stats

from ghostsearch.core.errors import GhostsearchError
from ghostsearch.search.base import Candidate, Removed

AUTO_ROWS = 32  # race: auto races when the calibration has at least this many rows, else scores exactly
LOOK_FLOOR_S = 1e-3  # look_rows 'auto': a measured look overhead below this is no cost (timing noise)
MIN_LOOKS = 4  # look_rows 'auto': looks timed (probe and rest) before the estimate is made and frozen
EARLY_LOOKS = 2  # look_rows 'auto': looks timed before the estimate may freeze early (no look of the race can pay)
BOUNDS = ("t", "serfling")
KAPPA = 7.0 / 3.0 + 3.0 / math.sqrt(2.0)  # the empirical-Bernstein-Serfling constant (Bardenet & Maillard 2015)


@dataclass(frozen=True)
class RaceParams:
    """``race`` of a searcher's parameters: ``auto`` (the default), ``true``, ``false`` or
    ``{delta: .., min_rows: .., growth: .., bound: .., range: ..}``.

    delta:    the race's error probability (a true top-``keep`` candidate dropped), default 0.05.
    min_rows: rows every candidate is scored on before the first look (default 4; at least 2).
    growth:   each look multiplies the rows seen by this factor (default 2: looks at 4, 8, 16 ... rows).
    order_seed: the seed of the row order (the same for every searcher, so races share the cache).
    bound:    't' (Student-t, an approximation) or 'serfling' (distribution-free given ``range``).
    range:    serfling: the width of an interval every per-row loss difference lies in.
    look_rows: a look's fixed cost (broker round trip, scheduling, a forward's launch) in rows of one
              candidate (default 0: every look is taken), or 'auto' (``race: auto``'s): measured
              (``LookCosts``: every look taken until MIN_LOOKS looks are timed, each as a
              one-survivor probe and the rest, or EARLY_LOOKS when they show that no later look of
              the race can pay; then a look's fixed cost over a row's, frozen for the search and
              kept in the run directory for a resume). A look before the last is
              skipped, its rows scored with the next look's, when the rows it could save,
              (survivors - keep) x the next look's new rows, are fewer than ``look_rows`` (issue 40:
              on a fast scorer a look costs more than the rows it can save). With every look but
              the last skipped a race is exact scoring (one call, every candidate on every row): not
              racing. Skipping a look only removes comparisons, so the bound's guarantee (alpha
              split over the schedule's looks) holds as it is."""

    delta: float = 0.05
    min_rows: int = 4
    growth: float = 2.0
    order_seed: int = 0
    bound: str = "t"
    range: float | None = None
    look_rows: float | str = 0.0

    def __post_init__(self):
        if not 0 < self.delta < 1:
            raise ValueError("race.delta must be in (0, 1)")
        if isinstance(self.min_rows, bool) or int(self.min_rows) != self.min_rows or self.min_rows < 2:
            raise ValueError("race.min_rows must be an integer >= 2")
        if self.growth <= 1:
            raise ValueError("race.growth must be > 1")
        if self.bound not in BOUNDS:
            raise ValueError(f"race.bound must be one of {', '.join(BOUNDS)}")
        if self.look_rows != "auto" and not (
            isinstance(self.look_rows, (int, float)) and not isinstance(self.look_rows, bool) and self.look_rows >= 0
        ):
            raise ValueError("race.look_rows must be 'auto' or >= 0 (a look's fixed cost in rows of one candidate)")
        if self.bound == "serfling" and not (self.range is not None and self.range > 0):
            raise ValueError("race.bound 'serfling' needs race.range > 0 (the width of the per-row loss differences)")

    def schedule(self, n_rows: int) -> list[int]:
        """Rows seen at each look: min_rows, x growth ..., ending at n_rows."""
        out, n = [], min(self.min_rows, n_rows)
        while n < n_rows:
            out.append(n)
            n = max(n + 1, math.ceil(n * self.growth))
        return out + [n_rows]

    def order(self, n_rows: int) -> np.ndarray:
        return np.random.default_rng([self.order_seed, n_rows]).permutation(n_rows)

    def take(self, looks: Sequence[int], j: int, alive: int, keep: int, measured: float | None = None) -> bool:
        """Whether the look at ``looks[j]`` is taken with ``alive`` survivors: always the last, and
        a look before it when the rows it could save pay for it (``look_rows``; 'auto': ``measured``,
        LookCosts.look_rows(), every look while there is none)."""
        cost = (measured or 0.0) if self.look_rows == "auto" else float(self.look_rows)
        if j + 1 >= len(looks) or cost <= 0:
            return True
        return (alive - keep) * (looks[j + 1] - looks[j]) >= cost


@dataclass
class LookCosts:
    """What a look costs, measured on one search's first races (``look_rows: auto``): until the
    estimate is made, every look of 3 or more survivors is scored in two evaluator calls, one
    survivor (the probe: x = its new rows) and the rest (x = the others' rows), each timed with
    ``clock``; a call answered in part from a cache (the evaluator's ``cache_hits`` counter moved: a
    resumed run's ledger, the pool's shared cache) is not timed. Each pair solves seconds =
    look_s + row_s * x for one look; once MIN_LOOKS pairs are in, the estimate is their medians
    (robust to a call slowed by the machine), frozen for the search. The fixed cost is priced at
    its lower bound, ``low`` = look_s less twice its standard error (from the pairs' spread): where
    ``low`` is at least LOOK_FLOOR_S and one row's cost, ``look_rows() = low / row_s``; else 0 (every
    look taken, as with no estimate and as ``race: true``: a CPU scorer's races take the same looks,
    so a resumed run replays them). Rows that cost nothing measurable (``row_s`` <= 0) with a fixed cost that stands
    out: infinite (every look but the last skipped: no racing). Splitting a look changes no ledger
    row (each candidate's block is the same) and no decision.

    Stopping early: from EARLY_LOOKS pairs on, when the estimate so far (the fixed cost at its lower
    bound over the median row cost) prices a look above ``most``, the most rows any later look of
    the race being measured could save (its survivors before this look's drops, times the largest
    block of new rows still to come), no later look of that race can pay: the estimate is frozen
    there (``early``), not after MIN_LOOKS pairs, so a scorer whose looks cannot pay spends two timed
    looks, not four, before it stops taking them. Not early on an infinite estimate (median row cost
    not positive: probe calls the machine slowed make a pair's row cost negative; measured on). Later
    races are priced by that estimate as by any (``no_look_pays``: with their own candidates).

    ``taken`` counts the looks taken by ``look_rows: auto`` races; the estimate is in force from the
    look after the one that froze it (``frozen['after']``), so a run that replays it takes every
    look before that point, as the measuring run did. ``path`` (``LookCosts.kept``: the run
    directory's ``looks/<cell>.json``): where the estimate is written once frozen and read back
    when the run resumes, so that a resumed run takes the interrupted run's looks instead of
    measuring again (it times nothing then)."""

    clock: Callable[[], float] = time.perf_counter
    look_s: list[float] = field(default_factory=list)  # per timed pair
    row_s: list[float] = field(default_factory=list)
    frozen: dict | None = None  # the estimate, once made: look_s, row_s, looks, look_rows, after, early
    taken: int = 0  # looks taken so far by look_rows: auto races
    path: Path | None = None  # where the estimate is kept (written once frozen)

    @classmethod
    def kept(cls, path: str | Path, **kw) -> LookCosts:
        """A LookCosts kept at ``path``: the estimate read back from it when a run made one there."""
        path = Path(path)
        frozen = json.loads(path.read_text()) if path.exists() else None
        return cls(frozen=frozen, path=path, **kw)

    @property
    def measuring(self) -> bool:
        return self.frozen is None

    def add(self, x_probe: float, s_probe: float, x_rest: float, s_rest: float, most: float | None = None) -> None:
        """One look's pair of calls: sizes (survivors x new rows) and seconds; ``most``: the most rows
        a later look of this race could save (stopping early; None: never)."""
        if self.frozen is not None or x_rest <= x_probe:
            return
        row_s = (s_rest - s_probe) / (x_rest - x_probe)
        self.row_s.append(row_s)
        self.look_s.append(s_probe - row_s * x_probe)
        est = self.fit()
        if len(self.look_s) >= MIN_LOOKS:
            self.freeze(est)
        elif most and len(self.look_s) >= EARLY_LOOKS and most < est["look_rows"] < math.inf:
            self.freeze(est, early=True)  # no later look of this race can pay

    def freeze(self, est: dict, early: bool = False) -> None:
        """Make ``est`` the search's estimate, in force from the next look; written to ``path``."""
        pairs = [[b, r] for b, r in zip(self.look_s, self.row_s)]
        self.frozen = {**est, "after": self.taken + 1, "early": early, "pairs": pairs}
        if self.path is not None:
            from ghostsearch.core.io import write_json_atomic

            self.path.parent.mkdir(parents=True, exist_ok=True)
            write_json_atomic(self.path, self.frozen)

    def fit(self) -> dict:
        b, c = np.array(self.look_s), np.array(self.row_s)
        look_s, row_s = float(np.median(b)), float(np.median(c))
        sd = 1.4826 * float(np.median(np.abs(b - look_s)))  # the pairs' spread (MAD)
        low = look_s - 2 * 1.2533 * sd / math.sqrt(len(b))  # the median's lower bound (2 standard errors)
        if low < max(LOOK_FLOOR_S, row_s):  # not a cost that stands out, or under one row: every look
            rows = 0.0
        else:
            rows = low / row_s if row_s > 0 else math.inf
        return {"look_s": look_s, "row_s": row_s, "looks": len(b), "look_rows": rows, "low_s": low}

    def look_rows(self) -> float | None:
        """A look's fixed cost in rows of one candidate, once estimated and in force (None before)."""
        if self.frozen is None or self.taken < int(self.frozen.get("after", 0)):
            return None
        return float(self.frozen["look_rows"])


def race_params(value: Any, n_rows: int | None = None) -> RaceParams | None:
    """A searcher's ``race`` parameter: False/None (off), True (defaults), a dict of RaceParams, or
    'auto': on when the calibration has at least AUTO_ROWS rows (``n_rows``), else off (and off when
    the evaluator gives no per-row losses: ``n_rows`` None); on, its looks are priced by measurement
    (``look_rows: auto``): where a look costs more than the rows it could save, it is not taken, and
    where that holds for every look (a scorer whose per-look overhead dominates) nothing is raced."""
    if value is None or value is False:
        return None
    if value == "auto":
        return RaceParams(look_rows="auto") if n_rows is not None and n_rows >= AUTO_ROWS else None
    if value is True:
        return RaceParams()
    if isinstance(value, RaceParams):
        return value
    if not isinstance(value, dict):
        raise ValueError("race must be auto, true, false or a mapping such as {delta: 0.05}")
    known = set(RaceParams.__dataclass_fields__)
    unknown = sorted(set(value) - known)
    if unknown:
        raise ValueError(f"race has no parameter {unknown[0]!r}; known: {', '.join(sorted(known))}")
    return RaceParams(**value)


@dataclass(frozen=True)
class Race:
    """What a searcher's ``ask`` returns to race ``candidates`` instead of scoring them all: the
    ``keep`` best end at full fidelity. It costs at most ``len(candidates)`` (the searcher must
    afford that), unless ``cut`` names the partial-mean heuristic's spending cap (no guarantee; see
    the module docstring). Candidates first in the list are kept first when a cut comes before any
    row is scored."""

    candidates: list[Candidate]
    params: RaceParams
    keep: int = 1
    cut: float | None = None

    @property
    def cost(self) -> float:
        """The most this race can spend."""
        return float(len(self.candidates)) if self.cut is None else min(self.cut, float(len(self.candidates)))


@dataclass(frozen=True)
class RowRequest:
    """Score ``removed`` on the calibration rows ``rows`` (a block of the race order). ``start``:
    rows it was scored on before in this race; ``before``: their (loss sum, count), so that the
    evaluator can give the partial value on every row seen."""

    removed: Removed
    prefix: Removed | None
    rows: tuple[int, ...]
    start: int = 0
    before: tuple[float, float] = (0.0, 0.0)

    @property
    def seen(self) -> int:
        return self.start + len(self.rows)


class RowEvaluator(Protocol):
    """What racing scores through: per-row loss sums of blocks of calibration rows.
    Optionally ``cut(candidates, values, searcher)``: told the candidates the ``cut`` heuristic cut
    (no built-in evaluator implements it; the pool's client records them in the result only)."""

    def n_rows(self) -> int: ...

    def rows(self, requests: Sequence[RowRequest], searcher: str) -> list[tuple[list[float], list[float], float]]:
        """Per request: the per-row loss sums and counts of its rows (in order), and the candidate's
        value on every row seen so far (its partial value; the full value once all rows are seen).
        All requests of one look come in one call."""
        ...


@dataclass
class Outcome:
    """The race's result: every scored candidate at the fidelity it reached, and its value there
    (partial below 1: flagged in the ledger, never an answer); ``cut``: those of them the ``cut``
    heuristic dropped on their partial mean (never the bound's doing)."""

    told: list[Candidate] = field(default_factory=list)
    values: list[float] = field(default_factory=list)
    unscored: list[Candidate] = field(default_factory=list)
    cut: list[Candidate] = field(default_factory=list)


def no_look_pays(race: Race, n_rows: int, costs: LookCosts | None) -> bool:
    """A ``look_rows: auto`` race whose measured look cost is above what any look before the last
    could save, even with every candidate alive: no look would be taken, so the race is exact
    scoring (the loop scores its candidates exactly instead: ``auto`` does not race there)."""
    measured = costs.look_rows() if costs is not None else None
    if race.params.look_rows != "auto" or measured is None or race.cut is not None:
        return False
    looks = race.params.schedule(n_rows)
    keep = max(1, min(race.keep, len(race.candidates)))
    return not any(race.params.take(looks, j, len(race.candidates), keep, measured) for j in range(len(looks) - 1))


def race_alpha(delta: float, keep: int, m: int, n_looks: int) -> float:
    """Per comparison: delta split over the winners, their m - 1 rivals and the looks before the last."""
    return delta / (keep * max(1, m - 1) * max(1, n_looks - 1))


def radius(D: np.ndarray, n_total: int, alpha: float, params: RaceParams) -> np.ndarray:
    """The bound's radius for the mean of the paired differences D [..., n] (n < n_total rows seen)."""
    n = D.shape[-1]
    if params.bound == "serfling" and params.range is not None:  # (RaceParams refuses serfling without a range)
        rho = 1 - (n - 1) / n_total if n <= n_total / 2 else (1 - n / n_total) * (1 + 1 / n)
        log = math.log(2 * 5 / alpha)  # Bernstein at alpha / 2 (its own log(5 / .)); Hoeffding at alpha / 2
        bern = D.std(-1) * math.sqrt(2 * rho * log / n) + KAPPA * params.range * log / n
        hoeff = params.range * math.sqrt(rho * math.log(2 / alpha) / (2 * n))
        return np.minimum(bern, hoeff)
    return stats.t.ppf(1 - alpha, n - 1) * D.std(-1, ddof=1) / math.sqrt(n) * math.sqrt(1 - n / n_total)


def confidently_worse(X: np.ndarray, n_total: int, alpha: float, params: RaceParams | None = None) -> np.ndarray:
    """W[..., a, b] = True when a is confidently worse than b on the rows of X ([..., m, n] per-row
    sums; leading dimensions are independent races). Exact once every row is seen."""
    n = X.shape[-1]
    D = X[..., :, None, :] - X[..., None, :, :]
    mean = D.mean(-1)
    if n >= n_total:
        return mean > 0
    scale = 1e-12 * (1 + np.abs(X).mean(axis=(-2, -1)))[..., None, None]
    return mean - radius(D, n_total, alpha, params or RaceParams()) > scale


def simulate(
    X: np.ndarray, params: RaceParams, keep: int = 1, alphas: Sequence[float] | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """Run ``X.shape[0]`` races at once on given per-row losses X [races, m, N] (rows already in
    race order), as ``run_race`` decides them: (alive [races, m] at the end, cost [races]).
    ``alphas``: each look's level before the last (the last is exact), if not ``race_alpha``'s even
    split; how bench/race_replay.py prices other splits fixed before the data."""
    R, m, N = X.shape
    looks = params.schedule(N)
    if alphas is None:
        alphas = [race_alpha(params.delta, keep, m, len(looks))] * (len(looks) - 1)
    if len(alphas) != len(looks) - 1:
        raise ValueError(f"simulate: {len(alphas)} alphas for {len(looks) - 1} looks before the last")
    alive, cost = np.ones((R, m), bool), np.zeros(R)
    seen = np.zeros(R, int)  # rows scored per race (a skipped look's rows go with the next look)
    for j, n in enumerate(looks):
        take = np.array([params.take(looks, j, int(a), keep) for a in alive.sum(1)])
        if not take.any():
            continue
        cost += np.where(take, alive.sum(1) * (n - seen) / N, 0.0)
        seen = np.where(take, n, seen)
        a = float(alphas[j]) if j < len(alphas) else 1.0  # (the last look compares exactly: no alpha)
        if a > 0:  # a look given no alpha drops nothing
            W = confidently_worse(X[..., :n], N, a, params) & alive[:, None, :]
            alive &= (W.sum(-1) < keep) | ~take[:, None]
    return alive, cost


def timed_rows(evaluator: RowEvaluator, reqs: list[RowRequest], searcher: str, clock: Callable[[], float]):
    """``evaluator.rows(reqs)`` and its seconds (None when the evaluator's ``cache_hits`` moved: some
    answer came from a cache, not computed)."""
    hits = getattr(evaluator, "cache_hits", None)
    t0 = clock()
    out = evaluator.rows(reqs, searcher)
    return out, (clock() - t0 if getattr(evaluator, "cache_hits", None) == hits else None)


def score_look(evaluator: RowEvaluator, reqs: list[RowRequest], searcher: str, timing: LookCosts | None, most: int):
    """One look's answers; with ``timing`` (a ``look_rows: auto`` race's LookCosts) the look is
    counted, and while it measures, a look of 3 or more survivors is timed as a probe and the rest
    (``most``: the most rows a later look of this race could save, for stopping early)."""
    if timing is None:
        return evaluator.rows(reqs, searcher)
    if timing.measuring and len(reqs) >= 3:
        probe, s_probe = timed_rows(evaluator, reqs[:1], searcher, timing.clock)
        rest, s_rest = timed_rows(evaluator, reqs[1:], searcher, timing.clock)
        answers = probe + rest
        if s_probe is not None and s_rest is not None:
            new = len(reqs[0].rows)
            timing.add(new, s_probe, (len(reqs) - 1) * new, s_rest, most=most)
    else:
        answers = evaluator.rows(reqs, searcher)
    timing.taken += 1  # the estimate comes in force by this count (frozen['after'])
    return answers


def run_race(race: Race, evaluator: RowEvaluator, searcher: str, costs: LookCosts | None = None) -> Outcome:
    """Race ``race.candidates`` through ``evaluator`` (deterministic: ties go to the smaller set).
    ``costs``: the search's LookCosts, which times the first looks of races with ``look_rows: auto``
    and then prices their looks (without it 'auto' takes every look)."""
    N = int(evaluator.n_rows())
    p, cands = race.params, list(race.candidates)
    if N < 2:
        raise GhostsearchError(f"racing needs at least 2 calibration rows, got {N}; raise calibration.n_seq")
    order, looks = p.order(N), p.schedule(N)
    keep = max(1, min(race.keep, len(cands)))
    if race.cost < keep - 1e-9:
        raise RuntimeError(f"{searcher}: a race keeping {keep} needs a cut of at least {keep}, got {race.cost:g}")
    alpha = race_alpha(p.delta, keep, len(cands), len(looks))
    alive = list(range(len(cands)))
    timing = costs if p.look_rows == "auto" else None  # the search's LookCosts, counting and timing this race's looks
    rows: list[list[float]] = [[] for _ in cands]
    seen = [(0.0, 0.0)] * len(cands)  # per candidate: (loss sum, count) over its rows so far
    value = [math.nan] * len(cands)
    cut: list[int] = []
    left, n = race.cost, 0
    for j, nxt in enumerate(looks):
        if not p.take(looks, j, len(alive), keep, costs.look_rows() if costs is not None else None):
            continue  # its rows go with the next look's
        if race.cut is not None:  # the heuristic: afford this look and leave enough for `keep` to finish
            fit = max(1, int((left - keep * (N - nxt) / N) / ((nxt - n) / N) + 1e-9))
            if len(alive) > fit:
                ranked = sorted(alive, key=lambda i: (np.mean(rows[i]) if rows[i] else 0.0, i))
                cut += [i for i in ranked[fit:] if rows[i]]
                alive = sorted(ranked[:fit])
        block = tuple(int(r) for r in order[n:nxt])
        reqs = [RowRequest(cands[i].removed, cands[i].prefix, block, n, seen[i]) for i in alive]
        gaps = [looks[i + 1] - looks[i] for i in range(j + 1, len(looks) - 1)]  # later looks' new rows, skippable
        answers = score_look(evaluator, reqs, searcher, timing, (len(alive) - keep) * max(gaps, default=0))
        for i, (sums, counts, v) in zip(alive, answers):
            rows[i] += list(sums)
            seen[i] = (seen[i][0] + float(np.sum(sums)), seen[i][1] + float(np.sum(counts)))
            value[i] = float(v)
        left -= len(alive) * (nxt - n) / N
        n = nxt
        worse = confidently_worse(np.array([rows[i] for i in alive]), N, alpha, p).sum(1)
        alive = [i for i, w in zip(alive, worse) if w < keep]
        if n == N:
            break
    out = Outcome()
    for i, c in enumerate(cands):
        if rows[i]:
            out.told.append(Candidate(c.removed, fidelity=len(rows[i]) / N, prefix=c.prefix))
            out.values.append(value[i])
            if i in cut:
                out.cut.append(out.told[-1])
        else:
            out.unscored.append(c)
    if out.cut and hasattr(evaluator, "cut"):
        evaluator.cut(out.cut, [out.values[out.told.index(c)] for c in out.cut], searcher)
    return out


def rank(candidates: Sequence[Candidate], values: Sequence[float]) -> list[tuple[bool, float, Removed]]:
    """Told candidates best first: full-fidelity values first (by value, then set), then partial ones."""
    return sorted((c.fidelity < 1.0, v if v == v else math.inf, c.removed) for c, v in zip(candidates, values))
