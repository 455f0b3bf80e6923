"""The ledger: journal rows are readable at once, survive a torn line, compact into one Parquet
part, read as a Parquet dataset (pandas, pyarrow.dataset) mid-run and after a crash, and a corrupt
part or row is quarantined instead of crashing the reader."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys

import pyarrow.dataset as ds
import pyarrow.parquet as pq

from ghostsearch.rundir.ledger import SCHEMA, Ledger, compact, read_ledger


def _row(i, **kw):
    return {
        "cell": "greedy-perplexity-k2-s0",
        "searcher": "greedy",
        "objective": "perplexity",
        "objective_key": "perplexity|c4",
        "removed": [i, i + 1],
        "k": 2,
        "fidelity": 1.0,
        "value": 10.0 + i / 3,
        "tokens": 512,
        "seconds": 0.25,
        "cached": i % 2 == 0,
        "actor": "a",
        "node": "n",
        "seed": 0,
        **kw,
    }


def test_rows_round_trip_and_compact(tmp_path):
    a, b = Ledger(tmp_path), Ledger(tmp_path)  # two writers (two cells' processes) on one run
    for i in range(5):
        a.append(_row(i))
        b.append(_row(10 + i))
    t = read_ledger(tmp_path)  # readable while the writers are open
    assert t.schema == SCHEMA and len(t) == 10
    got = {r["value"]: r for r in t.to_pylist()}
    assert got[10 + 1 / 3]["removed"] == [1, 2] and got[10 + 1 / 3]["cached"] is False  # floats exact
    a.close(), b.close()
    before = sorted((r["eval_id"], r["value"]) for r in t.to_pylist())
    Ledger(tmp_path).compact()
    parts = sorted(p.name for p in (tmp_path / "ledger").glob("*.parquet"))
    assert len(parts) == 1 and parts[0].endswith("-compact.parquet"), parts
    assert not list((tmp_path / "ledger" / "_journal").iterdir())
    assert (
        sorted((r["eval_id"], r["value"]) for r in pq.read_table(tmp_path / "ledger" / parts[0]).to_pylist()) == before
    )
    # a later writer (a resumed run) adds a journal beside the part; both are read
    c = Ledger(tmp_path)
    c.append(_row(20))
    assert len(read_ledger(tmp_path)) == 11


def test_parquet_readers_see_a_running_ledger(tmp_path):
    import pandas as pd

    w = Ledger(tmp_path, checkpoint_seconds=0)  # every append checkpoints: a part per row
    for i in range(3):
        w.append(_row(i))
    mid = pd.read_parquet(tmp_path / "ledger")  # the journal folder is skipped, the parts are read
    assert sorted(mid["value"]) == [10.0, 10.0 + 1 / 3, 10.0 + 2 / 3]
    w2 = Ledger(tmp_path, checkpoint_seconds=3600)  # rows still only in a journal: not yet visible to Parquet
    w2.append(_row(7))
    assert ds.dataset(tmp_path / "ledger", format="parquet").count_rows() == 3
    assert len(read_ledger(tmp_path)) == 4  # ghostsearch's reader sees the journal too
    w2.close()
    assert len(pd.read_parquet(tmp_path / "ledger")) == 4


def test_torn_line_and_interrupted_compaction(tmp_path):
    a = Ledger(tmp_path, checkpoint_seconds=3600)
    for i in range(3):
        a.append(_row(i))
    a._file.close()  # the process died: its journal stays  # noqa: SLF001
    with open(a.journal, "a") as f:
        f.write('{"eval_id": "torn", "cell": "gre')  # ... mid-write
    assert len(read_ledger(tmp_path)) == 3
    # compaction that died after writing its part but before removing the journal: no duplicates
    t = read_ledger(tmp_path)
    pq.write_table(t, tmp_path / "ledger" / "part-00000000000000000001-compact.parquet")
    assert len(read_ledger(tmp_path)) == 3
    compact(tmp_path)
    assert len(read_ledger(tmp_path)) == 3 and not list((tmp_path / "ledger").glob("**/journal-*"))


def test_kill_9_between_new_part_and_unlinks(tmp_path):
    """A real SIGKILL after step 1 of compaction: both old files and the new part remain; reading
    gives every row once, and the next compaction finishes the job."""
    w = Ledger(tmp_path, checkpoint_seconds=3600)
    for i in range(6):
        w.append(_row(i))
    w.close()
    Ledger(tmp_path, checkpoint_seconds=3600).append(_row(30))
    want = sorted(r["eval_id"] for r in read_ledger(tmp_path).to_pylist())
    script = (
        "import os, signal, sys; from ghostsearch.rundir.ledger import write_compacted; "
        "write_compacted(sys.argv[1]); os.kill(os.getpid(), signal.SIGKILL)"
    )
    r = subprocess.run([sys.executable, "-c", script, str(tmp_path)], capture_output=True)
    assert r.returncode == -9
    assert len(list((tmp_path / "ledger").glob("part-*-compact.parquet"))) == 1
    assert list((tmp_path / "ledger").glob("_journal/journal-*"))  # not yet removed
    assert sorted(r["eval_id"] for r in read_ledger(tmp_path).to_pylist()) == want
    compact(tmp_path)
    assert sorted(r["eval_id"] for r in read_ledger(tmp_path).to_pylist()) == want
    assert len(list((tmp_path / "ledger").glob("*.parquet"))) == 1


def test_zero_byte_part_and_wrong_typed_row_are_quarantined(tmp_path, caplog):
    w = Ledger(tmp_path, checkpoint_seconds=3600)
    for i in range(4):
        w.append(_row(i))
    w.close()
    (tmp_path / "ledger" / "part-00000000000000000002-x.parquet").write_bytes(b"")  # power loss before fsync
    j = Ledger(tmp_path, checkpoint_seconds=3600)
    j.append(_row(8))
    j._file.close()  # noqa: SLF001
    with open(j.journal, "a") as f:
        f.write(json.dumps(_row(9, eval_id="bad", value="oops")) + "\n")  # valid JSON, wrong type
        f.write(json.dumps(_row(10, eval_id="bad2", removed=["x"])) + "\n")
        f.write(json.dumps(_row(11, eval_id="ok")) + "\n")
    with caplog.at_level("WARNING", logger="ghostsearch.ledger"):
        t = read_ledger(tmp_path)
    assert sorted(r["value"] for r in t.to_pylist()) == sorted(10.0 + i / 3 for i in (0, 1, 2, 3, 8, 11))
    assert any("unreadable" in m for m in caplog.messages) and any("malformed" in m for m in caplog.messages)
    assert all("\n" not in m for m in caplog.messages)
    compact(tmp_path)  # what a resumed run does first: the corrupt part and rows are moved aside
    q = tmp_path / "ledger" / "_quarantine"
    assert (q / "part-00000000000000000002-x.parquet").exists()
    bad = [json.loads(line) for f in q.glob("rows-*.jsonl") for line in f.read_text().splitlines()]
    assert sorted(json.loads(b["line"])["eval_id"] for b in bad) == ["bad", "bad2"]
    assert len(read_ledger(tmp_path)) == 6 and len(os.listdir(tmp_path / "ledger")) == 3  # part, _journal, _quarantine


# ---------------------------------------------------------------- the row record (issue 26)
# The on-disk format: every run directory written so far has these columns, in this order.
# SCHEMA is derived from LedgerRow; this literal pins it, so that a field added, renamed or
# retyped in LedgerRow fails here instead of silently changing what old run directories read.
HISTORICAL = [
    ("eval_id", "string"),
    ("cell", "string"),
    ("searcher", "string"),
    ("objective", "string"),
    ("objective_key", "string"),
    ("removed", "list<item: int32>"),
    ("k", "int32"),
    ("fidelity", "double"),
    ("value", "double"),
    ("tokens", "int64"),
    ("seconds", "double"),
    ("cached", "bool"),
    ("actor", "string"),
    ("node", "string"),
    ("time", "double"),
    ("seed", "int64"),
    ("cost", "double"),
    ("partial", "bool"),
    ("row_losses", "list<item: double>"),
    ("cell_k", "int32"),  # added by issue 39: a ledger without it reads (test_a_ledger_before_cell_k_reads)
]


def test_schema_is_derived_from_the_row_and_unchanged():
    from dataclasses import fields

    from ghostsearch.rundir.ledger import LedgerRow

    assert [(f.name, str(f.type)) for f in SCHEMA] == HISTORICAL
    assert SCHEMA.names == [f.name for f in fields(LedgerRow)]
    assert all(f.nullable for f in SCHEMA)


def test_append_refuses_a_misspelt_or_missing_field_and_writes_nothing(tmp_path):
    import pytest

    w = Ledger(tmp_path, checkpoint_seconds=3600)
    bad = {k: v for k, v in _row(1).items() if k != "value"}
    with pytest.raises(ValueError, match=r"unknown field\(s\) 'valeu'.*missing required field\(s\) 'value'"):
        w.append({**bad, "valeu": 3.0})
    with pytest.raises(ValueError, match=r"missing required field\(s\) 'cached'"):
        w.append({k: v for k, v in _row(1).items() if k != "cached"})
    assert len(read_ledger(tmp_path)) == 0
    w.append(_row(1))  # optional fields (time, eval_id, cost ...) may be left out: null, or filled in
    (r,) = read_ledger(tmp_path).to_pylist()
    assert r["eval_id"] and r["time"] > 0 and r["cost"] is None and r["row_losses"] is None


def test_a_typed_row_and_its_mapping_write_the_same_line(tmp_path):
    from ghostsearch.rundir.ledger import LedgerRow

    row = LedgerRow(**_row(3, eval_id="e3", time=5.0, cost=0.25, partial=True, row_losses=[1.5, 2.5]))
    a, b = Ledger(tmp_path / "a", checkpoint_seconds=3600), Ledger(tmp_path / "b", checkpoint_seconds=3600)
    a.append(row)
    b.append(row.to_dict())
    assert a.journal.read_text() == b.journal.read_text()
    line = json.loads(a.journal.read_text())
    assert list(line) == SCHEMA.names and line["row_losses"] == [1.5, 2.5]
    assert read_ledger(tmp_path / "a").to_pylist() == [row.to_dict()]


def test_reading_a_row_by_a_name_that_is_no_field_fails():
    import pytest

    from ghostsearch.rundir.ledger import LedgerRow

    row = LedgerRow(**_row(2))
    assert row.value == 10.0 + 2 / 3 and row.cost is None and row.fidelity == 1.0
    with pytest.raises(TypeError):
        row["value"]  # type: ignore[index]  (a record: read by attribute, no null for a misspelt name)
    for name in ("valeu", "costs"):
        with pytest.raises(AttributeError, match=name):
            getattr(row, name)
    with pytest.raises(dataclasses.FrozenInstanceError):
        row.value = 1.0  # type: ignore[misc]


# ---------------------------------------------------------------- the cell's k (issue 39 item 5)
def test_a_ledger_before_cell_k_reads(tmp_path):
    """A part and a journal written before the cell_k column: read, cell_k null; compaction keeps them."""
    import pyarrow as pa

    old_schema = pa.schema([f for f in SCHEMA if f.name != "cell_k"])
    d = tmp_path / "ledger"
    (d / "_journal").mkdir(parents=True)
    pq.write_table(pa.Table.from_pylist([{**_row(1), "eval_id": "p1"}], schema=old_schema), d / "part-1-old.parquet")
    (d / "_journal" / "journal-old-1.jsonl").write_text(json.dumps({**_row(2), "eval_id": "j2", "time": 2.0}) + "\n")
    rows = read_ledger(tmp_path).to_pylist()
    assert sorted(r["eval_id"] for r in rows) == ["j2", "p1"] and all(r["cell_k"] is None for r in rows)
    Ledger(tmp_path).append({**_row(3), "cell_k": 2})
    compact(tmp_path)
    got = {r["eval_id"]: r["cell_k"] for r in read_ledger(tmp_path).to_pylist()}
    assert got["p1"] is None and got["j2"] is None and sorted(got.values(), key=str)[0] == 2


def test_a_row_with_a_bad_cell_k_is_left_out_as_the_ledger_reads(tmp_path, caplog):
    d = tmp_path / "ledger" / "_journal"
    d.mkdir(parents=True)
    lines = [{**_row(i), "eval_id": f"r{i}", "cell_k": k} for i, k in enumerate([2, None, 0, "2", True, 2.5])]
    (d / "journal-x-1.jsonl").write_text("".join(json.dumps(r) + "\n" for r in lines))
    assert sorted(r["eval_id"] for r in read_ledger(tmp_path).to_pylist()) == ["r0", "r1"]
    assert "4 malformed row(s)" in caplog.text
