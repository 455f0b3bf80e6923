"""Ctrl-C, SIGTERM and SIGHUP end a CLI command the same way.

The CLI (``cli/main.py``) installs handlers that raise ``Interrupted`` (a ``KeyboardInterrupt``)
in the main thread, so every ``finally`` runs: the ledger's journal is checkpointed into a part,
the run directory's lock is released, a local Ray is stopped, and the command prints
``ghostsearch: interrupted`` (exit 128 + the signal). ``ray.init`` replaces the SIGTERM handler (with
its own ``sys.exit``, and its core worker's C++ handler that prints stack lines), so ``pool.connect``
calls ``reinstall`` after it. A library caller that never called ``install`` keeps its own handlers.

What the command inherits decides two things (issue 48: Ctrl-C "sometimes not honoured" was a test
run by a CI job started in the background, whose shell had set SIGINT to ignored):

- a signal the command was started with **ignored** stays ignored, as Python itself leaves SIGINT and
  as ``nohup`` (SIGHUP) and a script's ``cmd &`` without job control (SIGINT) ask; ``ignored()`` names
  them. Before, SIGHUP was taken over anyway, so ``nohup ghostsearch ...`` stopped when its terminal closed.
- a signal the command was started with **blocked** (Ray blocks SIGINT in every process it starts, and
  a blocked mask survives ``exec``: a command started from a Ray task or actor) is unblocked, else
  Ctrl-C would wait, pending, for the command's end.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import sys
import threading

SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
_ours: tuple[signal.Signals, ...] = ()  # the signals install took over (those not ignored at the time)
_last: int | None = None  # the last of them received (Ray's wait re-raises a plain KeyboardInterrupt)


class Interrupted(KeyboardInterrupt):
    """Ctrl-C, a SIGTERM or a SIGHUP, raised where the main thread was."""

    def __init__(self, signum: int):
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


def _raise(signum, frame):
    global _last
    _last = signum
    raise Interrupted(signum)


def ignored() -> list[signal.Signals]:
    """Those of SIGNALS this process ignores now (inherited: ``nohup``, a background ``&``)."""
    return [s for s in SIGNALS if signal.getsignal(s) == signal.SIG_IGN]


def install() -> dict:
    """SIGINT, SIGTERM and SIGHUP raise ``Interrupted`` from now on (main thread only), except those
    ignored now, which stay ignored; any of them blocked is unblocked. Returns what it changed, for
    ``restore``."""
    global _ours, _last
    if threading.current_thread() is not threading.main_thread():
        return {}
    _last = None
    skip = ignored()
    _ours = tuple(s for s in SIGNALS if s not in skip)
    before: dict = {s: signal.signal(s, _raise) for s in _ours}
    blocked = signal.pthread_sigmask(signal.SIG_UNBLOCK, SIGNALS) & set(SIGNALS)
    before["blocked"] = blocked
    return before


def restore(before: dict) -> None:
    """The handlers and the mask ``install`` changed (a CLI command run inside another program, e.g. a test)."""
    global _ours
    before = dict(before)
    blocked = before.pop("blocked", set())
    for s, handler in before.items():
        signal.signal(s, handler if handler is not None else signal.SIG_DFL)
    if blocked:
        signal.pthread_sigmask(signal.SIG_BLOCK, blocked)
    _ours = ()


def reinstall() -> None:
    """Ours again after a library (``ray.init``) replaced them, for the signals ``install`` took over."""
    for s in _ours:
        signal.signal(s, _raise)


def exit_code(e: KeyboardInterrupt) -> int:
    """128 + the signal's number, as a shell reports a process ended by it (Ctrl-C: 130). A signal that
    landed while the driver waited in ``ray.get``/``ray.wait`` comes back from Ray as a plain
    ``KeyboardInterrupt`` (its C++ wait turns ours into its own): the last signal received names it."""
    return 128 + int(getattr(e, "signum", None) or _last or signal.SIGINT)


def leave_at_exit(code: int) -> None:
    """The process ends with ``code`` as soon as Python's exit begins, without the interpreter's teardown: its last
    garbage collection walks every object the command built (the model, its data: ~2 CPU-s after target's repairs
    were interrupted, measured with ``py-spy dump --native``: ``gc_collect_main`` from ``exit``), which on a machine
    giving a session 1/17 of 2 cores took ~20 s after the interrupted line (a SIGTERM under 16 busy processes; the
    promise is 10 s). By then every ``finally`` of the command has run (the ledger's checkpoint, the lock, Ray's
    shutdown); logging and the standard streams are flushed first. Not while a Ray this process joined is still
    connected: its own exit hook disconnects it."""
    import atexit

    def leave() -> None:
        ray = sys.modules.get("ray")
        if ray is not None and getattr(ray, "is_initialized", lambda: False)():
            return
        logging.shutdown()
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(Exception):
                stream.flush()
        os._exit(code)

    atexit.register(leave)  # last registered, first run: before the hooks of what the command imported
