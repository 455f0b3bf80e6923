"""What scoring an objective returns (``Scorer.score`` / ``Scorer.score_rows``), kept apart from the
computing code: plain records with no torch, so that the pool's broker, its clients and a stand-in
scorer (bench/scale.py) read and send them without importing a model library."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Score:
    """What ``Scorer.score`` returns: the objective's value of the model with ``removed`` removed
    on the fidelity's rows, the tokens it was computed on, the seconds it took, and the boundary
    the run started from (its cached prefix)."""

    value: float
    tokens: int
    seconds: float
    start: int


@dataclass(frozen=True)
class RowScore:
    """What ``Scorer.score_rows`` returns (racing): per requested row, in the order asked, its loss
    sum and count; the tokens scored, the seconds it took, and the boundary the run started from."""

    sums: list[float]
    counts: list[float]
    tokens: int
    seconds: float
    start: int
