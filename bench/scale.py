"""The pool at scale (issue 49): N stand-in scorer actors behind the real broker, client, searchers and racing.

  nice -n 10 python bench/scale.py [--actors 1,2,4,8,16,32] [--costs gpu,8b] [--parts throughput,greedy,ga,bo]

The stand-ins, the pool of them and the throughput and search parts are ghostsearch/pool/standin.py's (what
``ghostsearch pool ceiling`` runs on a user's cluster): a stand-in answers like a scorer at a set cost,
``call_ms`` a call (a forward's launch) plus ``row_ms`` per calibration row per candidate, paid by
``time.sleep`` (no model, no CPU). The costs here:
  gpu: 0.05 ms a row + 2 ms a call = 5.2 ms a candidate at 64 rows (SmolLM2 on a GPU);
  8b:  1.5 ms a row + 4 ms a call = 100 ms a candidate (an 8B model on a GPU).
Values are exact greedy's per-row losses at C4 64 x 64 (docs/results/bench-race-64, SmolLM2 fp32) for the
sets on its path, so every race drops what the live race dropped; other sets get a seeded synthetic value.

Per N (one pool of N stand-ins per N, both costs on it; Ray's logical CPUs = the largest N, so N actors of
1 logical CPU each fit on this 2-core machine: a stand-in sleeps), per cost, each part timed in the driver:
  throughput  PoolClient.evaluate of one batch of distinct 6-sets (about ``--seconds`` at the ideal rate):
              evaluations/s against the ideal N / (cost of one candidate), measured in the same run;
  greedy      exact and raced (race: true) greedy, k = 6 of 30 blocks (0 and 29 protected): wall, evaluations;
  ga, bo      their default batches (ga: race auto, screened offspring; bo: tpe, batch 8), a fixed budget:
              evaluations/s (their batches are 6-16 candidates: a pool larger than a batch idles).
Each part reports the actors' busy share (their sleeping seconds / (N x wall)), the broker's CPU seconds
per evaluation and as a share of the wall (its process's CPU time, read in it), and the driver's.
Memory: each stand-in's proportional set size (PSS, /proc/self/smaps_rollup) once per N.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile

import benchenv  # noqa: F401  (the repository on sys.path, offline HF, ../shared/data as the data directory)
import numpy as np
import ray
from race_breakdown import stored_path

from ghostsearch.config import load_config, protected_blocks
from ghostsearch.pool.session import PoolSession
from ghostsearch.pool.standin import Cost, Standins, standin_class
from ghostsearch.search import Budget, Space, make_searcher

N_BLOCKS, K, ROWS = 30, 6, 64
COSTS = {"gpu": Cost(0.05, 2.0), "8b": Cost(1.5, 4.0)}  # ms per row per candidate, ms per call


# a stand-in's PSS before the first N measures it (then 1.2 x the largest measured): ~250 MiB while torch came
# with every ObjectiveSpec a stand-in unpickled (tests/pool/test_light_imports.py keeps it out now)
STANDIN_BYTES = 300 * 2**20
MARGIN_BYTES = 4 * 2**30  # left to the machine's other users


def mem_available() -> int:
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    return 0


class Profiles:
    """cProfile of the driver (this process) and of the broker over one part. The broker's methods run on
    its event loop's thread, not on the thread ``__ray_call__`` runs on: its profiler is switched on and
    off there (``call_soon_threadsafe`` on every running event loop of the broker's process)."""

    def start(self, broker) -> None:
        import cProfile

        def on(actor):
            import asyncio
            import gc
            import threading

            loops = [o for o in gc.get_objects() if isinstance(o, asyncio.AbstractEventLoop) and o.is_running()]
            actor.bench_profiles = [cProfile.Profile() for _ in loops]

            def switch(p: cProfile.Profile, d: threading.Event) -> None:
                p.enable()
                d.set()

            for loop, prof in zip(loops, actor.bench_profiles):
                done = threading.Event()
                loop.call_soon_threadsafe(switch, prof, done)
                done.wait(10)
            actor.bench_loops = loops
            return len(loops)

        self.loops = ray.get(broker.__ray_call__.remote(on))
        self.driver = cProfile.Profile()
        self.driver.enable()

    def stop(self, broker, title: str, top: int = 22) -> None:
        import io
        import pstats

        self.driver.disable()

        def off(actor) -> str:
            import threading

            def switch(p, d: threading.Event) -> None:
                p.disable()
                d.set()

            for loop, prof in zip(actor.bench_loops, actor.bench_profiles):
                done = threading.Event()
                loop.call_soon_threadsafe(switch, prof, done)
                done.wait(10)
            out = io.StringIO()
            stats = pstats.Stats(actor.bench_profiles[0], stream=out)
            for p in actor.bench_profiles[1:]:
                stats.add(p)
            stats.sort_stats("tottime").print_stats(top)
            return out.getvalue()

        text = ray.get(broker.__ray_call__.remote(off))
        out = io.StringIO()
        pstats.Stats(self.driver, stream=out).sort_stats("tottime").print_stats(top)
        print(
            f"--- profile, {title}: the broker ({self.loops} event loops)\n{text}\n--- the driver\n{out.getvalue()}",
            flush=True,
        )


def part_search(pool: Standins, searcher: str, params: dict, budget, label: str) -> dict:
    space = Space(N_BLOCKS, K, protected_blocks(pool.cfg, N_BLOCKS))
    return pool.search(make_searcher(searcher, space, params=params, budget=budget), K, label)


@ray.remote(num_cpus=0)
class Relay:
    """The floor part's stand-in broker: an async actor that fans one call out to every stand-in and answers
    when all have (what ``Broker.look`` does, without the cache, shares, ledger, retries or metrics)."""

    def __init__(self, handles):
        self.handles = handles

    async def fan(self, ms: float, rows: int) -> list:
        import asyncio

        return list(await asyncio.gather(*[h.nap.remote(ms, rows) for h in self.handles]))


def part_floor(pool: Standins, share_ms: float, looks: int, raced: dict | None) -> list[dict]:
    """What Ray itself costs a look on this machine: ``looks`` barriers of one ``share_ms`` sleep on each of the
    n stand-ins, sent (a) from the driver straight to the stand-ins and (b) through an async relay actor (the
    broker's hop), with no ghostsearch code on the path; beside them, ``raced`` (raced greedy's look, measured
    in the same run). Overhead a look = its wall less ``share_ms``; busy = the stand-ins' sleep / (n x wall)."""
    handles, n = pool.handles, pool.n
    relay = Relay.remote(handles)  # type: ignore[attr-defined]  # a Ray actor class
    ray.get(relay.fan.remote(0.0, 1))  # warm
    out = []
    for name, call in (
        ("floor-direct", lambda: ray.get([h.nap.remote(share_ms, 4) for h in handles])),
        ("floor-relay", lambda: ray.get(relay.fan.remote(share_ms, 4))),
    ):
        with pool.meter() as m:
            for _ in range(looks):
                call()
        got = m.numbers(looks * n, n)
        out.append(
            {
                "part": name,
                "share_ms": share_ms,
                "looks": looks,
                "ms_per_look": 1000 * m.wall / looks,
                "overhead_ms": 1000 * m.wall / looks - share_ms,
                **got,
            }
        )
    if raced is not None:
        out.append(
            {
                "part": "floor-look",
                "share_ms": share_ms,
                "looks": raced["pool_calls"],
                "ms_per_look": raced["ms_per_call"],
                "overhead_ms": raced["ms_per_call"] - share_ms,
                "busy_share": raced["busy_share"],
            }
        )
    ray.kill(relay)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--actors", default="1,2,4,8,16,32")
    ap.add_argument("--costs", default="gpu,8b")
    ap.add_argument(
        "--parts",
        default="throughput,greedy,ga,bo",
        help="also: floor (Ray's own cost of a look: bare fan-outs of raced greedy's mean share, after greedy)",
    )
    ap.add_argument("--seconds", type=float, default=2.0, help="throughput: the batch's length at the ideal rate")
    ap.add_argument("--max-batch", type=int, default=20000, help="throughput: the largest batch")
    ap.add_argument("--budget", type=float, default=64, help="ga, bo: evaluations")
    ap.add_argument("--json", default=None, help="append every part's numbers to this JSONL file")
    ap.add_argument("--label", default="", help="a name for this code version in the JSONL (e.g. before, after)")
    ap.add_argument(
        "--profile",
        action="store_true",
        help="throughput: cProfile the driver and the broker (their busiest functions, printed per part)",
    )
    args = ap.parse_args()
    prof = Profiles() if args.profile else None
    ns = [int(x) for x in args.actors.split(",")]
    costs = args.costs.split(",")
    parts = set(args.parts.split(","))
    cls = standin_class(N_BLOCKS, ROWS, stored_path(K))
    base = ["dtype=fp32", "device=cpu", "search.protected=[0,-1]", "pool.threads=1", "pool.dashboard=false"]
    load = os.getloadavg()
    print(f"load average at start: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}", flush=True)
    tmp = tempfile.mkdtemp(prefix="gs-bench-scale-")
    rows = []
    standin_bytes = STANDIN_BYTES
    with PoolSession(None, dashboard=False, num_cpus=max(ns)) as session:
        for n in ns:
            avail = mem_available()
            if avail < n * standin_bytes + MARGIN_BYTES:
                print(
                    f"N={n}: skipped, {avail / 2**30:.1f} GiB available (a stand-in takes "
                    f"~{standin_bytes / 2**30:.2f} GiB)",
                    flush=True,
                )
                continue
            pool = Standins(session, load_config(None, base + [f"pool.actors={n}"]), cls, N_BLOCKS, ROWS, tmp)
            idle, idle_actors = pool.idle(2.0)  # the pool idle: its processes' own CPU, the floor under every part
            for cost in costs:
                pool.set_cost(COSTS[cost])
                got = []
                if "throughput" in parts:
                    got.append(pool.throughput(K, args.seconds, args.max_batch, seed=n, profile=prof))
                if "greedy" in parts:
                    got.append(part_search(pool, "greedy", {"race": False}, None, "exact"))
                    got.append(part_search(pool, "greedy", {"race": True}, None, "raced"))
                if "floor" in parts:
                    raced = next((r for r in got if r["part"] == "raced"), None)
                    # raced greedy's mean share of a look (its stand-ins' sleep over n x looks), else 8b's at N = 8
                    share = 1000 * raced["busy_share"] * raced["wall"] / raced["pool_calls"] if raced else 26.3
                    got += part_floor(pool, share, 30, raced)
                if "ga" in parts:
                    got.append(part_search(pool, "ga", {}, Budget(args.budget), "ga"))
                if "bo" in parts:
                    got.append(part_search(pool, "bo", {"sampler": "tpe"}, Budget(args.budget), "bo"))
                for r in got:
                    r.update(actors=n, cost=cost, label=args.label, load=os.getloadavg()[0])
                    rows.append(r)
                    print(json.dumps(r), flush=True)
                    if args.json:
                        with open(args.json, "a") as f:
                            f.write(json.dumps(r) + "\n")
            pss = pool.pss()
            standin_bytes = int(1.2 * max(pss))
            print(
                f"N={n}: pool started in {pool.started_s:.1f} s; idle CPU: broker {100 * idle:.1f}% of a core, "
                f"{n} stand-ins {100 * idle_actors:.1f}% together; "
                f"stand-in PSS {np.mean(pss) / 2**20:.0f} MiB each "
                f"({sum(pss) / 2**30:.2f} GiB for {n})",
                flush=True,
            )
            session.release_pool(pool.broker)
    print(table_md(rows))


def table_md(rows: list[dict]) -> str:
    """The scale table: per cost and N, throughput against the ideal and each part's wall and busy share."""
    out = [
        "| cost | N | evals/s (x ideal) | broker ms/eval (share of wall) | busy | exact greedy s (busy) "
        "| raced greedy s (busy, evals) | ga evals/s (busy) | bo evals/s (busy) |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    by = {(r["cost"], r["actors"], r["part"]): r for r in rows}
    for cost in dict.fromkeys(r["cost"] for r in rows):
        for n in sorted({r["actors"] for r in rows if r["cost"] == cost}):
            t, e, rc, ga, bo = (by.get((cost, n, p)) for p in ("throughput", "exact", "raced", "ga", "bo"))
            cells = [cost, str(n)]
            cells.append(f"{t['evals_per_s']:.0f} ({t['evals_per_s'] / t['ideal_per_s']:.2f}x)" if t else "-")
            cells.append(f"{t['broker_ms_per_eval']:.3f} ({100 * t['broker_share']:.0f}%)" if t else "-")
            cells.append(f"{100 * t['busy_share']:.0f}%" if t else "-")
            cells.append(f"{e['wall']:.2f} ({100 * e['busy_share']:.0f}%)" if e else "-")
            cells.append(f"{rc['wall']:.2f} ({100 * rc['busy_share']:.0f}%, {rc['evals']:.1f})" if rc else "-")
            cells += [f"{x['evals_per_s']:.0f} ({100 * x['busy_share']:.0f}%)" if x else "-" for x in (ga, bo)]
            out.append("| " + " | ".join(cells) + " |")
    return "\n".join(out)


if __name__ == "__main__":
    main()
