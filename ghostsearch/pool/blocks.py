"""Racing's arithmetic on the pool's side: how a look's block of calibration rows (a
``search.racing.RowRequest``) becomes the race's partial value and a ledger row's numbers.

A block of n of the N calibration rows, ending at the ``seen``-th row of the race order, has
fidelity seen / N and charges n / N full-evaluation equivalents (``cost``); below N rows seen its
value is ``partial`` (on the rows seen so far, never an answer). That value is the objective's
value of the loss sums and counts of every row seen: the block's own plus the race's ``before``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Sequence

from ghostsearch.objectives import ObjectiveSpec
from ghostsearch.search import Candidate
from ghostsearch.search.racing import RowRequest


@dataclass(frozen=True)
class RaceBlocks:
    """``value_of(loss sum, count)``: the objective's value; ``row_counts``: per calibration row,
    its loss count (the dense model's, the same for every candidate)."""

    value_of: Callable[[float, float], float]
    row_counts: tuple[float, ...]

    @classmethod
    def of(cls, spec: ObjectiveSpec, row_counts: Sequence[float]) -> RaceBlocks:
        return cls(spec.build().value, tuple(float(n) for n in row_counts))

    @property
    def n_rows(self) -> int:
        return len(self.row_counts)

    def fidelity(self, q: RowRequest) -> float:
        return q.seen / self.n_rows

    def candidate(self, q: RowRequest) -> Candidate:
        """The block as the ledger records it: the candidate at the fidelity it reached."""
        return Candidate(q.removed, fidelity=self.fidelity(q), prefix=q.prefix)

    def counts(self, q: RowRequest) -> list[float]:
        return [self.row_counts[j] for j in q.rows]

    def value(self, q: RowRequest, sums: Sequence[float]) -> float:
        """The value on every row seen so far: before this block and this block's ``sums``."""
        return self.value_of(q.before[0] + sum(sums), q.before[1] + sum(self.counts(q)))

    def cost(self, q: RowRequest) -> float:
        return len(q.rows) / self.n_rows

    def partial(self, q: RowRequest) -> bool:
        return q.seen < self.n_rows
