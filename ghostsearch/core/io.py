"""Atomic file writes: a reader sees the old file or the new one, never half of one.

Every file ghostsearch writes into a run directory goes through here. The temporary name is
unique per writer (pid + random), so two writers never share a temporary file. ``cache_dir``: where
ghostsearch keeps what it derives once (converted models, task files, digests).
"""

from __future__ import annotations

import json
import os
import uuid
from pathlib import Path

from ghostsearch.core.errors import GhostsearchError

MIN_FREE = 1 << 20  # bytes: a disk with less free space than this is full for ghostsearch's purposes


def cache_dir() -> Path:
    """ghostsearch's cache (``GHOSTSEARCH_CACHE``, default ~/.cache/ghostsearch)."""
    return Path(os.environ.get("GHOSTSEARCH_CACHE", Path.home() / ".cache" / "ghostsearch"))


def temp_path(path: Path) -> Path:
    """A unique hidden sibling of ``path`` to write to before ``os.replace``."""
    return path.with_name(f".{path.name}.{os.getpid()}-{uuid.uuid4().hex[:8]}.tmp")


def replace_atomic(tmp: Path, path: Path, fsync: bool = False) -> None:
    if fsync:
        fd = os.open(tmp, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
    os.replace(tmp, path)
    if fsync:
        fsync_dir(path.parent)


def fsync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_text_atomic(path: str | Path, text: str) -> None:
    path = Path(path)
    tmp = temp_path(path)
    try:
        tmp.write_text(text)
        replace_atomic(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def _json_default(o):
    """A typed record (a frozen dataclass with ``to_dict``) as its JSON form; anything else as a float
    (numpy scalars)."""
    return o.to_dict() if hasattr(o, "to_dict") else float(o)


def write_json_atomic(path: str | Path, data) -> None:
    write_text_atomic(path, json.dumps(data, indent=2, default=_json_default))


def write_parquet_atomic(path: str | Path, table, fsync: bool = False) -> None:
    import pyarrow.parquet as pq

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = temp_path(path)
    try:
        pq.write_table(table, tmp)
        replace_atomic(tmp, path, fsync=fsync)
    finally:
        tmp.unlink(missing_ok=True)


def set_aside(path: Path) -> Path:
    """A damaged file ghostsearch wrote, renamed beside itself (``NAME.damaged-N``, the first free N),
    never deleted: what a rerun recomputes in its place, kept for a person to look at. Returns the new
    name."""
    n = 1
    while (aside := path.with_name(f"{path.name}.damaged-{n}")).exists():
        n += 1
    os.replace(path, aside)
    return aside


def check_writable(path: str | Path, what: str, fix: str = "choose another location") -> Path:
    """Before any expensive work: ``path`` (a directory, or the nearest existing one above it,
    where it would be created) must be writable and its disk not full. One GhostsearchError line
    naming ``what`` and ``fix`` otherwise. Writes nothing. Returns the directory checked."""
    path = Path(path).expanduser().absolute()
    target = next((p for p in [path, *path.parents] if p.exists()), Path("/"))
    if not target.is_dir():
        return target  # a file in the way: the caller's own checks name it
    if not os.access(target, os.W_OK | os.X_OK):
        read_only = bool(os.statvfs(target).f_flag & os.ST_RDONLY)
        why = "is on a read-only file system" if read_only else "is not writable (permissions or an immutable flag)"
        raise GhostsearchError(f"{what} {target} {why}; {fix}")
    st = os.statvfs(target)
    if st.f_bavail * st.f_frsize < MIN_FREE:
        raise GhostsearchError(
            f"{what} {target} is on a full disk ({st.f_bavail * st.f_frsize} bytes free); make room or {fix}"
        )
    return target


# what ghostsearch writes into a run directory (rundir.layout, runner, compare, report, recover,
# eval): a file a command is given to write (ledger --csv, eval --out) never lands on one of these
RUN_FILES = (
    "config.yaml",
    "env.json",
    "identity.json",
    "result.json",
    "pool.json",
    "looks.json",
    ".lock",
    "recovery.parquet",
    "eval.parquet",
    "eval_items.parquet",
    "comparison.parquet",
    "report.md",
    "report.html",
)
RUN_FOLDERS = ("ledger", "cells", "evals", "lm_eval", "plots")
EXPORT_MARKER = ".ghostsearch-export"  # in every directory ghostsearch export writes


def run_dir_of(path: Path) -> Path | None:
    """The ghostsearch run directory ``path`` is in (or is), else None: a folder holding
    config.yaml beside ledger/ or result.json."""
    for d in [path, *path.parents]:
        if (d / "config.yaml").is_file() and ((d / "ledger").is_dir() or (d / "result.json").is_file()):
            return d
    return None


def check_output(path: str | Path, what: str, ours=None, own: tuple[str, ...] = ()) -> Path:
    """The one guard of every file a command is told to write (``ledger --csv``, ``eval --out``):
    never a file of a run directory or of an export (config.yaml, result.json, ledger/ ...; ``own``
    names the run-directory files this command itself writes, e.g. eval's eval.parquet), never a
    directory, and an existing file only when ``ours(path)`` says this command wrote it before (so
    a rerun replaces its own output and nothing else). One GhostsearchError line otherwise, before
    any work; writes nothing. Returns the path."""
    p = Path(path).expanduser()
    real = Path(os.path.realpath(p))  # a symlink is judged by what it points at
    if real.is_dir():
        raise GhostsearchError(f"{what} {path} is a directory; give a file path")
    if real.exists() and not real.is_file():  # a device (/dev/zero: read without end), a FIFO (blocks), a socket
        raise GhostsearchError(f"{what} {path} is not a regular file (a device, FIFO or socket); give a file path")
    if not real.parent.is_dir():
        where = f"{real.parent} does not exist" if not real.parent.exists() else f"{real.parent} is not a directory"
        raise GhostsearchError(f"{what} {path}: the folder {where}; create it first or give another path")
    run = run_dir_of(real.parent)
    if run is not None:
        rel = real.relative_to(run)
        if str(rel) not in own and (rel.parts[0] in RUN_FOLDERS + RUN_FILES or real.exists()):
            raise GhostsearchError(
                f"{what} {path} would write over {rel} of the run directory {run}; give a path outside the "
                "run directory"
            )
    for d in real.parents:
        if (d / EXPORT_MARKER).exists():
            raise GhostsearchError(
                f"{what} {path} is inside the exported model directory {d}; write it outside the export"
            )
    if real.exists() and run is None and not (ours is not None and ours(real)):
        raise GhostsearchError(
            f"{what} {path} exists and was not written by this command; choose another path or delete it first"
        )
    return p
