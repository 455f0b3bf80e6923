"""The pool's priority on a busy machine (issue 48): the same search under N busy processes (nice 0, their own
sessions: bench/load.py's) with the local Ray's workers at Ray's own ``RAY_worker_niceness`` (15: the scorers and
the broker at the driver's niceness + 15, what every run got before 1968921) and at ghostsearch's default (the
variable unset: the driver's niceness), one arm after another in the same run, so the ratio is against a baseline
measured beside it.

    python bench/priority.py [--busy 4] [--cap 300] [--arms 15,default] [--repeats 1] [--session own|same]
                             [--config configs/smollm2-quick.yaml] [key=value ...]

Where niceness counts: Linux's autogroups (``/proc/sys/kernel/sched_autogroup_enabled`` = 1, tasks in the root
CPU cgroup) share the CPU between sessions first and by niceness only within a session. ``--session own`` (the
default): every busy process and the run in a session of its own, as bench/load.py's "other sessions" (the run's
workers compete by niceness only with their own driver, GCS, raylet and dashboard); ``--session same``: this script
moves to a new session and starts the busy processes and the runs in it (a load in the run's own session or cgroup,
as in a container, a batch job's shell, or a machine without autogroups).

Each run is ``ghostsearch search CONFIG out=<fresh dir> --no-progress`` in a session of its own, ended (SIGTERM to
its group, then SIGKILL) when it has not finished within ``--cap`` seconds: such a run is reported as cut, with the
evaluations it ledgered. Per run, one JSON line: the workers' niceness as seen (psutil, the ScorerActor processes),
seconds to the first ledgered evaluation (Ray's start and the scorers' model load), evaluations and their rate after
the first, the wall, the answer, and ``uptime`` before and after. Then per arm pair the ratios (rate, wall where both
finished) against the first arm.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import benchenv  # noqa: F401
import psutil
from load import ROOT, answer, busy, tree_usage


def uptime() -> str:
    return subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()


def rows(out: Path) -> int:
    """Evaluations ledgered so far: the journals' lines and the parts' rows."""
    import pyarrow.parquet as pq

    led, n = out / "ledger", 0
    for j in (led / "_journal").glob("*.jsonl") if (led / "_journal").is_dir() else ():
        try:
            n += sum(1 for line in j.read_text().splitlines() if line.strip())
        except OSError:
            pass
    for part in led.glob("part-*.parquet") if led.is_dir() else ():
        try:
            n += pq.read_metadata(part).num_rows
        except Exception:  # noqa: BLE001  (a part being written or compacted)
            pass
    return n


def one(arm: str, config: str, over: list[str], out: Path, cap: float, own_session: bool = True) -> dict:
    env = dict(os.environ)
    env.pop("RAY_worker_niceness", None)
    if arm != "default":
        env["RAY_worker_niceness"] = arm
    before = uptime()
    t0 = time.monotonic()
    p = subprocess.Popen(
        [sys.executable, "-m", "ghostsearch", "search", config, f"out={out}", *over, "--no-progress"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
        env=env,
        start_new_session=own_session,
    )
    first = nice = None
    cpu: dict = {}
    peak = [0]
    n, cut = 0, False
    with tempfile.TemporaryFile("w+") as so, tempfile.TemporaryFile("w+") as se:
        # drain the pipes in the background (a full pipe would stop the run)
        import threading

        def pump(src, dst):
            for line in src:
                dst.write(line)

        threads = [threading.Thread(target=pump, args=x, daemon=True) for x in ((p.stdout, so), (p.stderr, se))]
        for t in threads:
            t.start()
        while p.poll() is None:
            el = time.monotonic() - t0
            if el > cap:
                cut = True
                end(p, own_session)
                break
            tree_usage(p.pid, cpu, peak)
            if nice is None:
                try:
                    sc = [q for q in psutil.Process(p.pid).children(recursive=True) if "ScorerActor" in q.name()]
                    if sc:
                        nice = sorted({q.nice() for q in sc})
                except psutil.Error:
                    pass
            if first is None and rows(out) > 0:
                first = el
            time.sleep(0.5)
        wall = time.monotonic() - t0
        for t in threads:
            t.join(10)
        se.seek(0)
        err = se.read()
    n = rows(out)
    if first is None and n:
        first = wall
    rate = (n - 1) / (wall - first) if first is not None and n > 1 and wall > first else None
    return {
        "arm": arm,
        "worker_niceness_seen": nice,
        "driver_niceness": os.nice(0),
        "exit": p.returncode,
        "cut": cut,
        "seconds": round(wall, 1),
        "first_row_s": None if first is None else round(first, 1),
        "rows": n,
        "rows_per_s_after_first": None if rate is None else round(rate, 4),
        "answer": answer("search", out),
        "cpu_s": round(sum(cpu.values()), 1),  # sampled every 0.5 s: a process's last half second is missed
        "peak_rss_gib": round(peak[0] / 2**30, 2),
        "last_line": (err.strip().splitlines() or [""])[-1][:200],
        "uptime_before": before,
        "uptime_after": uptime(),
    }


def end(p: subprocess.Popen, own_session: bool) -> None:
    """SIGTERM to the run (its group, or in this session its process tree), SIGKILL 30 s later."""
    if own_session:
        os.killpg(p.pid, signal.SIGTERM)
    else:
        p.send_signal(signal.SIGTERM)
    try:
        p.wait(30)
    except subprocess.TimeoutExpired:
        try:
            procs = [psutil.Process(p.pid), *psutil.Process(p.pid).children(recursive=True)]
        except psutil.Error:
            procs = []
        for q in procs:
            try:
                q.kill()
            except psutil.Error:
                pass
        p.wait()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--busy", type=int, default=4)
    ap.add_argument("--cap", type=float, default=300.0, help="seconds a run may take before it is cut")
    ap.add_argument("--arms", default="15,default", help="RAY_worker_niceness values ('default': unset)")
    ap.add_argument("--repeats", type=int, default=1)
    ap.add_argument("--config", default="configs/smollm2-quick.yaml")
    ap.add_argument("--session", choices=("own", "same"), default="own", help="the busy processes' and runs' sessions")
    ap.add_argument("overrides", nargs="*")
    a = ap.parse_args()
    arms = a.arms.split(",")
    results: list[dict] = []
    own = a.session == "own"
    if not own:
        os.setsid()  # one session (one autogroup) for this script, its busy processes and the runs
    procs = busy(a.busy, new_session=own)
    try:
        with tempfile.TemporaryDirectory(prefix="ghostsearch-priority-") as tmp:
            for r in range(a.repeats):
                for arm in arms:
                    res = one(arm, a.config, a.overrides, Path(tmp) / f"{arm}-{r}", a.cap, own)
                    res["busy"], res["session"] = a.busy, a.session
                    results.append(res)
                    print(json.dumps(res), flush=True)
    finally:
        for p in procs:
            p.kill()
        for p in procs:
            p.wait()
    base = arms[0]
    for arm in arms[1:]:
        for r in range(a.repeats):
            b, x = results[r * len(arms)], results[r * len(arms) + arms.index(arm)]
            rate = (
                f"x{x['rows_per_s_after_first'] / b['rows_per_s_after_first']:.2f}"
                if x["rows_per_s_after_first"] and b["rows_per_s_after_first"]
                else "n/a"
            )
            wall = f"x{b['seconds'] / x['seconds']:.2f}" if not (b["cut"] or x["cut"]) else "n/a (a run was cut)"
            print(
                f"repeat {r}, {a.busy} busy: RAY_worker_niceness={arm} against {base}: evaluations/s after the first "
                f"{rate}, wall speed-up {wall}, first evaluation {x['first_row_s']} s against {b['first_row_s']} s, "
                f"same answer: {x['answer'] == b['answer'] and x['answer'] is not None}"
            )


if __name__ == "__main__":
    main()
