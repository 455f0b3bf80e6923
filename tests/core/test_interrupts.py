"""What a command inherits decides how Ctrl-C, SIGTERM and SIGHUP reach it (issue 48: Ctrl-C to
``ghostsearch target`` "sometimes not honoured" was a CI job started in the background, whose shell had
set SIGINT to ignored, as a shell without job control does for `cmd &`). Each case is a real process,
started the way the case says (the disposition or mask set, then ``exec``, which keeps both), that calls
``interrupts.install`` as the CLI does, then reads its stdin; the signal is sent by pid, then "go".

- a signal the command starts with ignored stays ignored (``nohup``: SIGHUP; a background ``&``: SIGINT);
  before, SIGHUP was taken over anyway, so `nohup ghostsearch ...` stopped when its terminal closed;
- a signal it starts with blocked (Ray blocks SIGINT in every process it starts, and the mask survives
  ``exec``: a command started from a Ray task) is unblocked; before, Ctrl-C stayed pending to the end."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

CHILD = """
import sys
from ghostsearch.core import interrupts
interrupts.install()
try:
    print("ready", flush=True)  # inside the try: a signal right after it lands in the read
    sys.stdin.readline()  # the test's "go", written once the signal has left the kernel's pending set
except KeyboardInterrupt as e:
    print("interrupted", interrupts.exit_code(e), flush=True)
else:
    print("slept", flush=True)
"""

# (how it is started, the signal sent, what it must print)
CASES = [
    ("default", signal.SIGINT, "interrupted 130"),
    ("default", signal.SIGTERM, "interrupted 143"),
    ("default", signal.SIGHUP, "interrupted 129"),
    ("SIGINT blocked", signal.SIGINT, "interrupted 130"),  # a command started from a Ray worker
    ("SIGTERM blocked", signal.SIGTERM, "interrupted 143"),
    ("SIGHUP ignored", signal.SIGHUP, "slept"),  # nohup
    ("SIGINT ignored", signal.SIGINT, "slept"),  # `cmd &` in a script
]


def start(how: str) -> subprocess.Popen:
    """CHILD in a process started as ``how`` says: ``exec`` keeps an ignored disposition and a blocked mask."""
    setup = ""
    if how != "default":
        name, state = how.split()
        s = f"signal.{name}"
        setup = (
            f"signal.pthread_sigmask(signal.SIG_BLOCK, {{{s}}})"
            if state == "blocked"
            else f"signal.signal({s}, signal.SIG_IGN)"
        )
    # every case starts from the defaults, whatever pytest inherited (CI started with `cmd &` ignores SIGINT)
    reset = "for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP): signal.signal(s, signal.SIG_DFL)\n"
    reset += "signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT, signal.SIGTERM, signal.SIGHUP})"
    run = "os.execv(sys.executable, [sys.executable, '-c', sys.argv[1]])"
    launcher = f"import os, signal, sys\n{reset}\n{setup}\n{run}"
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.Popen(
        [sys.executable, "-c", launcher, CHILD], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env
    )


def pending(pid: int, sig: int) -> bool:
    """``sig`` generated but not yet delivered to ``pid`` (held by a blocked mask, or not yet scheduled)."""
    status = Path(f"/proc/{pid}/status").read_text()
    bits = [int(x.split()[1], 16) for x in status.splitlines() if x.startswith(("SigPnd:", "ShdPnd:"))]
    return any(b >> (sig - 1) & 1 for b in bits)


def test_inherited_dispositions_and_masks_decide_what_a_signal_does():
    procs = [(how, sig, want, start(how)) for how, sig, want in CASES]  # all at once: one sleep for all
    got = []
    try:
        for how, sig, _, p in procs:
            assert p.stdout is not None and p.stdout.readline().strip() == "ready", how
            os.kill(p.pid, sig)
        for how, sig, _, p in procs:  # delivered (or discarded: ignored), else held: then "go"
            t0 = time.monotonic()
            while p.poll() is None and pending(p.pid, sig) and time.monotonic() - t0 < 2:
                time.sleep(0.01)
            out, _ = p.communicate("go\n", timeout=30)  # (a pipe it has closed: communicate ignores EPIPE)
            got.append((how, signal.Signals(sig).name, out.strip(), p.returncode))
    finally:
        for *_, p in procs:
            if p.poll() is None:
                p.kill()
    want = [(how, signal.Signals(sig).name, w, 0) for how, sig, w, _ in procs]
    assert got == want


@pytest.mark.parametrize("how", ["SIGINT blocked", "SIGHUP ignored"])
def test_restore_gives_back_the_mask_and_the_ignored_handler(how):
    """A CLI command run inside another program (a test calling ``main``) leaves its signals as it found them."""
    name, state = how.split()
    s = getattr(signal, name)
    code = f"""
import signal
from ghostsearch.core import interrupts
s = signal.{name}
signal.signal(signal.SIGINT, signal.default_int_handler)  # Python's own, whatever pytest inherited (above)
signal.signal(signal.SIGHUP, signal.SIG_DFL)
signal.pthread_sigmask(signal.SIG_UNBLOCK, {{signal.SIGINT, signal.SIGHUP}})
{"signal.pthread_sigmask(signal.SIG_BLOCK, {s})" if state == "blocked" else "signal.signal(s, signal.SIG_IGN)"}
before = (signal.getsignal(s), s in signal.pthread_sigmask(signal.SIG_BLOCK, []))
b = interrupts.install()
during = (signal.getsignal(s), s in signal.pthread_sigmask(signal.SIG_BLOCK, []))
interrupts.restore(b)
interrupts.reinstall()  # after restore: takes nothing over
after = (signal.getsignal(s), s in signal.pthread_sigmask(signal.SIG_BLOCK, []))
print(before == after, during[1], during[0] == signal.SIG_IGN)
"""
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=dict(os.environ, PYTHONPATH=str(ROOT))
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["True", "False", str(state == "ignored")], (s, out.stdout)


# An interrupted command's process ends as Python's exit begins (issue 48: SIGTERM of `target` under 16 busy processes
# took ~20-30 s to end, where docs/reliability.md promises 10 s; py-spy: the interrupted line came at once, then the
# interpreter's last garbage collection (gc_collect_main, from exit) walked the run's objects, ~2 CPU-s after target's
# repairs, at 1/17 of 2 cores). Here the real CLI is the process's command, its command holding a large object graph
# when a SIGTERM lands; a hook registered before the command stands for the interpreter's teardown.
INTERRUPTED = """
import atexit, os, signal, sys, time
atexit.register(lambda: print("teardown", flush=True))
from ghostsearch.cli import ledger, main

def run(args):
    graph = [{"i": i} for i in range(300_000)]  # what a run holds: the teardown's garbage collection walks it
    os.kill(os.getpid(), signal.SIGTERM)
    time.sleep(30)

ledger.run = run
sys.argv = ["ghostsearch", "ledger", "runs/x"]
sys.exit(main())
"""


def test_an_interrupted_command_ends_without_the_interpreters_teardown():
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    out = subprocess.run([sys.executable, "-c", INTERRUPTED], env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 143 and out.stderr.splitlines()[-1] == "ghostsearch: interrupted", out
    assert "teardown" not in out.stdout, "the interpreter's teardown ran after the interrupted line"  # the old code
