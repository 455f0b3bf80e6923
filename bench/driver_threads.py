"""The driver's BLAS/torch threads while a local pool scores (issues 48/49): the same real search (a fresh local Ray,
the config's pool, default 2 scorer actors x 1 thread on this 2-core machine) with the driver's thread pools as a
plain Python process has them (``today``: NumPy's and SciPy's OpenBLAS and torch at one thread per core) and as
the product sets them while its local pool scores (``limited``: ``pool/threads.py``, the cores the pool leaves, at
least 1), in alternated A/B pairs (AB, then BA, ...), so each ratio is against a baseline measured beside it.
``today`` turns the product's policy off in its own process (``threads.driver_threads`` answers None).

    python bench/driver_threads.py [--pairs 2] [--searchers bo,cbo] [--config configs/smollm2-quick.yaml]
                                   [--probe] [key=value ...]

Each run is a fresh process (``--one ARM``) that calls the product's ``runner.search`` with ``searcher=S`` and a
fresh ``out``, without OMP_NUM_THREADS, OPENBLAS_NUM_THREADS and MKL_NUM_THREADS (a user's setting turns the
policy off). Per run, one JSON line: the search's wall (the cell's ``wall_seconds``: Ray's start and the model
load excluded), the driver's seconds inside the searcher's ask/tell, its CPU seconds (all threads) and its busiest
threads, the scorers' mean seconds an evaluation (the ledger's ``seconds``: a scorer's wall, which a driver that
steals a core lengthens), the answer, and the driver's thread pools as seen at the search's end, its pool still
up; ``uptime`` before and after. Then per pair the ratios limited / today. ``--probe``: instead, start the pool
once and print what the driver, each scorer actor and the broker run with (threadpoolctl, torch,
OMP_NUM_THREADS), each read in its own process (``__ray_call__``).
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

HERE = Path(__file__).resolve()
ARMS = ("today", "limited")


def uptime() -> str:
    return subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()


def pools() -> list[dict]:
    """This process's thread pools: threadpoolctl's (which library, its threads), torch's."""
    import threadpoolctl
    import torch

    seen = [
        {"api": d["internal_api"], "lib": Path(d["filepath"]).name, "threads": d["num_threads"]}
        for d in threadpoolctl.threadpool_info()
    ]
    return [*seen, {"api": "torch", "threads": torch.get_num_threads(), "interop": torch.get_num_interop_threads()}]


def threads_cpu(top: int = 6) -> list[tuple[str, float]]:
    """CPU seconds of this process's busiest threads (name, seconds), from /proc/self/task."""
    tick = os.sysconf("SC_CLK_TCK")
    got = []
    for t in Path("/proc/self/task").iterdir():
        try:
            stat = (t / "stat").read_text()
        except OSError:
            continue
        name = stat[stat.index("(") + 1 : stat.rindex(")")]
        f = stat[stat.rindex(")") + 2 :].split()
        got.append((f"{name}:{t.name}", (int(f[11]) + int(f[12])) / tick))
    return sorted(got, key=lambda g: -g[1])[:top]


def one(a: argparse.Namespace) -> None:
    import resource

    from ghostsearch.config import load_config
    from ghostsearch.pool import threads
    from ghostsearch.run import runner
    from ghostsearch.rundir.ledger import read_ledger

    if a.one == "today":
        threads.driver_threads = lambda *args: None  # type: ignore[assignment]  # the policy off, as before it
    spent = [0.0, 0]  # seconds in the searcher's ask/tell, calls

    def timed(f):
        def call(*args, **kw):
            t = time.perf_counter()
            try:
                return f(*args, **kw)
            finally:
                spent[0] += time.perf_counter() - t
                spent[1] += 1

        return call

    build = runner.build_searcher

    def build_timed(*args, **kw):
        s = build(*args, **kw)
        s.ask, s.tell = timed(s.ask), timed(s.tell)
        return s

    seen: list = []
    finish = runner.Run.finish

    def finish_seen(self, *args, **kw):
        seen.append(pools())  # at the search's end, the pool still up
        return finish(self, *args, **kw)

    runner.build_searcher = build_timed  # type: ignore[assignment]  # the bench's probe of ask/tell
    runner.Run.finish = finish_seen  # type: ignore[method-assign]
    cfg = load_config(a.config, [f"searcher={a.searcher}", f"out={a.out}", *a.over])
    t0 = time.monotonic()
    res = runner.search(cfg, progress=False)
    wall = time.monotonic() - t0
    ru = resource.getrusage(resource.RUSAGE_SELF)
    cell = next(iter(res["cells"].values()))
    led = read_ledger(a.out).to_pylist()
    secs = [r["seconds"] for r in led if not r["cached"] and r["seconds"] is not None and r["fidelity"] == 1.0]
    print(
        json.dumps(
            {
                "arm": a.one,
                "searcher": a.searcher,
                "wall": round(wall, 2),
                "search_wall": round(cell["wall_seconds"], 2),
                "ask_tell_s": round(spent[0], 2),
                "ask_tell_calls": spent[1],
                "driver_cpu_s": round(ru.ru_utime + ru.ru_stime, 2),
                "threads_cpu_s": threads_cpu(),
                "evaluations": cell["evaluations"],
                "scorer_s_per_eval": round(sum(secs) / max(1, len(secs)), 4),
                "answer": [sorted(cell["removed"]), round(cell["value"], 6)],
                "pools": seen[0] if seen else None,
            }
        ),
        flush=True,
    )


def probe(a: argparse.Namespace) -> None:
    """What the driver, each scorer and the broker run with, each read in its own process."""
    import ray

    from ghostsearch.config import load_config
    from ghostsearch.pool.actors import NAMESPACE
    from ghostsearch.pool.session import PoolSession

    def inside(_self) -> dict:
        import os as os_

        import threadpoolctl
        import torch

        info = [(d["internal_api"], d["num_threads"]) for d in threadpoolctl.threadpool_info()]
        return {
            "pid": os_.getpid(),
            "OMP_NUM_THREADS": os_.environ.get("OMP_NUM_THREADS"),
            "OPENBLAS_NUM_THREADS": os_.environ.get("OPENBLAS_NUM_THREADS"),
            "threadpoolctl": info,
            "torch": torch.get_num_threads(),
            "os_threads": len(os_.listdir("/proc/self/task")),
        }

    cfg = load_config(a.config, [f"out={a.out}", *a.over])
    print("driver before the pool", json.dumps(pools()), flush=True)
    with PoolSession(cfg) as session:
        broker = session.start()
        print("driver with its pool", json.dumps(pools()), flush=True)
        for n in sorted(x["name"] for x in ray.util.list_named_actors(all_namespaces=True)):
            if n.startswith("ghostsearch-scorer-"):
                print(n, json.dumps(ray.get(ray.get_actor(n, NAMESPACE).__ray_call__.remote(inside))), flush=True)
        print("broker", json.dumps(ray.get(broker.__ray_call__.remote(inside))), flush=True)
    print("driver after release", json.dumps(pools()), flush=True)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--pairs", type=int, default=2)
    p.add_argument("--searchers", default="bo,cbo")
    p.add_argument("--config", default="configs/smollm2-quick.yaml")
    p.add_argument("--probe", action="store_true")
    p.add_argument("--one", choices=ARMS, help=argparse.SUPPRESS)
    p.add_argument("--searcher", help=argparse.SUPPRESS)
    p.add_argument("--out", help=argparse.SUPPRESS)
    p.add_argument("over", nargs="*", help="config overrides, key=value")
    a = p.parse_args()
    os.chdir(HERE.parents[1])
    if a.one:
        return one(a)
    tmp = Path(tempfile.mkdtemp(prefix="driver-threads-"))
    if a.probe:
        a.out = str(tmp / "probe")
        return probe(a)
    got: dict[tuple[str, int, str], dict] = {}
    env = {
        k: v for k, v in os.environ.items() if k not in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")
    }
    for i in range(a.pairs):
        for s in a.searchers.split(","):
            for arm in ARMS if i % 2 == 0 else ARMS[::-1]:
                before = uptime()
                out = tmp / f"{s}-{i}-{arm}"
                argv = [sys.executable, str(HERE), "--one", arm, "--searcher", s, "--out", str(out)]
                argv += ["--config", a.config]
                r = subprocess.run([*argv, *a.over], capture_output=True, text=True, env=env)
                line = next((x for x in reversed(r.stdout.splitlines()) if x.startswith("{")), None)
                if r.returncode != 0 or line is None:
                    print(json.dumps({"arm": arm, "searcher": s, "pair": i, "rc": r.returncode}), r.stderr[-2000:])
                    continue
                row = {"pair": i, **json.loads(line), "uptime_before": before, "uptime_after": uptime()}
                got[(s, i, arm)] = row
                print(json.dumps(row), flush=True)
    for (s, i, arm), row in sorted(got.items()):
        base = got.get((s, i, "today"))
        if arm != "limited" or base is None:
            continue
        keys = ("search_wall", "ask_tell_s", "driver_cpu_s", "scorer_s_per_eval")
        ratio = {k: round(row[k] / base[k], 3) for k in keys}
        same = row["answer"] == base["answer"]
        print(f"pair {i} {s}: limited / today {json.dumps(ratio)}  same answer: {same}")


if __name__ == "__main__":
    main()
