"""Adaptive evaluation: items in looks, each contrast tested after every look, decided ones stop.

A design is ``eval.looks`` (items per model at each look, prefixes of the run's draw,
``ghostsearch.data.items``: look j's items contain look j-1's) and the run's pre-registered contrasts
(``compare.contrasts``: pairs of evaluated models, by eval_key). After look j every contrast still
open is tested on the items of look j (``stats.paired_test``: paired z of the macro mean over tasks,
item variance within tasks), and the family is decided by ``stats.sequential_holm`` (Holm across
the contrasts, Lan-DeMets ``eval.spending`` boundaries at the planned information fractions
looks / looks[-1], levels recycled from rejected contrasts). A rejected contrast is decided and
stops consuming items; a model stops when every contrast it is in is decided (models in no
contrast get the first look); the run stops when every contrast is decided or the last look
(``eval.max_items`` at most) has run. Without contrasts the design is fixed: every item of the draw.

A contrast can also be decided the other way, with a margin (``eval.margin``, delta: the smallest
difference in mean accuracy that matters, stated before the run). After look j a contrast still open
is decided "within +-delta" when its repeated confidence interval, estimate +- c_j * se with c_j the
look's boundary at the Bonferroni level alpha / m (m contrasts; Jennison & Turnbull's RCIs, which
cover the true difference at every look at once), lies inside (-delta, +delta). The family-wise rate
of a false "within" (a contrast whose true |difference| >= delta) is then at most alpha. The stop is
non-binding: it only removes chances to reject, so the rejection rule keeps its alpha; a "within"
passes no level on. Without a margin only rejections decide.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field, fields
from typing import Any

import numpy as np

from ghostsearch.core.errors import GhostsearchError
from ghostsearch.stats import inference as stats

MIN_ITEMS_PER_TASK = 2  # a look whose items give some task fewer is not tested (its z is NaN: not decided)


@dataclass
class Contrast:
    name: str
    left_key: str
    right_key: str


@dataclass(frozen=True)
class ContrastRow:
    """One contrast as the looks decided it: a row of RUN_DIR/looks.json's ``contrasts`` (and of
    result.json's ``adaptive``), written by ``Design.table`` and read by the report. ``to_dict`` is
    the JSON row, its keys in this order; ``from_dict`` refuses a key that is not a field."""

    contrast: str
    left_key: str
    right_key: str
    decided: bool
    verdict: str  # differs | within margin | open
    decided_at_look: int | None  # 1-based; None while open
    look_items: int  # items per model at the look reported (the deciding one, else the last run)
    estimate: float
    z: float
    se: float
    level: float  # the local level and bound of the sequential Holm rule there
    bound: float
    sign: int  # of a rejected contrast's z (0 otherwise)
    z_by_look: list[float]
    margin: float | None
    rci: list[float]  # the repeated confidence interval at that look (NaN without a margin)
    rci_level: float | None
    items_left: int | None
    items_right: int | None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> ContrastRow:
        names = [f.name for f in fields(cls)]
        unknown = [k for k in d if k not in names]
        missing = [k for k in names if k not in d]
        if unknown or missing:
            raise GhostsearchError(
                f"looks.json contrast row: unknown keys {unknown}, missing keys {missing}; "
                f"a row has exactly {', '.join(names)}"
            )
        return cls(**d)


@dataclass
class Design:
    looks: list[int]  # items per model at each look
    contrasts: list[Contrast]
    alpha: float = stats.ALPHA
    spending: str = "obrien-fleming"
    margin: float | None = None  # eval.margin: "within +-margin" decides a contrast too (None: never)
    z: list[list[float]] = field(default_factory=list)  # [contrast][look], NaN where not tested
    estimate: list[list[float]] = field(default_factory=list)
    se: list[list[float]] = field(default_factory=list)
    decisions: list = field(default_factory=list)  # stats.SequentialDecision per contrast
    within_at: list = field(default_factory=list)  # per contrast: the look (0-based) it was
    # decided within +-margin, else None

    def __post_init__(self):
        self.z = self.z or [[math.nan] * len(self.looks) for _ in self.contrasts]
        self.estimate = self.estimate or [[math.nan] * len(self.looks) for _ in self.contrasts]
        self.se = self.se or [[math.nan] * len(self.looks) for _ in self.contrasts]
        self.within_at = self.within_at or [None] * len(self.contrasts)
        if self.margin is not None and not 0 < self.margin < 1:
            raise ValueError(f"margin={self.margin}: a difference in mean accuracy, between 0 and 1")

    @property
    def fractions(self) -> list[float]:
        return [n / self.looks[-1] for n in self.looks]

    def rejected(self) -> list[bool]:
        """Contrasts decided to differ (the sequential Holm rule)."""
        return [bool(d.rejected) for d in self.decisions] if self.decisions else [False] * len(self.contrasts)

    def decided(self) -> list[bool]:
        """Contrasts decided either way: they differ, or lie within +-margin."""
        return [r or w is not None for r, w in zip(self.rejected(), self.within_at)]

    def rci_bounds(self) -> list[float]:
        """c_j of every look for the repeated confidence intervals of the margin rule (level alpha / m)."""
        return list(stats.spending_bounds(self.fractions, self.alpha / max(len(self.contrasts), 1), self.spending))

    def open_keys(self) -> set[str]:
        """Models in at least one contrast not yet decided."""
        return {k for c, done in zip(self.contrasts, self.decided()) if not done for k in (c.left_key, c.right_key)}

    def test(self, look: int, correct: dict[str, dict], items: Sequence[tuple[str, int]]) -> None:
        """Tests every open contrast on ``items`` (the look's (task, doc) keys) from ``correct``
        ({eval_key: {(task, doc): 0/1}}), then decides the family on every look so far."""
        strata = np.array([t for t, _ in items])
        # a task with one item has no variance estimate (stats.stratified_var counts it as 0), and a
        # zero standard error turns any difference into |z| = inf: such a look tests nothing
        testable = len(items) > 0 and np.unique(strata, return_counts=True)[1].min() >= MIN_ITEMS_PER_TASK
        for i, (c, done) in enumerate(zip(self.contrasts, self.decided())):
            if done:
                continue
            a = np.array([correct[c.left_key][it] for it in items], dtype=float)
            b = np.array([correct[c.right_key][it] for it in items], dtype=float)
            t = stats.paired_test(a, b, strata)
            self.z[i][look] = t.z if testable and t.se > 0 else math.nan
            self.estimate[i][look] = t.estimate
            self.se[i][look] = t.se
        zs = [[z if j <= look else math.nan for j, z in enumerate(row)] for row in self.z]
        self.decisions = stats.sequential_holm(zs, self.fractions, self.alpha, self.spending)
        if self.margin is not None:
            bound = self.rci_bounds()[look]
            for i, done in enumerate(self.decided()):
                z, est, se = self.z[i][look], self.estimate[i][look], self.se[i][look]
                if not done and not math.isnan(z) and abs(est) + bound * se < self.margin:
                    self.within_at[i] = look

    def finished(self) -> bool:
        return bool(self.contrasts) and all(self.decided())

    def table(self, items_used: dict[str, int], looks_run: int) -> list[ContrastRow]:
        """One row per contrast: the look (1-based) at which it was decided, its estimate and z there
        (or at the last look run), the local level and bound, the items each side used."""
        out = []
        rci = self.rci_bounds() if self.margin is not None else []
        for i, c in enumerate(self.contrasts):
            d = self.decisions[i] if self.decisions else None
            rejected, w = d is not None and bool(d.rejected), self.within_at[i]
            at = d.look if d is not None and rejected and d.look is not None else w if w is not None else looks_run - 1
            half = rci[at] * self.se[i][at] if rci else math.nan
            out.append(
                ContrastRow(
                    contrast=c.name,
                    left_key=c.left_key,
                    right_key=c.right_key,
                    decided=rejected or w is not None,
                    verdict="differs" if rejected else "within margin" if w is not None else "open",
                    decided_at_look=at + 1 if rejected or w is not None else None,
                    look_items=self.looks[at],
                    estimate=self.estimate[i][at],
                    z=self.z[i][at],
                    se=self.se[i][at],
                    level=d.alpha if d else math.nan,
                    bound=d.bound if d else math.nan,
                    sign=d.sign if d is not None and rejected else 0,
                    z_by_look=self.z[i][:looks_run],
                    margin=self.margin,
                    rci=[self.estimate[i][at] - half, self.estimate[i][at] + half],
                    rci_level=1 - self.alpha / len(self.contrasts) if rci else None,
                    items_left=items_used.get(c.left_key),
                    items_right=items_used.get(c.right_key),
                )
            )
        return out


def as_contrast(c) -> Contrast:
    """A Contrast from compare's ContrastPair (name, left_key, right_key) or a 3-tuple."""
    if isinstance(c, Contrast):
        return c
    if isinstance(c, (tuple, list)):
        return Contrast(*c)
    return Contrast(c.name, c.left_key, c.right_key)
