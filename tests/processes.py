"""A search as a user runs it, in a process of its own, and the processes under it: for the tests
that signal, stop or kill a driver or its scorers (tests/cli/test_faults.py, test_stalled_scorer.py,
tests/pool/test_pool.py)."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Iterator

import psutil

ROOT = Path(__file__).resolve().parents[1]
# A command started as a terminal's foreground job is: SIGINT, SIGTERM and SIGHUP at their default actions and
# unblocked, whatever the test runner inherited (a CI job started in the background runs with SIGINT ignored,
# under nohup with SIGHUP ignored; exec keeps both and ghostsearch respects an inherited ignore, as Python does
# for SIGINT: core/interrupts.py). Then os.execv: the same pid, so signals sent to it reach ghostsearch.
AS_A_TERMINAL = [
    sys.executable,
    "-c",
    "import os, signal, sys\n"
    "for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP): signal.signal(s, signal.SIG_DFL)\n"
    "signal.pthread_sigmask(signal.SIG_UNBLOCK, (signal.SIGINT, signal.SIGTERM, signal.SIGHUP))\n"
    "os.execv(sys.executable, [sys.executable, *sys.argv[1:]])",
]
CMD = [*AS_A_TERMINAL, "-m", "ghostsearch"]


def env() -> dict:
    """This environment, with this checkout's package first on the path."""
    return dict(os.environ, PYTHONPATH=str(ROOT))


def run_search(cfg: Path, *args: str, timeout: float = 600) -> subprocess.CompletedProcess:
    """``ghostsearch search CFG --no-progress ARGS`` to its end (output captured as text)."""
    return subprocess.run(
        [*CMD, "search", str(cfg), "--no-progress", *args], env=env(), capture_output=True, text=True, timeout=timeout
    )


@contextlib.contextmanager
def search_process(cfg: Path, *args: str, **popen) -> Iterator[subprocess.Popen]:
    """``ghostsearch search CFG --no-progress ARGS`` in a session of its own, so the local Ray it
    starts is in its process group (stdout and stderr piped as text unless ``popen`` says otherwise).
    On leaving, a driver still running is killed with its whole group (SIGKILL) and reaped."""
    kw = {"stdout": subprocess.PIPE, "stderr": subprocess.PIPE, "text": True, **popen}
    p = subprocess.Popen([*CMD, "search", str(cfg), "--no-progress", *args], env=env(), start_new_session=True, **kw)
    try:
        yield p
    finally:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()


def descendants(pid: int, marker: str | None = None) -> list[psutil.Process]:
    """The processes under ``pid``, recursively (a driver's local Ray: GCS, raylet, agents, workers);
    with ``marker``, only those whose command line holds it (``ScorerActor``: the pool's scorers).
    One that ends while it is looked at is left out."""
    out = []
    for q in psutil.Process(pid).children(recursive=True):
        try:
            if marker is None or marker in " ".join(q.cmdline()):
                out.append(q)
        except psutil.Error:
            pass
    return out
