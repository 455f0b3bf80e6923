"""The ledger: every evaluation of a run, recorded durably under RUN_DIR/ledger/.

Each writer (one per process) appends one JSON line per finished evaluation to its own journal,
``journal-<writer>.jsonl``, flushed to the OS before the searcher sees the value: it survives a
crash of the process (~30 us a row, where a Parquet part per row cost ~5 ms). ``compact()``
(at the end of a search or compare, when no writer is active) folds the journals and older parts
into one Parquet part. Rows carry a unique ``eval_id``; reading de-duplicates on it and skips a
torn last journal line, so every step is crash-safe. The ledger is the single record that resume,
the report and the comparison read.
"""
from __future__ import annotations

import json
import threading
import time
import uuid
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from ghostsearch.io import write_parquet_atomic

SCHEMA = pa.schema([
    ("eval_id", pa.string()),
    ("cell", pa.string()),
    ("searcher", pa.string()),
    ("objective", pa.string()),
    ("objective_key", pa.string()),
    ("removed", pa.list_(pa.int32())),
    ("k", pa.int32()),
    ("fidelity", pa.float64()),
    ("value", pa.float64()),
    ("tokens", pa.int64()),
    ("seconds", pa.float64()),
    ("cached", pa.bool_()),
    ("actor", pa.string()),
    ("node", pa.string()),
    ("time", pa.float64()),
    ("seed", pa.int64()),
])


class Ledger:
    def __init__(self, run_dir: str | Path):
        self.dir = Path(run_dir) / "ledger"
        self.dir.mkdir(parents=True, exist_ok=True)
        self.journal = self.dir / f"journal-{time.time_ns():020d}-{uuid.uuid4().hex[:8]}.jsonl"
        self._file = None
        self._lock = threading.Lock()

    def append(self, row: dict) -> None:
        row = {name: row.get(name) for name in SCHEMA.names}
        row["eval_id"] = row["eval_id"] or uuid.uuid4().hex
        row["time"] = row["time"] or time.time()
        line = json.dumps(row) + "\n"
        with self._lock:
            if self._file is None:
                self._file = open(self.journal, "a", encoding="utf-8")
            self._file.write(line)
            self._file.flush()  # in the OS now: a crash of this process loses nothing

    def close(self) -> None:
        with self._lock:
            if self._file is not None:
                self._file.close()
                self._file = None

    def compact(self) -> None:
        """Fold journals and parts into one Parquet part. Run it when no writer is active (the end
        of a run); crash-safe: the new part is complete before anything is removed, and rows are
        de-duplicated on eval_id when read."""
        self.close()
        parts = sorted(self.dir.glob("part-*.parquet"))
        journals = sorted(self.dir.glob("journal-*.jsonl"))
        if not journals and len(parts) <= 1:
            return
        table = read_ledger(self.dir.parent)
        write_parquet_atomic(self.dir / f"part-{time.time_ns():020d}-compact.parquet", table)
        for p in parts + journals:
            p.unlink(missing_ok=True)


def _journal_rows(path: Path) -> list[dict]:
    rows = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            try:
                rows.append(json.loads(line))
            except json.JSONDecodeError:  # a line torn by a crash mid-write: that evaluation reruns
                continue
    return rows


def read_ledger(run_dir: str | Path) -> pa.Table:
    d = Path(run_dir) / "ledger"
    parts = sorted(d.glob("part-*.parquet")) if d.is_dir() else []
    journals = sorted(d.glob("journal-*.jsonl")) if d.is_dir() else []
    tables = [pq.read_table(p, schema=SCHEMA) for p in parts]
    rows = [r for j in journals for r in _journal_rows(j)]
    if rows:
        tables.append(pa.Table.from_pylist(rows, schema=SCHEMA))
    if not tables:
        return SCHEMA.empty_table()
    table = pa.concat_tables(tables)
    ids = table.column("eval_id").to_pylist()
    seen, keep = set(), []
    for i, e in enumerate(ids):
        if e not in seen:
            seen.add(e)
            keep.append(i)
    return table.take(keep) if len(keep) < len(ids) else table
