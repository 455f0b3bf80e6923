"""The comparison table (RUN_DIR/comparison.parquet): the dense model first, then one row per (cell, recovery)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pyarrow as pa

from ghostsearch.core.comparison_row import DENSE, ComparisonRow, to_arrow
from ghostsearch.core.eval_numbers import FinalistNumbers
from ghostsearch.rundir.cell import CellResult

if TYPE_CHECKING:
    from ghostsearch.data.dataplan import DataPlan

ACC_KEYS = ("mean_acc", "ppl_wikitext2", "ppl_c4", "ppl_lambada")


def comparison_rows(
    cfg,
    results: list[CellResult] | list[dict],
    evals: dict[tuple[str, str], FinalistNumbers],
    dense: FinalistNumbers | None = None,
    data_plan: DataPlan | None = None,
) -> list[ComparisonRow]:
    """One row for the dense model (first), then one per (cell, recovery): the cell's search result,
    its downstream numbers (``evals``: by (cell, recovery); their numeric fields in their flat form,
    ``FinalistNumbers.to_dict``), and the change against the dense model (``delta_<metric>``). A
    result given in its JSON form (plan's stand-ins) is read as a CellResult first."""
    calib = {r.role.split(":", 1)[1]: r.used for r in data_plan.calibration} if data_plan else {}
    held_out = ",".join(data_plan.held_out) if data_plan else ""
    rows: list[ComparisonRow] = []
    base = dense.to_dict() if dense is not None else {}

    def metrics(numbers: FinalistNumbers) -> dict[str, float]:
        e = numbers.to_dict()
        out = {k: float(v) for k, v in sorted(e.items()) if isinstance(v, (int, float)) and not isinstance(v, bool)}
        for key in ACC_KEYS:
            if base and key in e and key in base:
                out[f"delta_{key}"] = float(e[key]) - float(base[key])
        return out

    if dense is not None:
        rows.append(
            ComparisonRow(
                cell=DENSE,
                searcher=DENSE,
                k=0,
                recovery="none",
                held_out=held_out,
                eval_key=dense.eval_key,  # joins RUN_DIR/eval_items.parquet (column key)
                metrics=metrics(dense),
            )
        )
    for r in (x if isinstance(x, CellResult) else CellResult.from_dict(x) for x in results):
        for rec in cfg.compare.recovery:
            e = evals.get((r.cell, rec), FinalistNumbers())
            rows.append(
                ComparisonRow(
                    cell=r.cell,
                    searcher=r.searcher,
                    objective=r.objective,
                    k=r.k,
                    seed=r.seed,
                    removed=tuple(r.removed),
                    calib_value=r.value,
                    dense_calib_value=r.dense_value,
                    calib_change=r.relative_change,
                    evaluations=r.evaluations,
                    budget_used=r.budget_used,
                    budget_mode=r.budget_mode,
                    wall_seconds=r.wall_seconds,
                    cache_hits=r.cache_hits,
                    recovery=rec,
                    calibration_data=calib.get(r.objective),
                    held_out=held_out,
                    eval_key=e.eval_key,
                    metrics=metrics(e),
                )
            )
    return rows


def comparison_table(
    cfg,
    results: list[CellResult] | list[dict],
    evals: dict[tuple[str, str], FinalistNumbers],
    dense: FinalistNumbers | None = None,
    data_plan: DataPlan | None = None,
) -> pa.Table:
    """comparison.parquet's table of :func:`comparison_rows` (``comparison_row.to_arrow``)."""
    return to_arrow(comparison_rows(cfg, results, evals, dense, data_plan))
