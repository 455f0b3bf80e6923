"""The ledger: journal rows are readable at once, survive a torn line, and compact into one Parquet part."""
from __future__ import annotations

import pyarrow.parquet as pq

from ghostsearch.rundir.ledger import SCHEMA, Ledger, read_ledger


def _row(i, **kw):
    return {"cell": "greedy-perplexity-k2-s0", "searcher": "greedy", "objective": "perplexity",
            "objective_key": "perplexity|c4", "removed": [i, i + 1], "k": 2, "fidelity": 1.0,
            "value": 10.0 + i / 3, "tokens": 512, "seconds": 0.25, "cached": i % 2 == 0, "actor": "a",
            "node": "n", "seed": 0, **kw}


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
    files = sorted(p.name for p in (tmp_path / "ledger").iterdir())
    assert len(files) == 1 and files[0].endswith("-compact.parquet"), files
    assert sorted((r["eval_id"], r["value"]) for r in pq.read_table(tmp_path / "ledger" / files[0]).to_pylist()) == before
    # a later writer (a resumed run) adds a journal beside the part; both are read
    c = Ledger(tmp_path)
    c.append(_row(20))
    assert len(read_ledger(tmp_path)) == 11


def test_torn_line_and_interrupted_compaction(tmp_path):
    a = Ledger(tmp_path)
    for i in range(3):
        a.append(_row(i))
    a.close()
    with open(a.journal, "a") as f:
        f.write('{"eval_id": "torn", "cell": "gre')  # the process died mid-write
    assert len(read_ledger(tmp_path)) == 3
    # compaction that died after writing its part but before removing the journal: no duplicates
    t = read_ledger(tmp_path)
    pq.write_table(t, tmp_path / "ledger" / "part-00000000000000000001-compact.parquet")
    assert len(read_ledger(tmp_path)) == 3
    Ledger(tmp_path).compact()
    assert len(read_ledger(tmp_path)) == 3 and not list((tmp_path / "ledger").glob("journal-*"))
