"""comparison_row.ComparisonRow: the rows of RUN_DIR/comparison.parquet as a typed record. Every
committed table reads through it and back to the same table; the table compare builds is the one
the row dicts gave; a misspelt column is refused."""

import math
import subprocess
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from ghostsearch.core.comparison_row import ComparisonRow, from_arrow, to_arrow
from ghostsearch.core.errors import GhostsearchError

ROOT = Path(__file__).resolve().parents[2]
COMMITTED = subprocess.run(
    ["git", "ls-files", "docs/results/**/comparison.parquet"], capture_output=True, text=True, cwd=ROOT
).stdout.split()


def same_table(a: pa.Table, b: pa.Table) -> bool:
    """Same columns, order, types and values (NaN equal to NaN; a list's child name aside, which
    Parquet renames)."""
    if a.column_names != b.column_names or not a.schema.equals(b.schema):
        return False
    return all(repr(a.column(c).to_pylist()) == repr(b.column(c).to_pylist()) for c in a.column_names)


def test_committed_tables_are_found():
    assert any(p.endswith("study-cpu/comparison.parquet") for p in COMMITTED)


@pytest.mark.parametrize("path", COMMITTED)
def test_every_committed_table_reads_and_writes_back_unchanged(path, tmp_path):
    table = pq.read_table(ROOT / path)
    rows = from_arrow(table)
    assert len(rows) == table.num_rows and rows[0].is_dense
    back = to_arrow(rows)
    assert same_table(back, table)
    pq.write_table(back, tmp_path / "c.parquet")  # and on disk: the file's own schema
    again = pq.read_table(tmp_path / "c.parquet")
    assert same_table(again, table) and again.schema == table.schema


def test_fields_are_typed_and_metrics_keep_their_order():
    table = pq.read_table(ROOT / "docs/results/study-cpu/comparison.parquet")
    dense, cell = from_arrow(table)[:2]
    assert dense.objective is None and dense.seed is None and dense.removed == () and dense.budget_used is None
    assert isinstance(cell.removed, tuple) and isinstance(cell.k, int) and cell.rec == "none"
    assert cell.metric("mean_acc") == cell.metrics["mean_acc"] and cell.metric("no_such") is None
    fixed = set(ComparisonRow.__dataclass_fields__) - {"metrics"}
    assert list(cell.metrics) == [c for c in table.column_names if c not in fixed]
    assert cell.column("removed") == list(cell.removed) and cell.column("mean_acc") == cell.metric("mean_acc")


def test_column_order_follows_the_first_row_holding_each_column():
    cell = ComparisonRow(cell="c", searcher="greedy", k=2, removed=(1, 2), eval_key="e", metrics={"b": 1.0, "a": 2.0})
    dense = ComparisonRow(cell="dense", searcher="dense", held_out="", metrics={"a": 0.0})
    names = to_arrow([dense, cell]).column_names
    search = ["dense_calib_value", "calib_change", "evaluations", "budget_used", "budget_mode", "wall_seconds"]
    assert names == [
        *["cell", "searcher", "objective", "k", "seed", "removed", "calib_value", "recovery", "calibration_data"],
        *["held_out", "eval_key", "a", *search, "cache_hits", "b"],
    ]
    no_dense = to_arrow([cell]).column_names
    assert no_dense.index("cache_hits") < no_dense.index("recovery") < no_dense.index("eval_key") < no_dense.index("b")
    t = to_arrow([dense, cell])
    assert t.column("b").to_pylist() == [None, 1.0] and t.column("removed").to_pylist() == [[], [1, 2]]


def test_from_dict_refuses_a_misspelt_column_in_one_line():
    good = {"cell": "c", "searcher": "greedy", "k": 2, "removed": [1], "mean_acc": 0.5, "delta_x": math.nan}
    assert ComparisonRow.from_dict(good).metrics["mean_acc"] == 0.5
    for bad, word in (({"sercher": "greedy"}, "did you mean 'searcher'"), ({"calib_valu": 1.0}, "calib_value")):
        with pytest.raises(GhostsearchError, match=word) as e:
            ComparisonRow.from_dict({**good, **bad})
        assert "\n" not in str(e.value)
    with pytest.raises(GhostsearchError, match="unknown key 'note'"):
        ComparisonRow.from_dict({**good, "note": "hello"})
    with pytest.raises(GhostsearchError, match="needs 'cell' and 'searcher'"):
        ComparisonRow.from_dict({"cell": "c", "k": 2})
