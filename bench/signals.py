"""Ctrl-C (SIGINT to the process group, as a terminal sends it) at random moments of `ghostsearch target`'s
search: how often does it end the command (exit 130, `ghostsearch: interrupted` last, within --wait s)?

Issue 48's "Ctrl-C mid-search sometimes not honoured" (test_target_signals, ef091ff's xfail): the test runs
that missed it were started in the background (a CI job, `cmd &` in a shell without job control), which
starts every process below with SIGINT ignored; exec keeps that, and Python (and now ghostsearch for SIGHUP
too) leaves an inherited ignore alone. --start says how the command starts:

  default   SIGINT at its default action (a terminal's foreground job)
  ignored   SIGINT ignored (a background job of a script or CI): not honoured, by design
  blocked   SIGINT blocked (a command started from a Ray task: Ray blocks SIGINT in its processes)
  terminal  ignored in this process, the command started through tests/processes.py's AS_A_TERMINAL,
            as the tests now start it

    python bench/signals.py --start default --tries 6
    python bench/signals.py --start ignored --tries 4 --wait 45   # each miss runs on to the wait

A tiny random Llama (6 blocks, tests/conftest.py) in /tmp; each try is a fresh run directory and a local Ray.
--code runs another checkout's package (e.g. `git archive HEAD | tar -x -C /tmp/old`)."""

from __future__ import annotations

import argparse
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OVER = [
    "dtype=fp32",
    "target.ks=[1,2]",
    "target.looks=[16,32]",
    "target.quality.max_ratio=1.5",
    "calibration.n_seq=32",  # an evaluation lasts long enough to be signalled mid-search
    "calibration.seq_len=128",
    "recovery.n_seq=24",
    "recovery.seq_len=256",
    "eval.ppl_seq_len=128",
    "eval.batch_size=4",
    "pool.actors=1",
]
SETUP = {
    "default": "signal.signal(signal.SIGINT, signal.SIG_DFL)",
    "ignored": "signal.signal(signal.SIGINT, signal.SIG_IGN)",
    "blocked": "signal.signal(signal.SIGINT, signal.SIG_DFL); "
    "signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})",
}


def tiny_model(where: Path) -> Path:
    if not (where / "config.json").exists():
        sys.path.insert(0, str(ROOT))
        from transformers import AutoTokenizer

        from ghostsearch.model.models import model_path
        from tests.conftest import tiny_model as build

        build("llama", 6).save_pretrained(where, safe_serialization=True)
        AutoTokenizer.from_pretrained(model_path("smollm2-135m")[0]).save_pretrained(where)
    return where


def command(start: str, model: Path, out: Path) -> list[str]:
    args = ["-m", "ghostsearch", "-q", "target", str(ROOT / "configs" / "target-quick.yaml"), f"model={model}"]
    args += [f"out={out}", *OVER]
    if start == "terminal":
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # this process as a background job's
        sys.path.insert(0, str(ROOT))
        from tests.processes import AS_A_TERMINAL

        return [*AS_A_TERMINAL, *args]
    # set the disposition, then exec: what the command inherits, with the same pid
    launch = f"import os, signal, sys; {SETUP[start]}; os.execv(sys.executable, [sys.executable, *sys.argv[1:]])"
    return [sys.executable, "-c", launch, *args]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--start", choices=["default", "ignored", "blocked", "terminal"], default="default")
    ap.add_argument("--tries", type=int, default=6)
    ap.add_argument("--wait", type=float, default=60, help="seconds after the signal before a try counts as missed")
    ap.add_argument("--seed", type=int, default=0, help="the random delays after the first ledger row")
    ap.add_argument("--code", default=str(ROOT), help="the checkout whose package runs (its folder)")
    ap.add_argument("--model", default="/tmp/gs-signals-model")
    a = ap.parse_args()
    random.seed(a.seed)
    model = tiny_model(Path(a.model))
    honoured = 0
    for t in range(a.tries):
        out = Path(tempfile.mkdtemp(prefix="gs-signals-")) / "run"
        p = subprocess.Popen(
            command(a.start, model, out),
            cwd=a.code,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )
        t0 = time.monotonic()
        while p.poll() is None and time.monotonic() - t0 < 300:
            if (out / "ledger").is_dir() and any((out / "ledger").iterdir()):
                break
            time.sleep(0.05)
        delay = random.uniform(0, 4)
        time.sleep(delay)
        state = "mid-search" if p.poll() is None else f"already ended ({p.returncode})"
        try:
            os.killpg(p.pid, signal.SIGINT)
        except ProcessLookupError:
            pass
        try:
            _, err = p.communicate(timeout=a.wait)
            code: int | str = p.returncode
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            _, err = p.communicate()
            code = f"still running {a.wait:g} s later"
        last = (err.strip().splitlines() or [""])[-1]
        ok = code == 130 and last == "ghostsearch: interrupted"
        honoured += ok
        print(
            f"try {t}: Ctrl-C {delay:.2f} s after the first ledger row ({state}): exit {code}, "
            f"{'honoured' if ok else 'NOT honoured (last line: ' + last[:100] + ')'}",
            flush=True,
        )
    load = os.getloadavg()[0]
    print(f"--start {a.start}, code {a.code}: honoured {honoured} of {a.tries} (load {load:.1f})", flush=True)


if __name__ == "__main__":
    main()
