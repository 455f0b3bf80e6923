"""One row of the comparison table (RUN_DIR/comparison.parquet): the dense model, or one (cell, recovery).

The fixed columns are typed fields; the run-dependent ones (the downstream numbers in their flat
form, ``FinalistNumbers.to_dict``: per-task metrics, mean_acc, ppl_*, items_used, and
``delta_<metric>`` against the dense model) live in ``metrics``, in their column order.
:func:`to_arrow` gives the table compare writes (the same columns, order and types as the row dicts
it was built from: every column where the first row holding it puts it); :func:`from_arrow` reads
one back, a null metric cell being a column that row does not have."""

from __future__ import annotations

import difflib
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, fields
from typing import Any

import pyarrow as pa

from ghostsearch.core.errors import GhostsearchError

DENSE = "dense"  # the dense model's row: cell and searcher


def _search(default: Any = None) -> Any:
    """A column of the search's numbers: a cell's row has it, the dense row does not."""
    return field(default=default, metadata={"search": True})


@dataclass(frozen=True)
class ComparisonRow:
    """One row; the fields are the fixed columns in compare's column order (a field marked
    ``_search()`` is not in the dense row), ``metrics`` the run-dependent ones."""

    cell: str
    searcher: str
    objective: str | None = None
    k: int = 0
    seed: int | None = None
    removed: tuple[int, ...] = ()
    calib_value: float | None = None
    dense_calib_value: float | None = _search()
    calib_change: float | None = _search()
    evaluations: int | None = _search()
    budget_used: float | None = _search()
    budget_mode: str | None = _search()
    wall_seconds: float | None = _search()
    cache_hits: int | None = _search()
    recovery: str | None = "none"
    calibration_data: str | None = None
    held_out: str | None = None
    eval_key: str | None = None
    metrics: Mapping[str, float] = field(default_factory=dict)  # column -> value, in column order

    @property
    def is_dense(self) -> bool:
        return self.searcher == DENSE

    @property
    def rec(self) -> str:
        """The recovery, "none" where the row names none (older tables)."""
        return self.recovery or "none"

    def metric(self, name: str) -> float | None:
        """A run-dependent column's value (None where this row has no such column)."""
        return self.metrics.get(name)

    def has(self, name: str) -> bool:
        """The metric is there and a number (not None, not NaN)."""
        v = self.metrics.get(name)
        return v is not None and not math.isnan(v)

    def column(self, name: str) -> Any:
        """The value of the table's column ``name`` (a fixed field or a metric), as the table holds it."""
        if name in FIXED:
            return list(self.removed) if name == "removed" else getattr(self, name)
        return self.metrics.get(name)

    def to_dict(self) -> dict[str, Any]:
        """The row as compare builds it, keys in its column order: the dense row carries no search
        columns (dense_calib_value .. cache_hits)."""
        keys = DENSE_KEYS if self.is_dense else FIXED
        return {**{k: self.column(k) for k in keys}, **self.metrics}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> ComparisonRow:
        """The record of a row dict (a row of ``table.to_pylist()``). A key that is not a fixed column
        is a metric: a number, or None (the row has no such column). A non-number under an unknown
        key, or a key one typo from a fixed column, is a GhostsearchError naming it."""
        fixed: dict[str, Any] = {}
        metrics: dict[str, float] = {}
        for k, v in d.items():
            if k in FIXED:
                fixed[k] = tuple(v) if k == "removed" and v is not None else v
                continue
            near = difflib.get_close_matches(k, FIXED, n=1, cutoff=0.85)
            if near or (v is not None and (isinstance(v, bool) or not isinstance(v, (int, float)))):
                hint = f" (did you mean {near[0]!r}?)" if near else f" (a metric column holds a number, not {v!r})"
                raise GhostsearchError(f"comparison row: unknown key {k!r}{hint}")
            if v is not None:
                metrics[k] = v
        if "cell" not in fixed or "searcher" not in fixed:
            raise GhostsearchError(f"comparison row: needs 'cell' and 'searcher' (got {sorted(d)})")
        if fixed.get("removed") is None:
            fixed.pop("removed", None)
        return cls(**fixed, metrics=metrics)


# The column order compare builds: a cell's row (every fixed column), and the dense row (no search columns).
FIXED = tuple(f.name for f in fields(ComparisonRow) if f.name != "metrics")
DENSE_KEYS = tuple(f.name for f in fields(ComparisonRow) if f.name in FIXED and not f.metadata.get("search"))


def to_arrow(rows: Iterable[ComparisonRow]) -> pa.Table:
    """comparison.parquet's table: every column, where the first row holding it puts it."""
    dicts = [r.to_dict() for r in rows]
    names = list(dict.fromkeys(k for r in dicts for k in r))
    return pa.Table.from_pylist([{k: r.get(k) for k in names} for r in dicts])


def from_arrow(table: pa.Table) -> list[ComparisonRow]:
    """The rows of a comparison table (as read from comparison.parquet)."""
    return [ComparisonRow.from_dict(d) for d in table.to_pylist()]
