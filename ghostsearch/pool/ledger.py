"""The ledger: every evaluation of a run, appended durably as Parquet parts under RUN_DIR/ledger/.

Each flush writes one small part (temp file + atomic rename), so a finished evaluation survives
a driver crash. Rows carry a unique ``eval_id``; reading de-duplicates on it, so compaction
(many parts -> one) is crash-safe too. The ledger is the single record that resume, the report
and the comparison read.
"""
from __future__ import annotations

import os
import threading
import time
import uuid
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

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
    def __init__(self, run_dir: str | Path, flush_rows: int = 1):
        self.dir = Path(run_dir) / "ledger"
        self.dir.mkdir(parents=True, exist_ok=True)
        self.flush_rows = flush_rows
        self._buf: list[dict] = []
        self._lock = threading.Lock()

    def append(self, row: dict) -> None:
        row = {name: row.get(name) for name in SCHEMA.names}
        row["eval_id"] = row["eval_id"] or uuid.uuid4().hex
        row["time"] = row["time"] or time.time()
        with self._lock:
            self._buf.append(row)
            if len(self._buf) >= self.flush_rows:
                self._flush_locked()

    def flush(self) -> None:
        with self._lock:
            self._flush_locked()

    def _flush_locked(self) -> None:
        if not self._buf:
            return
        table = pa.Table.from_pylist(self._buf, schema=SCHEMA)
        name = f"part-{time.time_ns():020d}-{uuid.uuid4().hex[:8]}.parquet"
        tmp = self.dir / f".{name}.tmp"
        pq.write_table(table, tmp)
        os.replace(tmp, self.dir / name)
        self._buf = []

    def read(self) -> pa.Table:
        self.flush()
        return read_ledger(self.dir.parent)

    def compact(self) -> None:
        """Merge all parts into one (crash-safe: rows are de-duplicated on eval_id when read)."""
        self.flush()
        parts = sorted(self.dir.glob("part-*.parquet"))
        if len(parts) <= 1:
            return
        table = read_ledger(self.dir.parent)
        name = f"part-{time.time_ns():020d}-compact.parquet"
        tmp = self.dir / f".{name}.tmp"
        pq.write_table(table, tmp)
        os.replace(tmp, self.dir / name)
        for p in parts:
            p.unlink(missing_ok=True)


def read_ledger(run_dir: str | Path) -> pa.Table:
    d = Path(run_dir) / "ledger"
    parts = sorted(d.glob("part-*.parquet")) if d.is_dir() else []
    if not parts:
        return SCHEMA.empty_table()
    table = pa.concat_tables([pq.read_table(p, schema=SCHEMA) for p in parts])
    ids = table.column("eval_id").to_pylist()
    seen, keep = set(), []
    for i, e in enumerate(ids):
        if e not in seen:
            seen.add(e)
            keep.append(i)
    return table.take(keep) if len(keep) < len(ids) else table
