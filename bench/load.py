"""A busy machine (issue 48): ghostsearch's commands under a synthetic load of N busy processes in their
own sessions (a CPU spin each, started with ``start_new_session`` so that ghostsearch's own
process-group handling never sees them), each loaded run's answer compared with the same command's
answer at the machine's load without them ("idle": on a shared machine, not idle).

    python bench/load.py [--busy 16] [--jobs search=5,target=3] [--idle FILE] [--until HH:MM] [--at-once K]
                         [--min-free-gib G] [--busy-after S] [--stagger S] [--search-config CONFIG]
                         [--target-config CONFIG] [key=value ...]

Each run is a subprocess ``ghostsearch <command> CONFIG out=<fresh dir> --no-progress`` (a fresh run
directory each time: nothing is answered from an earlier run). A run under load passes when it ends
with the idle answer (search: result.json's removed set and value; target: the certified k and removed
set), or stops in one line (exit 2 or 3) and a rerun of the same command resumes to that answer.

The idle answers come first, without the busy processes (``--idle FILE``: JSON lines read back when they
hold the command, config and overrides, else measured and appended, so they can be measured before a
window reserved for the load). Then the busy processes start and the jobs (``--jobs``: the issue's 5
quick searches and 3 target-quick runs by default) run one command's runs after another, the commands
side by side (a search and a target at a time); with ``--at-once K``, K runs at a time from one queue
(the target runs first: they are the longest), each a local Ray of its own, a run started only while
the machine has ``--min-free-gib`` of memory available (default 3); ``--busy-after S``: the busy processes start S
seconds after the first runs (their local Rays up before the load). ``--until`` (UTC, HH:MM): no run starts after it,
and a run still going then is ended (its process group, SIGTERM then SIGKILL) and reported as cut,
never as a pass. Prints one JSON line a run and a summary per command; wall times are ratios against
the idle run of the same invocation or file, with the load average beside them. The busy processes
are killed when the script ends (a finally; a SIGKILL of the script leaves them: kill their sessions
by hand).
"""

from __future__ import annotations

import argparse
import datetime as dt
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


def tree_usage(pid: int, cpu: dict, peak: list) -> None:
    """CPU seconds so far of each process under ``pid`` (and itself) into ``cpu``; the peak summed RSS into ``peak``."""
    try:
        root = psutil.Process(pid)
        procs = [root, *root.children(recursive=True)]
    except psutil.Error:
        return
    rss = 0
    for q in procs:
        try:
            with q.oneshot():
                cpu[q.pid] = sum(q.cpu_times()[:2])  # its own (a reaped child's stays in its own last sample)
                rss += q.memory_info().rss
        except psutil.Error:
            pass
    peak[0] = max(peak[0], rss)


def attempt(argv: list[str], deadline: float | None, cpu: dict, peak: list) -> tuple[int, str, bool, float | None]:
    """One run of ``argv`` in a session of its own, sampled every second (CPU, RSS), ended at ``deadline`` (its group:
    SIGTERM, SIGKILL 30 s later). Returns (exit status, stderr, cut, seconds to the local Ray's dashboard line)."""
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
    cut = False
    while p.poll() is None:
        if deadline is not None and time.time() >= deadline:
            cut = True
            os.killpg(p.pid, signal.SIGTERM)
            try:
                p.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()
            break
        tree_usage(p.pid, cpu, peak)
        time.sleep(1.0)
    reader.join(10)
    return p.returncode, "".join(lines), cut, (round(up[0], 1) if up else None)


def one(command: str, config: str, over: list[str], out: Path, deadline: float | None = None, tries: int = 3) -> dict:
    """The command until it answers (a one-line stop, exit 2 or 3, is rerun: it must resume), at most
    ``tries``; ended at ``deadline`` (time.time()) if it has not answered by then ("cut")."""
    t0, codes, last, cut, ups, peak = time.monotonic(), [], "", False, [], [0]
    cpu: dict[int, float] = {}
    started = dt.datetime.now(dt.timezone.utc).strftime("%H:%M:%S")
    for _ in range(tries):
        if deadline is not None and time.time() >= deadline:
            cut = True
            break
        argv = [sys.executable, "-m", "ghostsearch", command, config, f"out={out}", *over, "--no-progress"]
        code, err, cut, up = attempt(argv, deadline, cpu, peak)
        codes.append(code)
        ups.append(up)
        last = (err.strip().splitlines() or [""])[-1]
        if cut or code == 0:
            break
        if code not in (2, 3) or "Traceback" in err:
            break  # not a one-line stop: reported as it is
    return {
        "codes": codes,
        "cut": cut,
        "started": started,
        "seconds": round(time.monotonic() - t0, 1),
        "ray_up_s": ups,  # per try: seconds to the local Ray's dashboard line (None: no such line)
        "cpu_s": round(sum(cpu.values()), 1),  # sampled once a second: a process's last second is missed
        "peak_rss_gib": round(peak[0] / 2**30, 2),
        "answer": answer(command, out),
        "last_line": last[:300],
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
        print(json.dumps({"run": f"idle-{command}", **known[key]}), flush=True)
    return got


def under_load(a: argparse.Namespace, jobs: list, config: dict, idle: dict, tmp: Path, deadline: float | None) -> list:
    """The runs of ``jobs`` under ``a.busy`` busy processes: a lane per command (its runs one after another), or
    with ``a.at_once`` K lanes on one queue (the target runs first); a run starts only while ``a.min_free_gib`` of
    memory is available. Returns [(command, record)]."""
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
            r = one(command, config[command], a.overrides, tmp / f"load-{command}-{i}", deadline)
            r["same_answer"] = r["answer"] == idle[command]["answer"] and r["answer"] is not None
            with lock:
                results.append((command, r))
            print(json.dumps({"run": f"busy{a.busy}-{command}-{i}", **r}), flush=True)

    print(json.dumps({"busy": a.busy, "at_once": a.at_once, "started": time.time(), "uptime": uptime()}), flush=True)
    procs = [] if a.busy_after else busy(a.busy)
    try:
        threads = [threading.Thread(target=lane, args=(q,)) for q in queues]
        for t in threads:
            t.start()
            time.sleep(a.stagger)  # the runs' starts apart
        if a.busy_after:  # the load comes once the runs' local Rays are up
            time.sleep(a.busy_after)
            procs = busy(a.busy)
            print(json.dumps({"busy_started": time.time(), "uptime": uptime()}), flush=True)
        for t in threads:
            t.join()
    finally:
        for p in procs:
            p.kill()
        for p in procs:
            p.wait()
    return results


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--busy", type=int, default=16)
    ap.add_argument("--jobs", default="search=5,target=3", help="COMMAND=N,...: the runs under load")
    ap.add_argument("--idle", type=Path, default=None, help="JSON lines of idle answers (read, or written)")
    ap.add_argument("--until", default=None, help="UTC HH:MM: start nothing after it, cut what still runs")
    ap.add_argument("--idle-only", action="store_true", help="measure the idle answers, nothing under load")
    ap.add_argument(
        "--at-once", type=int, default=0, help="K runs at a time from one queue (default: a lane per command)"
    )
    ap.add_argument("--min-free-gib", type=float, default=3.0, help="--at-once: start a run only with this much free")
    ap.add_argument("--busy-after", type=float, default=0.0, help="start the busy processes S s after the first runs")
    ap.add_argument("--stagger", type=float, default=2.0, help="seconds between the first runs' starts")
    ap.add_argument("--search-config", default=CONFIGS["search"])
    ap.add_argument("--target-config", default=CONFIGS["target"])
    ap.add_argument("overrides", nargs="*")
    a = ap.parse_args()
    config = {"search": a.search_config, "target": a.target_config}
    jobs = [(c, int(n)) for c, n in (x.split("=") for x in a.jobs.split(","))]
    deadline = None
    if a.until:
        now = dt.datetime.now(dt.timezone.utc)
        h, m = map(int, a.until.split(":"))
        deadline = now.replace(hour=h, minute=m, second=0, microsecond=0).timestamp()
    with tempfile.TemporaryDirectory(prefix="ghostsearch-load-") as tmp:
        idle = idle_answers(a.idle, [(c, config[c]) for c, _ in jobs], a.overrides, Path(tmp))
        if a.idle_only:
            return
        results = under_load(a, jobs, config, idle, Path(tmp), deadline)
    for command, n in jobs:
        rs = [r for c, r in results if c == command]
        done = [r for r in rs if not r["cut"]]
        ok = sum(r["same_answer"] for r in done)
        ratio = sum(r["seconds"] for r in done) / max(len(done), 1) / max(idle[command]["seconds"], 1e-9)
        print(
            f"{command}: {ok} of {len(done)} finished runs under {a.busy} busy processes gave the idle answer "
            f"({len(rs) - len(done)} cut at --until, {n - len(rs)} not started); wall x{ratio:.2f} of the idle run"
        )


if __name__ == "__main__":
    main()
