"""SIGTERM and SIGHUP end a CLI command the way Ctrl-C does.

The CLI (``cli/main.py``) installs handlers that raise ``Interrupted`` (a ``KeyboardInterrupt``)
in the main thread, so every ``finally`` runs: the ledger's journal is checkpointed into a part,
the run directory's lock is released, a local Ray is stopped, and the command prints
``ghostsearch: interrupted``. ``ray.init`` replaces the SIGTERM handler (with its own
``sys.exit``, and its core worker's C++ handler that prints stack lines), so ``pool.connect``
calls ``reinstall`` after it. A library caller that never called ``install`` keeps its own handlers.
"""

from __future__ import annotations

import signal
import threading

SIGNALS = (signal.SIGTERM, signal.SIGHUP)
_installed = False


class Interrupted(KeyboardInterrupt):
    """A SIGTERM or SIGHUP, raised where the main thread was."""

    def __init__(self, signum: int):
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


def _raise(signum, frame):
    raise Interrupted(signum)


def install() -> dict:
    """SIGTERM and SIGHUP raise ``Interrupted`` from now on (main thread only). Returns the
    handlers they had, for ``restore``."""
    global _installed
    if threading.current_thread() is not threading.main_thread():
        return {}
    before = {s: signal.signal(s, _raise) for s in SIGNALS}
    _installed = True
    return before


def restore(before: dict) -> None:
    """The handlers ``install`` replaced (a CLI command run inside another program, e.g. a test)."""
    global _installed
    for s, handler in before.items():
        signal.signal(s, handler if handler is not None else signal.SIG_DFL)
    _installed = False if before else _installed


def reinstall() -> None:
    """Ours again after a library (``ray.init``) replaced them, if ``install`` was called."""
    if _installed:
        install()


def exit_code(e: KeyboardInterrupt) -> int:
    """128 + the signal's number, as a shell reports a process ended by it (Ctrl-C: 130)."""
    return 128 + getattr(e, "signum", signal.SIGINT)
