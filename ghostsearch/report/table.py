"""The comparison table (RUN_DIR/comparison.parquet): the dense model first, then one row per (cell, recovery)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pyarrow as pa

from ghostsearch.eval_numbers import FinalistNumbers
from ghostsearch.rundir.cell import CellResult

if TYPE_CHECKING:
    from ghostsearch.dataplan import DataPlan

ACC_KEYS = ("mean_acc", "ppl_wikitext2", "ppl_c4", "ppl_lambada")


def comparison_table(
    cfg,
    results: list[CellResult] | list[dict],
    evals: dict[tuple[str, str], FinalistNumbers],
    dense: FinalistNumbers | None = None,
    data_plan: DataPlan | None = None,
) -> pa.Table:
    """One row for the dense model (first), then one per (cell, recovery): the cell's search result,
    its downstream numbers (``evals``: by (cell, recovery); their numeric fields in their flat form,
    ``FinalistNumbers.to_dict``), and the change against the dense model (``delta_<metric>``). A
    result given in its JSON form (plan's stand-ins) is read as a CellResult first."""
    calib = {r.role.split(":", 1)[1]: r.used for r in data_plan.calibration} if data_plan else {}
    held_out = ",".join(data_plan.held_out) if data_plan else ""
    rows = []
    base = dense.to_dict() if dense is not None else {}

    def metrics(row, numbers: FinalistNumbers):
        row["eval_key"] = numbers.eval_key  # joins RUN_DIR/eval_items.parquet (column key)
        e = numbers.to_dict()
        for key, v in sorted(e.items()):
            if isinstance(v, (int, float)) and not isinstance(v, bool):
                row[key] = float(v)
        for key in ACC_KEYS:
            if base and key in e and key in base:
                row[f"delta_{key}"] = float(e[key]) - float(base[key])
        return row

    if dense is not None:
        rows.append(
            metrics(
                {
                    "cell": "dense",
                    "searcher": "dense",
                    "objective": None,
                    "k": 0,
                    "seed": None,
                    "removed": [],
                    "calib_value": None,
                    "recovery": "none",
                    "calibration_data": None,
                    "held_out": held_out,
                },
                dense,
            )
        )
    for r in (x if isinstance(x, CellResult) else CellResult.from_dict(x) for x in results):
        for rec in cfg.compare.recovery:
            e = evals.get((r.cell, rec), FinalistNumbers())
            row = {
                "cell": r.cell,
                "searcher": r.searcher,
                "objective": r.objective,
                "k": r.k,
                "seed": r.seed,
                "removed": list(r.removed),
                "calib_value": r.value,
                "dense_calib_value": r.dense_value,
                "calib_change": r.relative_change,
                "evaluations": r.evaluations,
                "budget_used": r.budget_used,
                "budget_mode": r.budget_mode,
                "wall_seconds": r.wall_seconds,
                "cache_hits": r.cache_hits,
                "recovery": rec,
                "calibration_data": calib.get(r.objective),
                "held_out": held_out,
            }
            rows.append(metrics(row, e))
    names = list(dict.fromkeys(k for r in rows for k in r))  # every column, whichever row has it first
    return pa.Table.from_pylist([{k: r.get(k) for k in names} for r in rows])
