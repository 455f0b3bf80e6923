"""A cell of a grid (:class:`CellSpec`: searcher, objective, k, seed; what compare's grid lists, the
run recipe checks and ``runner.run_cell`` runs) and its name (:func:`cell_name`); a cell's result:
what ``runner.run_cell`` gives for one cell, and what compare, the report and result.json read
back. On disk it is JSON (RUN_DIR/cells/<cell>.json, result.json's ``cells``), written by
:meth:`CellResult.to_dict` and read by :meth:`CellResult.from_dict`, which also reads the cells of
run directories written before a field was added (``race``; ``history``, ``model`` ... in hand-made
or planning stand-ins)."""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any


def cell_name(searcher: str, objective: str, k: int, seed: int) -> str:
    """The one name of a (searcher, objective, k, seed) cell: ledger rows, result.json, cells/*.json."""
    return f"{searcher}-{objective}-k{k}-s{seed}"


@dataclass(frozen=True)
class CellSpec:
    """One cell of a grid: the searcher, the objective, k and the seed it runs with."""

    searcher: str
    objective: str
    k: int
    seed: int

    @property
    def name(self) -> str:
        return cell_name(self.searcher, self.objective, self.k, self.seed)

    def to_dict(self) -> dict[str, Any]:
        return {"searcher": self.searcher, "objective": self.objective, "k": self.k, "seed": self.seed}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> CellSpec:
        """From the dict form; a key that is not a field is an error, a missing one too."""
        unknown = sorted(set(d) - {f.name for f in fields(cls)})
        if unknown:
            raise ValueError(f"not fields of a cell: {', '.join(unknown)}")
        return cls(**d)


def grid_cells(cfg: Any) -> list[CellSpec]:
    """The one grid rule (compare runs it, plan counts it): every objective x k x seed x searcher of
    ``cfg.compare``, each list the config's single value where compare names none, in this order."""
    c = cfg.compare

    def pick(many, one):
        return [one] if many is None else many

    return [
        CellSpec(searcher=s, objective=o, k=k, seed=sd)
        for o in pick(c.objectives, cfg.objective)
        for k in pick(c.ks, cfg.k)
        for sd in pick(c.seeds, cfg.seed)
        for s in pick(c.searchers, cfg.searcher)
    ]


@dataclass(frozen=True)
class HistoryPoint:
    """The searcher's best value after a told candidate: budget spent so far, seconds since the cell
    started by which that candidate's evaluation and every earlier point's had finished (non-decreasing
    along the history: a batch's evaluations finish out of order), and the best value (None: no k-set
    yet)."""

    budget_used: float
    seconds: float
    best_value: float | None

    def to_dict(self) -> dict[str, Any]:
        return {"budget_used": self.budget_used, "seconds": self.seconds, "best_value": self.best_value}


@dataclass(frozen=True, kw_only=True)
class CellResult:
    """One cell's result. Fields with a default may be missing from older files."""

    cell: str  # rundir.cell_name(searcher, objective, k, seed)
    searcher: str
    objective: str
    k: int
    seed: int
    removed: tuple[int, ...]  # the answer: the removed blocks
    value: float  # its calibration value (lower is better)
    evaluations: int  # the pool's evaluations for this cell (cache hits included)
    budget_used: float  # full-evaluation equivalents the searcher spent
    cache_hits: int
    wall_seconds: float
    history: tuple[HistoryPoint, ...] = ()
    model: dict[str, Any] | None = None  # {"name", "blocks", "dtype"}: a record of what ran, not read back
    direction: str = "lower is better"
    dense_value: float | None = None  # the dense model's value on the same calibration data
    relative_change: float | None = None  # (value - dense_value) / |dense_value|
    budget_mode: str | None = None  # "own" or "matched" (compare.budget)
    budget: float | None = None  # the searcher's evaluation budget (None: ends by itself)
    warm_start: tuple[tuple[int, ...], ...] = ()
    race: dict[str, Any] | None = None  # search.race_report.race_report: raced or exact, rows, cut

    def to_dict(self) -> dict[str, Any]:
        """The JSON form (RUN_DIR/cells/<cell>.json, result.json's ``cells``): lists for tuples."""
        out: dict[str, Any] = {f.name: getattr(self, f.name) for f in fields(self)}
        out["removed"] = list(self.removed)
        out["history"] = [h.to_dict() for h in self.history]
        out["warm_start"] = [list(w) for w in self.warm_start]
        return out

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> CellResult:
        """From the JSON form; a key that is not a field is an error (a misspelt or foreign record)."""
        names = {f.name for f in fields(cls)}
        unknown = sorted(set(d) - names)
        if unknown:
            raise ValueError(f"not fields of a cell result: {', '.join(unknown)}")
        kw = dict(d)
        kw["removed"] = tuple(d["removed"])
        kw["history"] = tuple(HistoryPoint(**h) for h in d.get("history") or ())
        kw["warm_start"] = tuple(tuple(w) for w in d.get("warm_start") or ())
        return cls(**kw)
