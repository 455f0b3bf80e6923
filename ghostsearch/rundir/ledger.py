"""The ledger: every evaluation of a run, recorded durably under RUN_DIR/ledger/.

Layout: ``ledger/part-*.parquet`` (what Parquet readers see: ``pandas.read_parquet(RUN_DIR /
"ledger")``, ``pyarrow.dataset``), ``ledger/_journal/journal-<writer>.jsonl`` (rows not yet in a
part) and ``ledger/_quarantine/`` (corrupt parts and rows moved aside). Parquet readers skip
names starting with ``_`` or ``.``, so the folder reads as a dataset while a run is going and after
a crash.

Durability policy (docs/reliability.md):

* ``append`` writes one JSON line to the writer's journal and flushes it to the OS before the
  searcher sees the value: a crash of the process loses nothing. The journal is fsynced at most
  every ``fsync_seconds`` (default 1 s; 0 = every row, ~3 ms each on this disk), so a power loss
  can drop the last second of rows, which are then recomputed.
* Every ``checkpoint_seconds`` (and on ``close``) a writer moves its journal's rows into a part of
  its own (fsynced, renamed into place, directory fsynced, then the journal is removed), so
  Parquet readers see a running search within that delay.
* ``compact`` (the run-directory lock held, no writer active) folds every part and journal into
  one part, fsynced, before anything is removed.

Reading is tolerant: rows carry a unique ``eval_id`` (duplicates left by a crash between two
steps are dropped), a torn last line is skipped, and a corrupt part or a row of the wrong shape is
reported in one line and left out (``quarantine`` moves it to ``_quarantine/``), so its
evaluation is recomputed instead of the run crashing.
"""

from __future__ import annotations

import json
import logging
import math
import os
import shutil
import threading
import time
import uuid
from dataclasses import MISSING, dataclass, field, fields
from pathlib import Path
from typing import Any, Mapping, Sequence, TextIO

import pyarrow as pa
import pyarrow.parquet as pq

from ghostsearch.core.io import fsync_dir, write_parquet_atomic
from ghostsearch.core.records import required_fields

log = logging.getLogger("ghostsearch.ledger")


def _column(arrow: pa.DataType, default: Any = MISSING, read: bool = False) -> Any:
    """A LedgerRow field and its Parquet column type (SCHEMA is built from these); ``read``: a row
    read back must hold it, of its type, to be used (``READ_REQUIRED``)."""
    return field(default=default, metadata={"arrow": arrow, "read": read})


@dataclass(frozen=True, kw_only=True)
class LedgerRow:
    """One evaluation, as the ledger records it; the Parquet schema (``SCHEMA``) is derived from these
    fields, in this order. Fields without a default are required; the others are null when not given
    (``eval_id`` and ``time`` are filled in by ``Ledger.append``)."""

    eval_id: str | None = _column(pa.string(), None, read=True)  # unique; duplicates left by a crash are dropped
    cell: str = _column(pa.string(), read=True)
    searcher: str = _column(pa.string())
    objective: str = _column(pa.string())  # the objective's name
    objective_key: str = _column(pa.string(), read=True)  # ObjectiveSpec.key(): what the value depends on
    removed: list[int] = _column(pa.list_(pa.int32()), read=True)
    k: int = _column(pa.int32())
    fidelity: float = _column(pa.float64(), read=True)
    value: float = _column(pa.float64(), read=True)
    tokens: int | None = _column(pa.int64(), None)
    seconds: float | None = _column(pa.float64(), None)
    cached: bool = _column(pa.bool_(), read=True)  # answered from a cache or the ledger, not computed
    actor: str | None = _column(pa.string(), None)
    node: str | None = _column(pa.string(), None)
    time: float | None = _column(pa.float64(), None)
    seed: int | None = _column(pa.int64(), None)
    # racing (search/racing.py): full-evaluation equivalents this row charged (None: its fidelity);
    # partial: a race block below full fidelity (a value on the rows seen so far, never an answer);
    # row_losses: the per-row loss sums of the block's rows, which a resumed race replays
    cost: float | None = _column(pa.float64(), None)
    partial: bool | None = _column(pa.bool_(), None)
    row_losses: list[float] | None = _column(pa.list_(pa.float64()), None)
    # the k of the row's cell (``k`` above is len(removed): greedy and beam also score smaller sets);
    # null in a ledger written before the column existed (rundir.curves.cell_k then reads the cell's name)
    cell_k: int | None = _column(pa.int32(), None)

    @classmethod
    def from_dict(cls, row: Mapping[str, Any]) -> LedgerRow:
        """A row given as a mapping (one read back from the ledger, or written by hand); ValueError
        naming every unknown and every missing required field."""
        names = {f.name for f in fields(cls)}
        unknown = sorted(set(row) - names)
        missing = [name for name in required_fields(cls) if name not in row]
        if unknown or missing:
            raise ValueError(
                "ledger row: "
                + "; ".join(
                    ([f"unknown field(s) {', '.join(map(repr, unknown))}"] if unknown else [])
                    + ([f"missing required field(s) {', '.join(map(repr, missing))}"] if missing else [])
                )
                + f" (the fields are: {', '.join(f.name for f in fields(cls))})"
            )
        return cls(**row)

    def to_dict(self) -> dict[str, Any]:
        """The row as the journal writes it: every column, in SCHEMA's order (``dataclasses.asdict``'s
        dict, built field by field: asdict's recursive copy was 2/3 of an append, 25 us a row)."""
        return {name: list(v) if isinstance(v, list) else v for name in ROW_FIELDS for v in (getattr(self, name),)}


SCHEMA = pa.schema([(f.name, f.metadata["arrow"]) for f in fields(LedgerRow)])
ROW_FIELDS = tuple(f.name for f in fields(LedgerRow))
JOURNALS, QUARANTINE = "_journal", "_quarantine"


class Ledger:
    def __init__(self, run_dir: str | Path, fsync_seconds: float = 1.0, checkpoint_seconds: float = 10.0):
        self.dir = Path(run_dir) / "ledger"
        journals = self.dir / JOURNALS
        if journals.exists() and not journals.is_dir():  # not ours: moved aside (never deleted), said once
            (self.dir / QUARANTINE).mkdir(exist_ok=True)
            aside = self.dir / QUARANTINE / f"{JOURNALS}-{time.time_ns():020d}"
            log.warning("ledger: %s is not a directory; moved to %s", journals, aside)
            os.replace(journals, aside)
        journals.mkdir(parents=True, exist_ok=True)
        self.writer = f"{time.time_ns():020d}-{uuid.uuid4().hex[:8]}"
        self.fsync_seconds, self.checkpoint_seconds = fsync_seconds, checkpoint_seconds
        self.journal = self._new_journal()
        self._file: TextIO | None = None
        self._rows: list[dict] = []  # rows in the current journal, not yet in a part
        self._synced = self._checkpointed = time.monotonic()
        self._lock = threading.Lock()

    def _new_journal(self) -> Path:
        return self.dir / JOURNALS / f"journal-{self.writer}-{time.time_ns():020d}.jsonl"

    def append(self, row: LedgerRow | Mapping[str, Any]) -> None:
        """Record one evaluation (a LedgerRow, or a mapping of its fields: an unknown or missing
        required field is a ValueError, nothing written)."""
        self.append_many([row])

    def append_many(self, rows: Sequence[LedgerRow | Mapping[str, Any]]) -> None:
        """Record several evaluations (as ``append``, each) in one write and one flush: the answers of one
        chunk of a pool batch as they arrive (PoolClient.evaluate). Every row is checked before any is
        written: a bad one is a ValueError with nothing written."""
        ds = []
        for row in rows:
            rec = row if isinstance(row, LedgerRow) else LedgerRow.from_dict(row)
            d = rec.to_dict()
            d["eval_id"], d["time"] = rec.eval_id or uuid.uuid4().hex, rec.time or time.time()
            ds.append(d)
        if not ds:
            return
        text = "".join(json.dumps(d) + "\n" for d in ds)
        with self._lock:
            if self._file is None:
                self._file = open(self.journal, "a", encoding="utf-8")
            self._file.write(text)
            self._file.flush()  # in the OS now: a crash of this process loses nothing
            self._rows.extend(ds)
            now = time.monotonic()
            if now - self._synced >= self.fsync_seconds:
                os.fsync(self._file.fileno())
                self._synced = now
            if now - self._checkpointed >= self.checkpoint_seconds:
                self._checkpoint()

    def _checkpoint(self) -> None:
        """This writer's journal rows -> a part of their own; then a fresh journal."""
        self._checkpointed = time.monotonic()
        if self._file is None:
            return
        self._file.close()
        self._file = None
        if self._rows:
            write_parquet_atomic(
                self.dir / f"part-{time.time_ns():020d}-{self.writer}.parquet",
                pa.Table.from_pylist(self._rows, schema=SCHEMA),
                fsync=True,
            )
        self.journal.unlink(missing_ok=True)
        fsync_dir(self.journal.parent)
        self._rows = []
        self.journal = self._new_journal()

    def close(self) -> None:
        with self._lock:
            self._checkpoint()

    def compact(self) -> None:
        """Fold every part and journal into one Parquet part; corrupt ones go to _quarantine/.
        Run it with the run-directory lock held and no writer active (start and end of a run).
        Crash-consistent: the new part is fsynced (file and directory) before anything is removed,
        and a crash between the two steps leaves duplicates that reading drops (same eval_id)."""
        self.close()
        compact(self.dir.parent)


def compact(run_dir: str | Path) -> None:
    """``Ledger.compact`` without a writer of one's own (the driver at the start of a resumed run)."""
    remove_compacted(Path(run_dir) / "ledger", write_compacted(run_dir))


def _files(d: Path) -> tuple[list[Path], list[Path]]:
    if not d.is_dir():
        return [], []
    journals = sorted(d.glob(f"{JOURNALS}/journal-*.jsonl")) + sorted(d.glob("journal-*.jsonl"))  # + older layout
    return sorted(d.glob("part-*.parquet")), journals


def _python_type(arrow: pa.DataType) -> type | tuple[type, ...]:
    """What a JSON journal line holds for a column of this Parquet type."""
    if pa.types.is_string(arrow):
        return str
    if pa.types.is_list(arrow):
        return list
    if pa.types.is_boolean(arrow):
        return bool
    if pa.types.is_floating(arrow):
        return (int, float)
    if pa.types.is_integer(arrow):
        return int
    raise TypeError(f"no Python type for the ledger column type {arrow}")


# what a row read back must hold to be used (a row of another shape is quarantined, not read): the
# LedgerRow fields marked read=True, each of its column's type
READ_REQUIRED: dict[str, type | tuple[type, ...]] = {
    f.name: _python_type(f.metadata["arrow"]) for f in fields(LedgerRow) if f.metadata["read"]
}


def _row_ok(row) -> bool:
    if not isinstance(row, dict):
        return False
    for key, tp in READ_REQUIRED.items():
        v = row.get(key)
        if not isinstance(v, tp) or (tp is not bool and isinstance(v, bool)):
            return False
    # a scorer never records a non-finite value (scoring.py refuses one), so NaN or inf here was not
    # computed by ghostsearch: left out and recomputed, never ranked
    return (
        all(isinstance(i, int) and not isinstance(i, bool) for i in row["removed"])
        and math.isfinite(row["fidelity"])
        and math.isfinite(row["value"])
        and _optional_k(row.get("cell_k"))
    )


def _optional_k(v) -> bool:
    """A cell's k as a row holds it: absent or null (a ledger written before the column), else a
    positive int."""
    return v is None or (isinstance(v, int) and not isinstance(v, bool) and v >= 1)


def _journal_rows(path: Path) -> tuple[list[dict], list[str]]:
    """(good rows, bad lines). The last line may be torn by a crash mid-write: skipped silently."""
    rows, bad = [], []
    lines = path.read_bytes().split(b"\n")
    for i, raw in enumerate(lines):
        if not raw.strip():
            continue
        try:
            row = json.loads(raw)
        except (json.JSONDecodeError, UnicodeDecodeError):
            if i < len(lines) - 1:  # not the last line: corrupt, not torn
                bad.append(raw.decode("utf-8", "replace"))
            continue
        if _row_ok(row):
            rows.append(row)
        else:
            bad.append(raw.decode("utf-8", "replace"))
    return rows, bad


def _rows_table(rows: list[dict], bad: list[str]) -> pa.Table:
    try:
        return pa.Table.from_pylist(rows, schema=SCHEMA)
    except (pa.ArrowException, TypeError, ValueError, OverflowError):  # one row of a wrong type: find it
        good = []
        for r in rows:
            try:
                pa.Table.from_pylist([r], schema=SCHEMA)
                good.append(r)
            except (pa.ArrowException, TypeError, ValueError, OverflowError):
                bad.append(json.dumps(r))
        return pa.Table.from_pylist(good, schema=SCHEMA)


def scan(run_dir: str | Path) -> tuple[pa.Table, list[Path], list[Path], dict[Path, list[str]]]:
    """(table, files read, corrupt parts, {journal: bad lines}), de-duplicated on eval_id."""
    for _ in range(5):  # a writer may checkpoint (journal -> part) while we read: read again
        try:
            return _scan(Path(run_dir) / "ledger")
        except FileNotFoundError:
            continue
    return _scan(Path(run_dir) / "ledger")


def _part(p: Path) -> tuple[pa.Table | None, list[str]]:
    """A part's good rows (None: unreadable, or not a ledger part at all: a column set other than
    the ledger's) and its bad rows (as JSON lines), each row validated like a journal line."""
    try:
        names = pq.read_schema(p).names
        if [n for n in READ_REQUIRED if n not in names] or [n for n in names if n not in SCHEMA.names]:
            return None, []  # a Parquet file of another schema: not read as all-null rows
        table = pq.read_table(p, schema=SCHEMA)
    except FileNotFoundError:
        raise
    except (pa.ArrowException, OSError, TypeError, ValueError):
        return None, []
    rows = table.to_pylist()
    ok = [_row_ok(r) for r in rows]
    if all(ok):
        return table, []
    return table.filter(pa.array(ok, pa.bool_())), [json.dumps(r, default=str) for r, g in zip(rows, ok) if not g]


def _same_evaluation(table: pa.Table) -> list[int]:
    """Indices of rows to keep: a computed row (not cached) of a cell's evaluation it already holds
    under another eval_id (a journal line copied or replayed by hand) is a duplicate, not a second
    evaluation (the broker answers a repeat from its cache, ``cached`` true)."""
    seen, keep = set(), []
    cols = [table.column(c).to_pylist() for c in ("cell", "objective_key", "removed", "fidelity", "cached")]
    losses = table.column("row_losses").to_pylist()
    for i, (cell, key, removed, fid, cached) in enumerate(zip(*cols)):
        if not cached:
            ident = (cell, key, tuple(removed), fid, None if losses[i] is None else len(losses[i]))
            if ident in seen:
                continue
            seen.add(ident)
        keep.append(i)
    return keep


def _scan(d: Path):
    journals_first = _files(d)[1]
    parts = _files(d)[0]
    tables, bad_parts, bad_rows = [], [], {}
    for p in parts:
        table, bad = _part(p)
        if table is not None:
            tables.append(table)
        if table is None or bad:  # moved aside whole (its good rows are kept in the compacted part)
            bad_parts.append(p)
        if bad:
            bad_rows[p] = bad
    rows = []
    for j in journals_first:
        got, bad = _journal_rows(j)
        rows += got
        if bad:
            bad_rows[j] = bad
    extra: list[str] = []
    if rows:
        tables.append(_rows_table(rows, extra))
    if extra:
        bad_rows[Path("(rows of a wrong type)")] = extra
    table = pa.concat_tables(tables) if tables else SCHEMA.empty_table()
    ids = table.column("eval_id").to_pylist()
    seen, keep = set(), []
    for i, e in enumerate(ids):
        if e not in seen:
            seen.add(e)
            keep.append(i)
    if len(keep) < len(ids):
        table = table.take(keep)
    keep = _same_evaluation(table)
    if len(keep) < len(table):
        table = table.take(keep)
    good = [p for p in parts if p not in bad_parts]
    return table, good + journals_first, bad_parts, bad_rows


_REPORTED: set = set()


def _report(bad_parts, bad_rows) -> None:
    for p in bad_parts:
        if p not in _REPORTED and p not in bad_rows:
            _REPORTED.add(p)
            log.warning(
                "ledger part %s is unreadable or not a ledger part; left out (a run that asks for its "
                "evaluations computes them again)",
                p,
            )
    for j, lines in bad_rows.items():
        if (j, len(lines)) not in _REPORTED:
            _REPORTED.add((j, len(lines)))
            log.warning(
                "ledger: %d malformed row(s) in %s left out (a run that asks for them computes them again)",
                len(lines),
                j,
            )


def read_ledger(run_dir: str | Path) -> pa.Table:
    """Every row of the run's ledger (parts and journals); corrupt ones are left out, in one line each."""
    table, _, bad_parts, bad_rows = scan(run_dir)
    _report(bad_parts, bad_rows)
    return table


def write_compacted(run_dir: str | Path) -> list[Path]:
    """Step 1 of compaction: quarantine what is corrupt, write every good row into one new part
    (fsynced, directory fsynced). Returns the files step 2 (``remove_compacted``) removes."""
    d = Path(run_dir) / "ledger"
    table, old, bad_parts, bad_rows = scan(run_dir)
    _report(bad_parts, bad_rows)
    parts = [p for p in old if p.suffix == ".parquet"]
    if not bad_parts and len(parts) == len(old) and len(parts) <= 1:
        return []  # already one good part (or nothing): nothing to fold
    # the good rows first (fsynced), then what is bad moves aside: never lost, never deleted
    write_parquet_atomic(d / f"part-{time.time_ns():020d}-compact.parquet", table, fsync=True)
    if bad_parts or bad_rows:
        q = d / QUARANTINE
        q.mkdir(exist_ok=True)
        for p in bad_parts:
            shutil.move(str(p), q / p.name)
        if bad_rows:
            with open(q / f"rows-{time.time_ns():020d}.jsonl", "w", encoding="utf-8") as f:
                for j, lines in bad_rows.items():
                    f.writelines(f"{json.dumps({'source': str(j), 'line': line})}\n" for line in lines)
                f.flush()
                os.fsync(f.fileno())
        fsync_dir(q)
        fsync_dir(d)
    return old


def remove_compacted(d: Path, old: list[Path]) -> None:
    """Step 2 of compaction: the folded parts and journals go (their rows are in the new part)."""
    for p in old:
        p.unlink(missing_ok=True)
    for folder in {p.parent for p in old}:
        fsync_dir(folder)
