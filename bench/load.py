"""A busy machine (issue 48): the same ghostsearch command on an idle machine and under a synthetic
load of N busy processes in their own session (a CPU spin each, started with ``start_new_session`` so
that ghostsearch's own process-group handling never sees them), the answers compared.

    python bench/load.py [--busy 16] [--runs 1] [--command search|target] [--config CONFIG] [key=value ...]

Each run is a subprocess ``ghostsearch <command> CONFIG out=<fresh dir> --no-progress`` (a fresh run
directory each time: nothing is answered from an earlier run). A run under load passes when it ends
with the idle run's answer (search: result.json's removed set and value; target: the certified k and
removed set), or stops in one line (exit 2 or 3) and a rerun of the same command resumes to that answer.
Prints, per run: exit code, wall seconds, the answer, and the load average beside it; the wall-time
ratio loaded/baseline is measured in this invocation ("idle" is the machine as it is, without the added
load: on a shared machine, not idle). The busy processes are killed when the script ends (a finally; a
SIGKILL of the script leaves them: kill their sessions by hand). Default: the quick search on SmolLM2
(configs/smollm2-quick.yaml).

This machine is shared: run it at small scale (--runs 1) and say so beside any number.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import benchenv  # noqa: F401

ROOT = Path(__file__).resolve().parents[1]
SPIN = "import os, sys\nwhile True:\n    pass\n"


def busy(n: int) -> list[subprocess.Popen]:
    """n CPU-spinning processes, each in a new session, niced 0 (a real competing workload)."""
    return [
        subprocess.Popen(
            [sys.executable, "-c", SPIN],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
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
        return (t.get("certified_k"), t.get("removed"))
    (cell,) = (res.get("cells") or res.get("searchers") or {}).values()
    return (sorted(cell["removed"]), round(cell["value"], 6))


def one(command: str, config: str, over: list[str], out: Path, tries: int = 3) -> dict:
    """The command until it answers (a one-line stop, exit 2 or 3, is rerun: it must resume), at most ``tries``."""
    t0, codes, last = time.monotonic(), [], ""
    for _ in range(tries):
        p = subprocess.run(
            [sys.executable, "-m", "ghostsearch", command, config, f"out={out}", *over, "--no-progress"],
            capture_output=True,
            text=True,
            cwd=ROOT,
        )
        codes.append(p.returncode)
        last = (p.stderr.strip().splitlines() or [""])[-1]
        if p.returncode == 0:
            break
        if p.returncode not in (2, 3) or "Traceback" in p.stderr:
            break  # not a one-line stop: reported as it is
    return {
        "codes": codes,
        "seconds": round(time.monotonic() - t0, 1),
        "answer": answer(command, out),
        "last_line": last[:300],
        "load": os.getloadavg()[0],
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--busy", type=int, default=16)
    ap.add_argument("--runs", type=int, default=1)
    ap.add_argument("--command", choices=["search", "target"], default="search")
    ap.add_argument("--config", default=None)
    ap.add_argument("overrides", nargs="*")
    a = ap.parse_args()
    config = a.config or str(
        ROOT / "configs" / ("smollm2-quick.yaml" if a.command == "search" else "target-quick.yaml")
    )
    with tempfile.TemporaryDirectory(prefix="ghostsearch-load-") as tmp:
        idle = one(a.command, config, a.overrides, Path(tmp) / "idle")
        print(json.dumps({"run": "idle", **idle}), flush=True)
        procs = busy(a.busy)
        try:
            loaded = []
            for i in range(a.runs):
                r = one(a.command, config, a.overrides, Path(tmp) / f"load{i}")
                r["same_answer"] = r["answer"] == idle["answer"] and r["answer"] is not None
                loaded.append(r)
                print(json.dumps({"run": f"busy{a.busy}-{i}", **r}), flush=True)
        finally:
            for p in procs:
                p.kill()
            for p in procs:
                p.wait()
    ok = sum(r["same_answer"] for r in loaded)
    ratio = sum(r["seconds"] for r in loaded) / len(loaded) / max(idle["seconds"], 1e-9)
    print(f"{ok} of {len(loaded)} runs under {a.busy} busy processes gave the idle answer; wall time x{ratio:.2f}")


if __name__ == "__main__":
    main()
