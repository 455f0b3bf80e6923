"""Atomic file writes: a reader sees the old file or the new one, never half of one.

Every file ghostsearch writes into a run directory goes through here. The temporary name is
unique per writer (pid + random), so two writers never share a temporary file.
"""
from __future__ import annotations

import json
import os
import uuid
from pathlib import Path


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


def write_json_atomic(path: str | Path, data) -> None:
    write_text_atomic(path, json.dumps(data, indent=2, default=float))


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
