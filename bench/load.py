"""A busy machine (issue 48): ghostsearch's commands under a synthetic load of N busy processes in their
own sessions (a CPU spin each, started with ``start_new_session`` so that ghostsearch's own
process-group handling never sees them), each loaded run's answer compared with the same command's
answer at the machine's load without them ("idle": on a shared machine, not idle).

    python bench/load.py [--busy 16] [--jobs search=5,target=3] [--idle FILE] [--until HH:MM]
                         [--resume-until HH:MM] [--at-once K] [--min-free-gib G] [--busy-after S] [--stagger S]
                         [--work DIR] [--rows FILE] [--search-config CONFIG] [--target-config CONFIG] [key=value ...]

Each run is a subprocess ``ghostsearch <command> CONFIG out=<fresh dir> --no-progress`` (a fresh run
directory each time: nothing is answered from an earlier run). The issue's bar for a run: it ends with the
idle answer (search: result.json's removed set and value; target: the certified k and removed set), or
stops in one line and a rerun of the same command resumes to that answer. A stop is one line when it is
exit 2 or 3 with no traceback (then rerun at once, up to 3 tries), or the SIGTERM sent to a driver still
running at ``--until``: its stderr after the signal must be the one line ``ghostsearch: interrupted``, the
run directory's lock free and no Ray process of the run left 10 s after the signal (seconds to its exit and
``py-spy dump`` of the driver at 2, 6, 12 and 20 s are kept: where the time goes).

The idle answers come first, without the busy processes (``--idle FILE``: JSON lines read back when they
hold the command, config and overrides, else measured and appended, so they can be measured before a
window reserved for the load). Then the busy processes start (or ``--busy-after S`` seconds after the
first runs: their local Rays up before the load) and the jobs run: a lane per command, or ``--at-once K``
runs at a time from one queue (the target runs first), each a local Ray of its own, a run started only
while the machine has ``--min-free-gib`` of memory available. ``--until`` (UTC, HH:MM): the busy processes
end then, sharp, no run starts after it, and each driver still running gets the SIGTERM. ``--resume-until``
(UTC): after the load, every run without the idle answer reruns on its run directory until then. Prints
(and with ``--rows``, appends to FILE) one JSON line a run and a summary per command, with ``uptime``
beside each; the last lines count the runs that met the bar. The busy processes are killed when the
script ends (a finally; a SIGKILL of the script leaves them: kill their sessions by hand).
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import importlib.util
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import benchenv  # noqa: F401
import psutil

ROOT = Path(__file__).resolve().parents[1]
SPIN = "import os, sys\nwhile True:\n    pass\n"
CONFIGS = {"search": "configs/smollm2-quick.yaml", "target": "configs/target-quick.yaml"}


def busy(n: int, new_session: bool = True) -> list[subprocess.Popen]:
    """n CPU-spinning processes, each in a new session (or in this one), at this process's niceness."""
    return [
        subprocess.Popen(
            [sys.executable, "-c", SPIN],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=new_session,
        )
        for _ in range(n)
    ]


def answer(command: str, out: Path) -> object:
    try:
        res = json.loads((out / "result.json").read_text())
    except (OSError, ValueError):
        return None
    if command == "target":
        t = res.get("target") or {}
        return [t.get("certified_k"), t.get("removed")] if t else None
    cells = list((res.get("cells") or res.get("searchers") or {}).values())
    return [sorted(cells[0]["removed"]), round(cells[0]["value"], 6)] if len(cells) == 1 else None


def tree_usage(pid: int, cpu: dict, peak: list) -> bool:
    """CPU seconds so far of each process under ``pid`` (and itself) into ``cpu``; the peak summed RSS into ``peak``.
    Returns whether a pool's actor (``POOL_ACTORS``) is among them."""
    try:
        root = psutil.Process(pid)
        procs = [root, *root.children(recursive=True)]
    except psutil.Error:
        return False
    rss, pool = 0, False
    for q in procs:
        try:
            with q.oneshot():
                cpu[q.pid] = sum(q.cpu_times()[:2])  # its own (a reaped child's stays in its own last sample)
                rss += q.memory_info().rss
                pool = pool or q.name().startswith(POOL_ACTORS)
        except psutil.Error:
            pass
    peak[0] = max(peak[0], rss)
    return pool


def attempt(
    argv: list[str], deadline: float | None, cpu: dict, peak: list, out: Path | None = None, group: bool = False
) -> tuple[int, str, bool, float | None, dict | None]:
    """One run of ``argv`` in a session of its own, sampled every second (CPU, RSS). At ``deadline`` the driver alone
    gets a SIGTERM, as ``kill PID`` sends it, or with ``group`` its whole process group, Ray's processes too, as
    ``timeout`` or a service manager sends it (``stopped``). Returns (exit status, stderr, cut, seconds until the local
    Ray was up (its dashboard line, or a ray:: actor of the pool in the run's tree), what the SIGTERM left)."""
    t0 = time.monotonic()
    p = subprocess.Popen(
        argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, cwd=ROOT, start_new_session=True
    )
    lines: list[str] = []
    up: list[float] = []

    def read() -> None:
        for line in p.stderr:  # type: ignore[union-attr]
            if not up and "Ray dashboard:" in line:
                up.append(time.monotonic() - t0)
            lines.append(line)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    cut, stop = False, None
    while p.poll() is None:
        if deadline is not None and time.time() >= deadline:
            cut = True
            stop = stopped(p, out, lines, group)
            break
        if tree_usage(p.pid, cpu, peak) and not up:
            up.append(time.monotonic() - t0)
        time.sleep(1.0)
    reader.join(10)
    return p.returncode, "".join(lines), cut, (round(up[0], 1) if up else None), stop


POOL_ACTORS = ("ray::ScorerActor", "ray::Broker")  # a pool's processes: the run's local Ray is up


def stopped(p: subprocess.Popen, out: Path | None, lines: list[str], group: bool = False) -> dict:
    """SIGTERM to the run's driver (or its process group), then what it left: seconds to
    its exit, its exit status, the stderr lines after the signal (the issue: one, "interrupted"), whether the run
    directory's lock is free, and the Ray processes of its tree still running 10 s after the signal; ``py-spy dump``
    of the driver at 2, 6, 12 and 20 s while it has not exited (where the time goes). SIGKILL to its group at 60 s."""
    try:
        tree = psutil.Process(p.pid).children(recursive=True)
    except psutil.Error:
        tree = []
    seen, t0 = len(lines), time.monotonic()
    if group:
        os.killpg(p.pid, signal.SIGTERM)
    else:
        p.send_signal(signal.SIGTERM)
    stacks, dumps = {}, [2.0, 6.0, 12.0, 20.0]
    while p.poll() is None and time.monotonic() - t0 < 60:
        if dumps and time.monotonic() - t0 >= dumps[0]:
            dump = subprocess.run(
                [str(Path(sys.executable).parent / "py-spy"), "dump", "--pid", str(p.pid)],
                capture_output=True,
                text=True,
            )
            stacks[str(dumps.pop(0))] = dump.stdout[-4000:]
        time.sleep(0.2)
    exit_s = round(time.monotonic() - t0, 1)
    if p.poll() is None:
        os.killpg(p.pid, signal.SIGKILL)
        p.wait()
    time.sleep(max(0.0, 10 - (time.monotonic() - t0)))
    left = []
    for q in tree:
        try:
            if q.is_running() and q.status() != psutil.STATUS_ZOMBIE and is_ray(q):
                left.append(q.name())
        except psutil.Error:
            pass
    time.sleep(1)  # the reader's last lines
    after = [x.strip() for x in lines[seen:] if x.strip()]
    return {
        "to": "group" if group else "driver",
        "exit_s": exit_s,
        "code": p.returncode,
        "lines_after": after[-5:],
        "one_line": len(after) == 1 and after[0] == "ghostsearch: interrupted",
        "lock_free": lock_free(out),
        "ray_left_10s": left,
        "stacks": stacks,
    }


RAY_DIR = str(Path(importlib.util.find_spec("ray").origin).parent)  # type: ignore[union-attr, arg-type]


def is_ray(q: psutil.Process) -> bool:
    """A process of Ray's: its binaries (GCS, raylet), its titled workers and agents, or Python running its code (not
    the run's reaper, which has the package's path only as an argument)."""
    return q.name().startswith(("ray::", "raylet", "gcs_server")) or any(a.startswith(RAY_DIR) for a in q.cmdline()[:3])


def lock_free(out: Path | None) -> bool | None:
    """Whether RUN_DIR/.lock can be taken now (None: no lock file)."""
    import fcntl

    if out is None or not (out / ".lock").exists():
        return None
    with open(out / ".lock") as f:
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            return False
        fcntl.flock(f, fcntl.LOCK_UN)
    return True


def one(
    command: str,
    config: str,
    over: list[str],
    out: Path,
    deadline: float | None = None,
    tries: int = 3,
    group: bool = False,
) -> dict:
    """The command until it answers (a one-line stop, exit 2 or 3, is rerun: it must resume), at most
    ``tries``; its driver SIGTERMed at ``deadline`` (time.time()) if it has not answered by then ("cut", ``stop``)."""
    t0, codes, last, cut, ups, peak, stop = time.monotonic(), [], "", False, [], [0], None
    restarts, lines = [], []
    cpu: dict[int, float] = {}
    started = dt.datetime.now(dt.timezone.utc).strftime("%H:%M:%S")
    for _ in range(tries):
        if deadline is not None and time.time() >= deadline:
            cut = True
            break
        argv = [sys.executable, "-m", "ghostsearch", command, config, f"out={out}", *over, "--no-progress"]
        code, err, cut, up, stop = attempt(argv, deadline, cpu, peak, out, group)
        codes.append(code)
        ups.append(up)
        restarts.append(err.count("starting it again"))  # local starts tried again within this try
        last = (err.strip().splitlines() or [""])[-1]
        lines.append(last[:300])
        if cut or code == 0:
            break
        if code not in (2, 3) or "Traceback" in err:
            break  # not a one-line stop: reported as it is
    return {
        "codes": codes,
        "cut": cut,
        "started": started,
        "seconds": round(time.monotonic() - t0, 1),
        "ray_up_s": ups,  # per try: seconds until the local Ray was up (None: never, in that try)
        "start_retries": restarts,
        "cpu_s": round(sum(cpu.values()), 1),  # sampled once a second: a process's last second is missed
        "peak_rss_gib": round(peak[0] / 2**30, 2),
        "answer": answer(command, out),
        "last_lines": lines,  # each try's
        "stop": stop,  # the SIGTERM at the deadline: what it left
        "load": round(os.getloadavg()[0], 1),
        "uptime": uptime(),
    }


def uptime() -> str:
    return subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()


def idle_answers(path: Path | None, wanted: list[tuple[str, str]], over: list[str], tmp: Path) -> dict:
    """{command: the idle run's record}: read from ``path`` (same command, config and overrides), else run now."""
    known = {}
    if path is not None and path.is_file():
        for line in path.read_text().splitlines():
            r = json.loads(line)
            known[(r["command"], r["config"], tuple(r["overrides"]))] = r
    got = {}
    for command, config in wanted:
        key = (command, config, tuple(over))
        if key not in known:
            r = one(command, config, over, tmp / f"idle-{command}")
            known[key] = {"command": command, "config": config, "overrides": over, **r, "when": time.time()}
            if path is not None:
                with path.open("a") as f:
                    f.write(json.dumps(known[key]) + "\n")
        got[command] = known[key]
        emit({"run": f"idle-{command}", **known[key]})
    return got


ROWS: list[Path] = []  # --rows: every printed JSON line is appended there too


def emit(row: dict) -> None:
    print(json.dumps(row), flush=True)
    for path in ROWS:
        with path.open("a") as f:
            f.write(json.dumps(row) + "\n")


def under_load(a: argparse.Namespace, jobs: list, config: dict, idle: dict, tmp: Path, deadline: float | None) -> list:
    """The runs of ``jobs`` under ``a.busy`` busy processes: a lane per command (its runs one after another), or
    with ``a.at_once`` K lanes on one queue (the target runs first); a run starts only while ``a.min_free_gib`` of
    memory is available. The busy processes end at ``deadline`` sharp, whatever runs; the runs still going get their
    SIGTERM ``a.sigterm_before`` seconds before it (under the load). Returns [(command, i, record)]."""
    load_end = deadline
    deadline = None if deadline is None else deadline - a.sigterm_before
    lock, results = threading.Lock(), []
    runs = [(c, i) for c, n in sorted(jobs, key=lambda j: j[0] != "target") for i in range(n)]
    queues = [runs] * a.at_once if a.at_once else [[r for r in runs if r[0] == c] for c, _ in jobs]

    def lane(queue: list) -> None:
        while True:
            with lock:
                if not queue:
                    return
                command, i = queue.pop(0)
            while psutil.virtual_memory().available < a.min_free_gib * 2**30 and (deadline or 2e9) > time.time():
                time.sleep(5)  # another run's pool still loading: start when the memory is there
            if deadline is not None and time.time() >= deadline:
                return
            group = f"{command}-{i}" in a.group_sigterm.split(",")
            r = one(command, config[command], a.overrides, tmp / f"load-{command}-{i}", deadline, group=group)
            r["same_answer"] = r["answer"] == idle[command]["answer"] and r["answer"] is not None
            with lock:
                results.append((command, i, r))
            emit({"run": f"busy{a.busy}-{command}-{i}", **r})

    emit({"busy": a.busy, "at_once": a.at_once, "started": time.time(), "uptime": uptime()})
    procs: list[subprocess.Popen] = []

    def end_load() -> None:
        with lock:
            for p in procs:
                p.kill()
            for p in procs:
                p.wait()
            if procs:
                emit({"busy_ended": time.time(), "uptime": uptime()})
            procs.clear()

    timer = threading.Timer(max(0.0, (load_end or 2e9) - time.time()), end_load)
    timer.daemon = True
    timer.start()
    try:
        if not a.busy_after:
            procs.extend(busy(a.busy))
        threads = [threading.Thread(target=lane, args=(q,)) for q in queues]
        for t in threads:
            t.start()
            time.sleep(a.stagger)  # the runs' starts apart
        if a.busy_after:  # the load comes once the runs' local Rays are up
            time.sleep(a.busy_after)
            procs.extend(busy(a.busy))
            emit({"busy_started": time.time(), "uptime": uptime()})
        for t in threads:
            t.join()
    finally:
        timer.cancel()
        end_load()
    return results


def passed(r: dict) -> bool:
    """The issue's bar for one run, with its rerun after the load (``resumed``) if it had one: the idle answer in the
    end, and every stop before it in one line: exit 2 or 3 (the rerun of ``one``; a traceback ends ``one``'s loop
    unanswered), or the SIGTERM at --until with its one "interrupted" line, the lock free and no Ray process of the run
    left 10 s after the signal."""
    again = r.get("resumed")
    final = again or r
    stops = [x["stop"] for x in (r, again) if x and x.get("stop")]
    clean = all(x["one_line"] and x["lock_free"] is not False and not x["ray_left_10s"] for x in stops)
    return bool(final["same_answer"]) and clean


def resumed(a: argparse.Namespace, results: list, config: dict, idle: dict, tmp: Path, deadline: float | None) -> None:
    """After the load: each run that did not answer reruns on its run directory (it must resume to the idle answer),
    ``a.resume_at_once`` at a time, none started after ``deadline``. Adds ``resumed`` (its record) to each."""
    queue = [(c, i, r) for c, i, r in results if not r["same_answer"]]
    lock = threading.Lock()

    def lane() -> None:
        while True:
            with lock:
                if not queue:
                    return
                command, i, r = queue.pop(0)
            if deadline is not None and time.time() >= deadline:
                return
            again = one(command, config[command], a.overrides, tmp / f"load-{command}-{i}", deadline)
            again["same_answer"] = again["answer"] == idle[command]["answer"] and again["answer"] is not None
            r["resumed"] = again
            emit({"run": f"resumed-{command}-{i}", **again})

    threads = [threading.Thread(target=lane) for _ in range(max(1, a.resume_at_once))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


def utc(hhmm: str) -> float:
    now = dt.datetime.now(dt.timezone.utc)
    h, m = map(int, hhmm.split(":"))
    return now.replace(hour=h, minute=m, second=0, microsecond=0).timestamp()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--busy", type=int, default=16)
    ap.add_argument("--jobs", default="search=5,target=3", help="COMMAND=N,...: the runs under load")
    ap.add_argument("--idle", type=Path, default=None, help="JSON lines of idle answers (read, or written)")
    ap.add_argument("--until", default=None, help="UTC HH:MM: the load ends, nothing starts, running drivers SIGTERMed")
    ap.add_argument("--resume-until", default=None, help="UTC HH:MM: after --until, unanswered runs rerun until then")
    ap.add_argument("--sigterm-before", type=float, default=0.0, help="S: the SIGTERMs S seconds before --until")
    ap.add_argument("--group-sigterm", default="", help="RUN,...: (e.g. target-1) their --until SIGTERM to the group")
    ap.add_argument("--resume-at-once", type=int, default=2, help="reruns at a time after the load")
    ap.add_argument("--idle-only", action="store_true", help="measure the idle answers, nothing under load")
    ap.add_argument(
        "--at-once", type=int, default=0, help="K runs at a time from one queue (default: a lane per command)"
    )
    ap.add_argument("--min-free-gib", type=float, default=3.0, help="--at-once: start a run only with this much free")
    ap.add_argument("--busy-after", type=float, default=0.0, help="start the busy processes S s after the first runs")
    ap.add_argument("--stagger", type=float, default=2.0, help="seconds between the first runs' starts")
    ap.add_argument("--search-config", default=CONFIGS["search"])
    ap.add_argument("--target-config", default=CONFIGS["target"])
    ap.add_argument("--work", type=Path, default=None, help="where the run directories go (default: a temporary one)")
    ap.add_argument("--rows", type=Path, default=None, help="append every JSON line printed to this file too")
    ap.add_argument("overrides", nargs="*")
    a = ap.parse_args()
    config = {"search": a.search_config, "target": a.target_config}
    jobs = [(c, int(n)) for c, n in (x.split("=") for x in a.jobs.split(","))]
    deadline = utc(a.until) if a.until else None
    if a.rows:
        ROWS.append(a.rows)
    with contextlib.ExitStack() as stack:
        tmp = a.work or Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="ghostsearch-load-")))
        tmp.mkdir(parents=True, exist_ok=True)
        idle = idle_answers(a.idle, [(c, config[c]) for c, _ in jobs], a.overrides, tmp)
        if a.idle_only:
            return
        results = under_load(a, jobs, config, idle, tmp, deadline)
        if a.resume_until:
            time.sleep(max(0.0, (deadline or 0) - time.time()))  # after the load, quiet
            emit({"resumes": time.time(), "uptime": uptime()})
            resumed(a, results, config, idle, tmp, utc(a.resume_until))
    for command, n in jobs:
        rs = [r for c, _, r in results if c == command]
        ok = sum(passed(r) for r in rs)
        direct = sum(r["same_answer"] and not r["cut"] for r in rs)
        stops = [r["stop"] for r in rs if r.get("stop")]
        up = [u for r in rs for u in r["ray_up_s"]]
        emit(
            {
                "summary": command,
                "runs": n,
                "passed": ok,
                "idle_answer_under_load": direct,
                "started": len(rs),
                "sigterm_stops": len(stops),
                "sigterm_one_line": sum(s["one_line"] for s in stops),
                "sigterm_exit_s": [s["exit_s"] for s in stops],
                "tries_ray_up": f"{sum(u is not None for u in up)} of {len(up)}",
            }
        )
        print(
            f"{command}: {ok} of {n} runs under {a.busy} busy processes ended with the idle answer or a one-line stop "
            f"that resumed to it ({direct} answered under the load; {len(stops)} SIGTERMed at --until, "
            f"{sum(s['one_line'] for s in stops)} of them in one line; the local Ray up in "
            f"{sum(u is not None for u in up)} of {len(up)} tries under the load)"
        )


if __name__ == "__main__":
    main()
