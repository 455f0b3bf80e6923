"""A cell's best-so-far curve, read from the ledger: the one rule the report's plots and budget table
(study/report/summary.py) and bench/search.py share.

Along a cell's rows in time order, the budget used grows by each row's ``cost`` (a race block charges
its own rows, n / N of an evaluation) or, where a row has none, its ``fidelity``; the best value is
that of the best full-fidelity k-set so far (``search.base.new_best``: full fidelity, exactly the
cell's k blocks, lower). The cell's k is the ledger's ``cell_k`` column, else (a ledger written before
that column) the k in the cell's name (``cell_name``: ``<searcher>-<objective>-k<k>-s<seed>``), else
the largest set the cell scored.
"""

from __future__ import annotations

import math
import re
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Sequence

from ghostsearch.rundir.ledger import read_ledger
from ghostsearch.search.base import new_best

_NAME_K = re.compile(r"-k(\d+)-s-?\d+$")


@dataclass(frozen=True)
class Curve:
    """A cell's best full-fidelity value so far (``best``) after each evaluation that had one: the
    budget used by then (``evaluations``) and the seconds since its first (``seconds``). ``k``: the
    cell's k; ``used`` and ``wall``: the budget and seconds of all its rows (also those after its last
    improvement)."""

    evaluations: list[float]
    seconds: list[float]
    best: list[float]
    k: int = 0
    used: float = 0.0
    wall: float = 0.0

    @property
    def final(self) -> float:
        """The cell's best value (inf: no full-fidelity k-set yet)."""
        return self.best[-1] if self.best else math.inf

    def improvements(self) -> list[tuple[float, float, float]]:
        """(budget used, seconds, best) at each evaluation where the best value went down."""
        out: list[tuple[float, float, float]] = []
        for e, s, b in zip(self.evaluations, self.seconds, self.best):
            if not out or b < out[-1][2]:
                out.append((e, s, b))
        return out

    def reach(self, target: float, rel: float = 1e-9) -> tuple[float, float] | None:
        """(budget used, seconds) when the best first came within ``rel`` (relative) of ``target``
        (lower is better; either sign), None if it never did."""
        for e, s, b in self.improvements():
            if b <= target + rel * abs(target):
                return e, s
        return None


def cell_k(cell: str, rows: Sequence[Mapping[str, Any]]) -> int:
    """The k of a cell from its ledger rows: their ``cell_k`` column, else its name's ``-k<k>-``, else
    the largest set it scored (greedy and beam also score smaller sets on the way)."""
    ks = {int(v) for r in rows if (v := r.get("cell_k")) is not None}
    if len(ks) > 1:
        raise ValueError(f"ledger: cell {cell!r} has rows of different k: {sorted(ks)}")
    if ks:
        return ks.pop()
    m = _NAME_K.search(cell)
    return int(m.group(1)) if m else max(len(r["removed"]) for r in rows)


def curve(cell: str, rows: Sequence[Mapping[str, Any]]) -> Curve:
    """One cell's curve from its ledger rows (any order)."""
    rs = sorted(rows, key=lambda r: r["time"])
    k = cell_k(cell, rs)
    t0, used, best = rs[0]["time"], 0.0, math.inf
    ev, sec, val = [], [], []
    for r in rs:
        used += r.get("cost") or r["fidelity"]  # a race block (racing) costs its own rows
        if new_best(r["removed"], r["fidelity"], r["value"], k, best):
            best = r["value"]
        if best < math.inf:
            ev.append(used)
            sec.append(r["time"] - t0)
            val.append(best)
    return Curve(evaluations=ev, seconds=sec, best=val, k=k, used=used, wall=rs[-1]["time"] - t0)


def best_so_far(run_dir: str | Path, objective: str | None = None) -> dict[str, Curve]:
    """Per cell of the run's ledger (``objective``: only that objective's rows), its :class:`Curve`."""
    by: defaultdict[str, list[dict]] = defaultdict(list)
    for r in read_ledger(run_dir).to_pylist():
        if objective is None or r["objective"] == objective:
            by[r["cell"]].append(r)
    return {cell: curve(cell, rs) for cell, rs in by.items()}
