"""beam: width-B iterative deletion. greedy (SLEB-style) is the same search with B = 1."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, ClassVar

from ghostsearch.search.base import BUDGET, ESTIMATE, EXACT, Candidate, Removed, Space, canonical, greedy_cost
from ghostsearch.search.common import Memo, require_ints
from ghostsearch.search.racing import Race, race_params, rank


class Beam(Memo):
    """Step t (t = 1..k) asks R ∪ {j} for every kept set R of size t-1 and every free j not in R,
    each with R as its prefix hint; sets reached from two beams are asked once (the better-ranked
    parent is the hint). The ``width`` best sets of size t are kept (ties: the smaller tuple).
    After k steps the best k-set is the answer. With ``race`` (``auto``, the default: when the
    calibration has >= 32 rows) each step races its candidates (keeping ``width``) instead of
    scoring them all at full fidelity (search/racing.py)."""

    name = "beam"
    ends_by_itself = True  # k rounds of width-limited expansion
    uses_prefix = True  # R + {j} starts from R's cached hidden states
    uses_seed = False  # no random draw: a function of the values told
    cost_class: ClassVar[str | None] = "complex"

    @dataclass
    class Params:
        width: int = 4
        race: bool | str | dict = "auto"  # auto (>= 32 rows), true, false, or {delta: .., bound: ..}

        def __post_init__(self):
            require_ints(self, "width")
            race_params(self.race)

    @staticmethod
    def width_of(params: Any) -> int:
        return getattr(params, "width", 1)

    @classmethod
    def min_budget(cls, space: Space, params: Any) -> float:
        """The most the k steps can cost (dedup only lowers it)."""
        n, B = len(space.free), cls.width_of(params)
        return sum(min(min(B, math.comb(n, t)) * (n - t), math.comb(n, t + 1)) for t in range(space.k))

    @classmethod
    def expected_evaluations(cls, space, params, budget=None, rows=None) -> tuple[float, str]:
        """width x greedy's cost, an estimate (dedup and early ties lower it)."""
        return float(cls.width_of(params) * greedy_cost(space)), ESTIMATE

    @classmethod
    def prefix_runs(cls, params: Any, k: int) -> int:
        """Each kept set's accepted prefix: width x (k - 1)."""
        return cls.width_of(params) * (k - 1)

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.beams: list[Removed] = [()]  # kept sets of the current size, best first

    def ask(self) -> list[Candidate] | Race:
        hint: dict[Removed, Removed] = {}
        for r in self.beams:
            for j in self.space.free:
                if j not in r:
                    hint.setdefault(canonical(r + (j,)), r)
        return self.raced([Candidate(s, prefix=p or None) for s, p in hint.items()], keep=self.width_of(self.params))

    def tell(self, candidates, values) -> None:
        super().tell(candidates, values)
        ranked = rank(candidates, values)  # full-fidelity first, NaN last
        self.beams = [s for _, _, s in ranked[: self.width_of(self.params)]]

    @property
    def done(self) -> bool:
        return len(self.beams[0]) == self.space.k


class Greedy(Beam):
    """SLEB-style iterative deletion: each step removes the block whose removal scores best."""

    name = "greedy"
    cost_class = None  # the reference, in neither group
    nested_path = True  # each accepted set is the one before plus a block

    @dataclass
    class Params:  # greedy is beam search of width 1
        race: bool | str | dict = "auto"

        def __post_init__(self):
            race_params(self.race)

    @classmethod
    def expected_evaluations(cls, space, params, budget=None, rows=None) -> tuple[float, str]:
        """greedy_cost exactly; raced (``race: auto`` from 32 rows), at most that."""
        raced = race_params(params.race, rows) is not None
        return float(greedy_cost(space)), BUDGET if raced else EXACT
