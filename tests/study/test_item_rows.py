"""Per-item rows (eval_numbers.ItemRow) against the committed data: every committed items file
(RUN_DIR/evals/<key>.items.parquet, RUN_DIR/eval_items.parquet, a bench's OUT_items.parquet) reads
into ItemRows and is written back as an equal table (same columns, order, types and values); a
column that is not a field fails with one line."""

from __future__ import annotations

import dataclasses
import subprocess
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from ghostsearch.core.errors import GhostsearchError
from ghostsearch.core.eval_numbers import ITEM_COLUMNS, ItemRow, items_from_arrow, items_to_arrow, read_item_rows
from ghostsearch.evaluation.native import accuracies, write_item_rows

ROOT = Path(__file__).resolve().parents[2]


def committed_items() -> list[Path]:
    """Every committed per-item rows file (items.parquet itself is a draw: rank, task, doc)."""
    out = subprocess.run(
        ["git", "ls-files", "docs/results/**/*items.parquet"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout
    return [ROOT / p for p in out.split() if Path(p).name != "items.parquet"]


ITEMS = committed_items()


def row(**kw) -> ItemRow:
    base = dict(
        finalist=0,
        removed=[3, 7],
        recovery="none",
        task="piqa",
        doc=12,
        gold=1,
        pred=1,
        pred_norm=0,
        lls=[-4.5, -3.25],
    )
    return ItemRow.from_dict({**base, **kw})


@pytest.mark.skipif(not ITEMS, reason="no committed per-item rows")
@pytest.mark.parametrize("path", ITEMS, ids=lambda p: str(p.relative_to(ROOT / "docs" / "results")))
def test_committed_items_round_trip(path):
    table = pq.read_table(path)
    rows = items_from_arrow(table)
    assert rows and all(isinstance(r, ItemRow) for r in rows)
    back = items_to_arrow(rows)
    assert back.schema.equals(table.schema) and back.column_names == table.column_names
    assert back.equals(table)
    assert [r.to_dict() for r in rows] == table.to_pylist()


def test_every_committed_eval_items_is_found():
    names = {p.name for p in ITEMS}
    assert "eval_items.parquet" in names and any(n.endswith(".items.parquet") for n in names)


def test_to_dict_is_the_file_row_and_key_only_where_set():
    r = row()
    assert list(r.to_dict()) == list(ITEM_COLUMNS[:-1])
    assert r.removed == (3, 7) and r.lls == (-4.5, -3.25) and r.to_dict()["removed"] == [3, 7]
    keyed = dataclasses.replace(r, key="abc")
    assert list(keyed.to_dict()) == list(ITEM_COLUMNS) and ItemRow.from_dict(keyed.to_dict()) == keyed
    assert r.item == ("piqa", 12) and r.correct


def test_unknown_or_missing_column_fails_in_one_line():
    with pytest.raises(GhostsearchError, match="unknown column 'cell'") as e:
        row(cell="c0")
    assert "\n" not in str(e.value)
    d = row().to_dict()
    del d["gold"]
    with pytest.raises(GhostsearchError, match="no column 'gold'"):
        ItemRow.from_dict(d)


def test_write_and_read_back(tmp_path):
    rows = [row(), row(task="boolq", doc=3, pred=0, pred_norm=None, finalist=1, removed=[])]
    write_item_rows(rows, tmp_path / "a.parquet")
    assert read_item_rows(tmp_path / "a.parquet") == rows
    assert pq.read_schema(tmp_path / "a.parquet").names == list(ITEM_COLUMNS[:-1])  # no key column without keys
    keyed = [dataclasses.replace(r, key=f"k{i}") for i, r in enumerate(rows)]
    write_item_rows(keyed, tmp_path / "b.parquet")
    assert read_item_rows(tmp_path / "b.parquet") == keyed
    assert pq.read_schema(tmp_path / "b.parquet").field("key").type == pa.string()
    write_item_rows([], tmp_path / "c.parquet")
    assert read_item_rows(tmp_path / "c.parquet") == [] and pq.read_schema(tmp_path / "c.parquet").names == list(
        ITEM_COLUMNS[:-1]
    )


def test_accuracies_of_rows():
    rows = [row(), row(doc=13, pred=0, pred_norm=1), row(task="boolq", pred_norm=None)]
    n = accuracies(rows, ["piqa", "boolq"])
    assert n.tasks["piqa"].acc == 0.5 and n.tasks["piqa"].acc_norm == 0.5 and n.tasks["piqa"].n == 2
    assert n.tasks["boolq"].acc == 1.0 and n.tasks["boolq"].acc_norm is None
