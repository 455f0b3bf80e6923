"""One driver per run directory: an exclusive ``flock`` on RUN_DIR/.lock, held for the run.

The lock file names its holder (pid, host, start time, command) so that a refused driver can say
who holds it. A lock whose holder died is stale: the kernel released the ``flock`` with the
process, so the next driver simply takes it over (and says so in the log).
"""

from __future__ import annotations

import fcntl
import json
import logging
import os
import socket
import sys
import time
from pathlib import Path

from ghostsearch.core.errors import GhostsearchError

LOCK_FILE = ".lock"
log = logging.getLogger("ghostsearch.rundir")
_HELD: dict[Path, int] = {}  # run dir -> fd of its lock file, per process


def _holder(text: str) -> dict:
    try:
        h = json.loads(text)
    except ValueError:
        return {}
    return h if isinstance(h, dict) else {}  # a hand-edited or foreign lock file names no holder


def acquire(run_dir: Path) -> None:
    """Take RUN_DIR's lock or raise a GhostsearchError naming its holder."""
    run_dir = Path(run_dir).resolve()
    if run_dir in _HELD:
        raise GhostsearchError(
            f"run directory {run_dir} is already in use by this process; "
            "run one search or compare per run directory at a time"
        )
    try:
        fd = os.open(run_dir / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o644)
    except OSError as e:  # a read-only or full disk, an immutable lock file: one line, before any work
        raise GhostsearchError(
            f"cannot open the lock of run directory {run_dir} ({e.strerror}); make the run "
            "directory writable, or choose another out= (a copy of it resumes there)"
        ) from None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        h = _holder(os.pread(fd, 4096, 0).decode("utf-8", "replace"))
        os.close(fd)
        since = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(h["time"])) if "time" in h else "?"
        raise GhostsearchError(
            f"run directory {run_dir} is in use by pid {h.get('pid', '?')} on "
            f"{h.get('host', '?')} (since {since}); wait for it to finish or choose "
            "another out="
        ) from None
    old = _holder(os.pread(fd, 4096, 0).decode("utf-8", "replace"))
    if old.get("pid"):
        log.info(
            "taking over the stale lock of pid %s on %s (it ended without releasing it)",
            old.get("pid"),
            old.get("host"),
        )
    me = {"pid": os.getpid(), "host": socket.gethostname(), "time": time.time(), "command": " ".join(sys.argv)}
    os.ftruncate(fd, 0)
    os.pwrite(fd, json.dumps(me).encode(), 0)
    _HELD[run_dir] = fd


def release(run_dir: Path) -> None:
    """Release RUN_DIR's lock if this process holds it (the file stays, empty: no holder)."""
    fd = _HELD.pop(Path(run_dir).resolve(), None)
    if fd is not None:
        os.ftruncate(fd, 0)
        fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)


def held(run_dir: Path) -> bool:
    return Path(run_dir).resolve() in _HELD
