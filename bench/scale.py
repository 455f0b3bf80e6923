"""The pool at scale (issue 49): N stand-in scorer actors behind the real broker, client, searchers and racing.

  nice -n 10 python bench/scale.py [--actors 1,2,4,8,16,32] [--costs gpu,8b] [--parts throughput,greedy,ga,bo]

A stand-in (``standin_class``) plugs in where ``ScorerActor`` does (``PoolSession.start(actor_class=...)``,
the pool's own start path): it answers like a scorer at a set cost, ``call_ms`` per candidate (a forward's
launch) plus ``row_ms`` per calibration row per candidate, paid by ``time.sleep`` (no model, no CPU):
  gpu: 0.05 ms a row + 2 ms a call = 5.2 ms a candidate at 64 rows (SmolLM2 on a GPU);
  8b:  1.5 ms a row + 4 ms a call = 100 ms a candidate (an 8B model on a GPU).
A look of a race (``rows_many``: m candidates x n rows in one call) costs one call + m x n rows, as the real
scorer's grouped forward; a batch of exact candidates (``score_many``) costs each candidate its own call.
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
per evaluation and as a share of the wall (its process's utime + stime, read from /proc), and the
driver's. Memory: each stand-in's proportional set size (PSS, /proc/self/smaps_rollup) once per N.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import tempfile
import time

import benchenv  # noqa: F401  (the repository on sys.path, offline HF, ../shared/data as the data directory)
import numpy as np
import ray
from race_breakdown import stored_path

from ghostsearch.config import load_config, protected_blocks
from ghostsearch.pool.actors import NAMESPACE
from ghostsearch.pool.client import PoolClient
from ghostsearch.pool.session import PoolSession
from ghostsearch.rundir.ledger import Ledger
from ghostsearch.search import Budget, Candidate, Space, make_searcher, run

N_BLOCKS, K, ROWS = 30, 6, 64
COSTS = {"gpu": (0.05, 2.0), "8b": (1.5, 4.0)}  # (ms per row per candidate, ms per call)


def cost_ms(cost: str) -> float:
    """One exact candidate's cost: a call + every row."""
    row_ms, call_ms = COSTS[cost]
    return call_ms + ROWS * row_ms


def standin_class(table: dict):  # noqa: C901  (one class, its methods nested)
    """A stand-in ScorerActor (see the module's docstring); ``table``: removed set -> (value, row sums,
    row counts) of the sets whose real losses are known."""
    counts = list(next(iter(table.values()))[2])
    rng = np.random.default_rng(0)
    dense = np.array(table[min(table, key=lambda s: table[s][0])][1]) * 0.9  # synthetic: a base per row
    weight = rng.uniform(0.02, 0.3, N_BLOCKS)  # per block, per row noise
    noise = rng.normal(0, 0.3, (N_BLOCKS, ROWS))
    memo: dict[tuple[int, ...], tuple[list[float], list[float]]] = {}  # a stand-in's losses per set, computed once

    class StandInScorer:
        def __init__(self, cfg, threads: int, name: str):
            self.cfg, self.name, self.threads = cfg, name, threads
            self.node = ray.get_runtime_context().get_node_id()
            self.row_ms, self.call_ms = COSTS["gpu"]
            self.busy = 0.0
            self.calls = self.evals = 0

        def nap(self, ms: float, rows: int) -> tuple:
            """The floor part: ``ms`` of sleep, counted busy, answered as a look share of ``rows`` rows is."""
            dt = self._sleep(ms, 0)
            return "r", self.name, self.node, [([0.0] * rows, [1.0] * rows, 64 * rows, dt, 0)]

        def set_cost(self, row_ms: float, call_ms: float) -> None:
            self.row_ms, self.call_ms = row_ms, call_ms

        def counters(self) -> dict:
            pss = 0
            with open("/proc/self/smaps_rollup") as f:
                for line in f:
                    if line.startswith("Pss:"):
                        pss = int(line.split()[1]) * 1024
            return {"busy": self.busy, "calls": self.calls, "evals": self.evals, "pss": pss}

        def info(self) -> dict:
            return {
                "name": self.name,
                "node": self.node,
                "pid": os.getpid(),
                "n_blocks": N_BLOCKS,
                "model": self.cfg.model,
                "dtype": "float32",
                "device": "cpu",
                "threads": self.threads,
            }

        def _sleep(self, ms: float, evals: int) -> float:
            t0 = time.perf_counter()
            time.sleep(ms / 1000)
            dt = time.perf_counter() - t0
            self.busy += dt
            self.calls += 1
            self.evals += evals
            return dt

        @staticmethod
        def _losses(key: tuple[int, ...]) -> tuple[list[float], list[float]]:
            if key in memo:  # a race asks a survivor's losses at every look
                return memo[key]
            if key in table:
                out = list(table[key][1]), counts
            elif not key:
                out = list(dense), counts
            else:
                idx = list(key)
                sums = dense * (1 + (weight[idx, None] * (1 + noise[idx])).sum(0))
                out = [float(s) for s in sums], counts
            memo[key] = out
            return out

        @staticmethod
        def _values(items: list) -> list[float]:
            """Values of [(removed, rows n)]: the stored ones from the table, the synthetic k-sets of one
            call in one numpy pass (a stand-in's own CPU per candidate stays small beside the pool's:
            ~20 us a candidate one at a time, which at 32 gpu-like stand-ins was a third of the CPU)."""
            out: list[float] = [0.0] * len(items)
            todo: dict[tuple[int, int], list[tuple[int, tuple[int, ...]]]] = {}  # (n, k) -> [(item, set)]
            for j, (removed, n) in enumerate(items):
                key = tuple(sorted(int(i) for i in removed))
                if key in table and n == ROWS:
                    out[j] = float(table[key][0])
                elif key in table or not key:
                    sums, cs = StandInScorer._losses(key)
                    out[j] = float(math.exp(np.sum(sums[:n]) / np.sum(cs[:n])))
                else:
                    todo.setdefault((n, len(key)), []).append((j, key))
            for (n, _), got in todo.items():
                idx = np.array([key for _, key in got])  # m x k
                sums = dense * (1 + (weight[idx][..., None] * (1 + noise[idx])).sum(1))  # m x rows
                vals = np.exp(sums[:, :n].sum(1) / np.sum(counts[:n]))
                for (j, _), v in zip(got, vals):
                    out[j] = float(v)
            return out

        def _scores(self, items: list, seconds: float) -> list:
            """Scores of [(removed, fidelity)], ``seconds`` each."""
            from ghostsearch.objectives.scores import Score

            ns = [max(1, math.ceil(f * ROWS - 1e-9)) for _, f in items]
            vals = self._values([(r, n) for (r, _), n in zip(items, ns)])
            return [Score(value=v, tokens=n * 64, seconds=seconds, start=0) for v, n in zip(vals, ns)]

        def score(self, spec, removed: tuple, fidelity: float, prefix):
            from ghostsearch.pool.actors import Served

            n = max(1, math.ceil(fidelity * ROWS - 1e-9))
            dt = self._sleep(self.call_ms + n * self.row_ms, 1)
            return Served(self._scores([(removed, fidelity)], dt)[0], actor=self.name, node=self.node)

        def score_many(self, spec, items: list):
            """[(removed, fidelity, prefix)]: each its own call's cost (as Scorer.score, one at a time); sent as
            ScorerActor.score_many sends them (``answers``)."""

            ns = [max(1, math.ceil(f * ROWS - 1e-9)) for _, f, _ in items]
            dt = self._sleep(sum(self.call_ms + n * self.row_ms for n in ns), len(items))
            vals, each = self._values([(r, n) for (r, _, _), n in zip(items, ns)]), dt / max(1, len(items))
            return "s", self.name, self.node, [(v, n * 64, each, 0) for v, n in zip(vals, ns)]  # as pool.actors.answers

        def _rows(self, removed, rows, seconds: float) -> tuple:
            """One candidate's RowScore fields (as pool.actors.answers sends them)."""
            sums, cs = self._losses(tuple(sorted(int(i) for i in removed)))
            return [sums[r] for r in rows], [cs[r] for r in rows], 64 * len(rows), seconds, 0

        def rows(self, spec, removed: tuple, rows: tuple, prefix):
            from ghostsearch.objectives.scores import RowScore
            from ghostsearch.pool.actors import Served

            dt = self._sleep(self.call_ms + len(rows) * self.row_ms, 1)
            return Served(RowScore(*self._rows(removed, rows, dt)), actor=self.name, node=self.node)

        def rows_many(self, spec, items: list, rows: tuple):
            dt = self._sleep(self.call_ms + len(items) * len(rows) * self.row_ms, len(items))
            each = dt / max(1, len(items))
            return "r", self.name, self.node, [self._rows(removed, rows, each) for removed, _ in items]

        def statistic(self, spec, name: str):
            if name != "row_counts":
                raise ValueError(f"the stand-in scorer has no statistic {name!r}")
            return list(counts)

    return ray.remote(max_restarts=-1, max_task_retries=0)(StandInScorer)


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


def proc_cpu(pid: int) -> float:
    """utime + stime of a process, seconds."""
    with open(f"/proc/{pid}/stat") as f:
        parts = f.read().rsplit(")", 1)[1].split()
    return (int(parts[11]) + int(parts[12])) / os.sysconf("SC_CLK_TCK")


def forget(broker) -> None:
    """Empty the broker's shared cache (a bench's reset between parts, so that no part is answered from
    another's values)."""
    ray.get(broker.__ray_call__.remote(lambda self: self.cache.clear()))


def ray_pids() -> list[int]:
    """The processes of the local Ray this bench started (raylet, GCS, their helpers): Ray's own CPU."""
    node = ray._private.worker._global_node  # noqa: SLF001  (a bench: Ray's own processes have no public list)
    return [p.pid for _, p in node.live_processes()] if node is not None else []


def cpu_of(pids: list[int]) -> float:
    total = 0.0
    for pid in pids:
        try:
            total += proc_cpu(pid)
        except (FileNotFoundError, ProcessLookupError):  # a process that ended in between
            pass
    return total


class Meter:
    """Wall, actors' busy seconds, and the CPU seconds of every process in the path of one timed part:
    the broker, the driver (this process), the stand-ins (their Ray worker processes) and Ray's own
    (raylet, GCS)."""

    def __init__(self, handles, broker_pid: int, actor_pids: list[int] | None = None):
        self.handles, self.broker_pid = handles, broker_pid
        self.actor_pids, self.ray_pids = actor_pids or [], ray_pids()

    def __enter__(self):
        c0 = ray.get([h.counters.remote() for h in self.handles])
        self.busy0, self.calls0 = sum(c["busy"] for c in c0), sum(c["calls"] for c in c0)
        self.b0, self.d0 = proc_cpu(self.broker_pid), time.process_time()
        self.a0, self.r0 = cpu_of(self.actor_pids), cpu_of(self.ray_pids)
        self.t0 = time.perf_counter()
        return self

    def __exit__(self, *exc):
        self.wall = time.perf_counter() - self.t0
        self.broker = proc_cpu(self.broker_pid) - self.b0
        self.driver = time.process_time() - self.d0
        self.actors = cpu_of(self.actor_pids) - self.a0
        self.ray = cpu_of(self.ray_pids) - self.r0
        c1 = ray.get([h.counters.remote() for h in self.handles])
        self.busy = sum(c["busy"] for c in c1) - self.busy0
        self.calls = sum(c["calls"] for c in c1) - self.calls0  # scorer calls (chunks, look shares)

    def numbers(self, evals: float, n: int) -> dict:
        per = 1000 / max(evals, 1e-9)
        return {
            "wall": self.wall,
            "evals": evals,
            "evals_per_s": evals / self.wall,
            "busy_share": self.busy / (n * self.wall),
            "scorer_calls": self.calls,
            "broker_ms_per_eval": self.broker * per,
            "broker_share": self.broker / self.wall,
            "driver_ms_per_eval": self.driver * per,
            "driver_share": self.driver / self.wall,
            "actors_ms_per_eval": self.actors * per,
            "ray_ms_per_eval": self.ray * per,
            # every process in the path, in cores: what the part asked of the machine's CPUs
            "cores": (self.broker + self.driver + self.actors + self.ray) / self.wall,
        }


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


def distinct_sets(n: int, seed: int) -> list[Candidate]:
    rng = random.Random(seed)
    out: set[tuple[int, ...]] = set()
    while len(out) < n:
        out.add(tuple(sorted(rng.sample(range(1, N_BLOCKS - 1), K))))
    return [Candidate(c) for c in sorted(out)]


def client_for(broker, cfg, tmp: str, name: str) -> PoolClient:
    return PoolClient(broker, cfg.objective_spec(), Ledger(os.path.join(tmp, name)), name, 0, cfg.model, cfg.dtype, k=K)


def part_throughput(broker, cfg, meter, n: int, cost: str, seconds: float, cap: int, tmp: str, seed: int, prof=None):
    ideal = n / (cost_ms(cost) / 1000)
    batch = int(min(cap, max(8 * n, ideal * seconds)))
    forget(broker)
    client = client_for(broker, cfg, tmp, f"tp-{cost}-{n}")
    client.evaluate(distinct_sets(n, seed + 1000), "warm")  # every actor has answered once
    cands = distinct_sets(batch, seed)
    if prof is not None:
        prof.start(broker)
    with meter() as m:
        client.evaluate(cands, "throughput")
    if prof is not None:
        prof.stop(broker, f"throughput, {cost}, N = {n}")
    client.ledger.close()
    return {"part": "throughput", "batch": batch, "ideal_per_s": ideal, **m.numbers(batch, n)}


def part_search(broker, cfg, meter, n: int, searcher: str, params: dict, budget, tmp: str, label: str):
    forget(broker)
    client = client_for(broker, cfg, tmp, f"{label}-{n}-{time.monotonic_ns()}")
    client.n_rows()
    space = Space(N_BLOCKS, K, protected_blocks(cfg, N_BLOCKS))
    s = make_searcher(searcher, space, params=params, budget=budget)
    inside = {"s": 0.0, "calls": 0}  # the driver's wall inside pool calls (a look, a batch) and their count

    def timed(fn):
        def call(*a, **kw):
            t0 = time.perf_counter()
            try:
                return fn(*a, **kw)
            finally:
                inside["s"] += time.perf_counter() - t0
                inside["calls"] += 1

        return call

    client.rows, client.evaluate = timed(client.rows), timed(client.evaluate)  # type: ignore[method-assign]
    with meter() as m:
        run(s, client)
    client.ledger.close()
    removed, value = s.result()
    got = m.numbers(s.used, n)
    return {
        "part": label,
        "set": list(removed or []),
        "value": value,
        "calls": client.evaluations,
        **got,
        # where the wall went: pool calls (looks of a race, batches) vs the driver between them
        "pool_calls": inside["calls"],
        "in_calls_share": inside["s"] / m.wall,
        "busy_in_calls": m.busy / (n * inside["s"]) if inside["s"] else 0.0,
        "ms_per_call": 1000 * inside["s"] / max(1, inside["calls"]),
    }


@ray.remote(num_cpus=0)
class Relay:
    """The floor part's stand-in broker: an async actor that fans one call out to every stand-in and answers
    when all have (what ``Broker.look`` does, without the cache, shares, ledger, retries or metrics)."""

    def __init__(self, handles):
        self.handles = handles

    async def fan(self, ms: float, rows: int) -> list:
        import asyncio

        return list(await asyncio.gather(*[h.nap.remote(ms, rows) for h in self.handles]))


def part_floor(handles, meter, n: int, share_ms: float, looks: int, raced: dict | None) -> list[dict]:
    """What Ray itself costs a look on this machine: ``looks`` barriers of one ``share_ms`` sleep on each of the
    n stand-ins, sent (a) from the driver straight to the stand-ins and (b) through an async relay actor (the
    broker's hop), with no ghostsearch code on the path; beside them, ``raced`` (raced greedy's look, measured
    in the same run). Overhead a look = its wall less ``share_ms``; busy = the stand-ins' sleep / (n x wall)."""
    relay = Relay.remote(handles)  # type: ignore[attr-defined]  # a Ray actor class
    ray.get(relay.fan.remote(0.0, 1))  # warm
    out = []
    for name, call in (
        ("floor-direct", lambda: ray.get([h.nap.remote(share_ms, 4) for h in handles])),
        ("floor-relay", lambda: ray.get(relay.fan.remote(share_ms, 4))),
    ):
        with meter() as m:
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
    table = stored_path(K)
    cls = standin_class(table)
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
            cfg = load_config(None, base + [f"pool.actors={n}"])
            t_start = time.perf_counter()
            broker = session.start(cfg, actor_class=cls)
            names = ray.get(broker.pool_status.remote()).actors
            handles = [ray.get_actor(a, namespace=NAMESPACE) for a in names]
            pid = ray.get(broker.__ray_call__.remote(lambda self: os.getpid()))
            apids = [i["pid"] for i in ray.get([h.info.remote() for h in handles])]

            def meter(handles=handles, pid=pid, apids=apids):
                return Meter(handles, pid, apids)

            started = time.perf_counter() - t_start
            c0, a0, t0 = proc_cpu(pid), cpu_of(apids), time.perf_counter()
            time.sleep(2.0)  # the pool idle: its processes' own CPU (Ray's threads), the floor under every part
            idle = (proc_cpu(pid) - c0) / (time.perf_counter() - t0)
            idle_actors = (cpu_of(apids) - a0) / (time.perf_counter() - t0)
            for cost in costs:
                ray.get([h.set_cost.remote(*COSTS[cost]) for h in handles])
                got = []
                if "throughput" in parts:
                    got.append(
                        part_throughput(
                            broker, cfg, meter, n, cost, args.seconds, args.max_batch, tmp, seed=n, prof=prof
                        )
                    )
                if "greedy" in parts:
                    got.append(part_search(broker, cfg, meter, n, "greedy", {"race": False}, None, tmp, "exact"))
                    got.append(part_search(broker, cfg, meter, n, "greedy", {"race": True}, None, tmp, "raced"))
                if "floor" in parts:
                    raced = next((r for r in got if r["part"] == "raced"), None)
                    # raced greedy's mean share of a look (its stand-ins' sleep over n x looks), else 8b's at N = 8
                    share = 1000 * raced["busy_share"] * raced["wall"] / raced["pool_calls"] if raced else 26.3
                    got += part_floor(handles, meter, n, share, 30, raced)
                if "ga" in parts:
                    got.append(part_search(broker, cfg, meter, n, "ga", {}, Budget(args.budget), tmp, "ga"))
                if "bo" in parts:
                    bo = {"sampler": "tpe"}
                    got.append(part_search(broker, cfg, meter, n, "bo", bo, Budget(args.budget), tmp, "bo"))
                for r in got:
                    r.update(actors=n, cost=cost, label=args.label, load=os.getloadavg()[0])
                    rows.append(r)
                    print(json.dumps(r), flush=True)
                    if args.json:
                        with open(args.json, "a") as f:
                            f.write(json.dumps(r) + "\n")
            pss = [c["pss"] for c in ray.get([h.counters.remote() for h in handles])]
            standin_bytes = int(1.2 * max(pss))
            print(
                f"N={n}: pool started in {started:.1f} s; idle CPU: broker {100 * idle:.1f}% of a core, "
                f"{n} stand-ins {100 * idle_actors:.1f}% together; "
                f"stand-in PSS {np.mean(pss) / 2**20:.0f} MiB each "
                f"({sum(pss) / 2**30:.2f} GiB for {n})",
                flush=True,
            )
            session.release_pool(broker)
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
