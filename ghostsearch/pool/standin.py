"""Stand-in scorers and the pool's ceiling (issue 49): ``ghostsearch pool ceiling``.

A stand-in (``standin_class``) is started where ``ScorerActor`` is (``PoolSession.start(actor_class=...)``,
the pool's own start path), behind the real ``Broker``, reached through the real ``PoolClient`` and driven by
the real searchers. It answers as a scorer at a set cost, ``call_ms`` a call (a forward's launch) plus
``row_ms`` per calibration row per candidate, paid by ``time.sleep`` (no model, no CPU of its own): a look
of a race (``rows_many``: m candidates x n rows in one call) costs one call + m x n rows, as the real
scorer's grouped forward; a batch of exact candidates (``score_many``) costs each candidate its own call.
Its values are synthetic (seeded per block and row), or a table's where one is given (bench/scale.py gives
exact greedy's stored losses, so every race drops what the live race dropped).

What is measured, per pool of N stand-ins (``Standins``), each part timed in the driver (``Meter``):
``throughput`` (one batch of distinct k-sets through ``PoolClient.evaluate``: evaluations/s against the
ideal N / (cost of one candidate)) and ``search`` (a searcher run to its end on the pool: wall,
evaluations). Each reports the stand-ins' busy share (their sleep / (N x wall)), the broker's CPU seconds
per evaluation and as a share of the wall (read in the broker's process, wherever it runs), the driver's
and the stand-ins' own; with a local Ray, Ray's own processes' too. What the pool adds over the ideal is
the ceiling a real run meets before its scorers are the limit.
"""

from __future__ import annotations

import itertools
import math
import os
import random
import time
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import ray

from ghostsearch.config import Config, build_searcher, protected_blocks
from ghostsearch.core.errors import GhostsearchError
from ghostsearch.pool.actors import NAMESPACE
from ghostsearch.pool.client import PoolClient
from ghostsearch.pool.session import PoolSession
from ghostsearch.rundir.ledger import Ledger
from ghostsearch.search import Candidate, Searcher, run

TOKENS = 64  # a stand-in's tokens per calibration row (what its scores report)


@dataclass(frozen=True)
class Cost:
    """A stand-in's cost: ``row_ms`` per calibration row per candidate, ``call_ms`` per scorer call."""

    row_ms: float
    call_ms: float

    def candidate_ms(self, rows: int) -> float:
        """One exact candidate's cost: a call + every row."""
        return self.call_ms + rows * self.row_ms


def standin_class(n_blocks: int, rows: int, table: dict | None = None, seed: int = 0):  # noqa: C901
    """A stand-in ScorerActor class (see the module's docstring) for a model of ``n_blocks`` blocks scored
    on ``rows`` calibration rows. ``table``: removed set (sorted tuple) -> (value, row sums, row counts) of
    the sets whose losses are known; other sets get synthetic losses (seeded by ``seed``)."""
    rng = np.random.default_rng(seed)
    known: dict = table or {}
    if known:
        counts = list(next(iter(known.values()))[2])
        dense = np.array(known[min(known, key=lambda s: known[s][0])][1]) * 0.9  # a base per row
    else:
        counts = [TOKENS - 1] * rows
    weight = rng.uniform(0.02, 0.3, n_blocks)  # per block, per row noise
    noise = rng.normal(0, 0.3, (n_blocks, rows))
    if not known:  # a dense loss of 2.5-3.5 nats a token per row
        dense = np.array(counts) * rng.uniform(2.5, 3.5, rows)
    memo: dict[tuple[int, ...], tuple[list[float], list[float]]] = {}  # a stand-in's losses per set, computed once

    class StandInScorer:
        def __init__(self, cfg, threads: int, name: str):
            self.cfg, self.name, self.threads = cfg, name, threads
            self.node = ray.get_runtime_context().get_node_id()
            self.row_ms, self.call_ms, self.look_ms = 0.0, 0.0, 0.0
            self.busy = 0.0
            self.calls = self.evals = 0

        def nap(self, ms: float, n: int) -> tuple:
            """A bare share of a look: ``ms`` of sleep, counted busy, answered as a look share of ``n`` rows is."""
            dt = self._sleep(ms, 0)
            return "r", self.name, self.node, [([0.0] * n, [1.0] * n, TOKENS * n, dt, 0)]

        def set_cost(self, row_ms: float, call_ms: float, look_ms: float = 0.0) -> None:
            """``look_ms``: more a look's call (``rows_many``) only, a latency that exact scoring's concurrent
            calls would overlap (e.g. a remote pool's round trip; bench/race_breakdown.py --look-ms)."""
            self.row_ms, self.call_ms, self.look_ms = row_ms, call_ms, look_ms

        def counters(self) -> dict:
            pss = 0
            with open("/proc/self/smaps_rollup") as f:
                for line in f:
                    if line.startswith("Pss:"):
                        pss = int(line.split()[1]) * 1024
            return {
                "busy": self.busy,
                "calls": self.calls,
                "evals": self.evals,
                "pss": pss,
                "cpu": time.process_time(),
            }

        def info(self) -> dict:
            return {
                "name": self.name,
                "node": self.node,
                "pid": os.getpid(),
                "n_blocks": n_blocks,
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
            if key in known:
                out = list(known[key][1]), counts
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
                if key in known and n == rows:
                    out[j] = float(known[key][0])
                elif key in known or not key:
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

            ns = [max(1, math.ceil(f * rows - 1e-9)) for _, f in items]
            vals = self._values([(r, n) for (r, _), n in zip(items, ns)])
            return [Score(value=v, tokens=n * TOKENS, seconds=seconds, start=0) for v, n in zip(vals, ns)]

        def score(self, spec, removed: tuple, fidelity: float, prefix):
            from ghostsearch.pool.actors import Served

            n = max(1, math.ceil(fidelity * rows - 1e-9))
            dt = self._sleep(self.call_ms + n * self.row_ms, 1)
            return Served(self._scores([(removed, fidelity)], dt)[0], actor=self.name, node=self.node)

        def score_many(self, spec, items: list):
            """[(removed, fidelity, prefix)]: each its own call's cost (as Scorer.score, one at a time); sent as
            ScorerActor.score_many sends them (``answers``)."""
            ns = [max(1, math.ceil(f * rows - 1e-9)) for _, f, _ in items]
            dt = self._sleep(sum(self.call_ms + n * self.row_ms for n in ns), len(items))
            vals, each = self._values([(r, n) for (r, _, _), n in zip(items, ns)]), dt / max(1, len(items))
            return "s", self.name, self.node, [(v, n * TOKENS, each, 0) for v, n in zip(vals, ns)]

        def _rows(self, removed, which, seconds: float) -> tuple:
            """One candidate's RowScore fields (as pool.actors.answers sends them)."""
            sums, cs = self._losses(tuple(sorted(int(i) for i in removed)))
            return [sums[r] for r in which], [cs[r] for r in which], TOKENS * len(which), seconds, 0

        def rows(self, spec, removed: tuple, which: tuple, prefix):
            from ghostsearch.objectives.scores import RowScore
            from ghostsearch.pool.actors import Served

            dt = self._sleep(self.call_ms + len(which) * self.row_ms, 1)
            return Served(RowScore(*self._rows(removed, which, dt)), actor=self.name, node=self.node)

        def rows_many(self, spec, items: list, which: tuple):
            dt = self._sleep(self.call_ms + self.look_ms + len(items) * len(which) * self.row_ms, len(items))
            each = dt / max(1, len(items))
            return "r", self.name, self.node, [self._rows(removed, which, each) for removed, _ in items]

        def statistic(self, spec, name: str):
            if name != "row_counts":
                raise ValueError(f"the stand-in scorer has no statistic {name!r}")
            return list(counts)

    return ray.remote(max_restarts=-1, max_task_retries=0)(StandInScorer)


def proc_cpu(pid: int) -> float:
    """utime + stime of a local process, seconds."""
    with open(f"/proc/{pid}/stat") as f:
        parts = f.read().rsplit(")", 1)[1].split()
    return (int(parts[11]) + int(parts[12])) / os.sysconf("SC_CLK_TCK")


def cpu_of(pids: list[int]) -> float:
    total = 0.0
    for pid in pids:
        try:
            total += proc_cpu(pid)
        except (FileNotFoundError, ProcessLookupError):  # a process that ended in between
            pass
    return total


def ray_pids() -> list[int]:
    """The processes of a local Ray this driver started (raylet, GCS, their helpers): Ray's own CPU. None
    where the driver joined a cluster."""
    node = ray._private.worker._global_node  # noqa: SLF001  (Ray's own processes have no public list)
    return [p.pid for _, p in node.live_processes()] if node is not None else []


def broker_cpu(broker) -> float:
    """The CPU seconds of the broker's process so far (read there: the broker may run on another node)."""
    return ray.get(broker.__ray_call__.remote(lambda self: time.process_time()))


class Meter:
    """Wall, the stand-ins' busy seconds and calls, and the CPU seconds of every process in the path of one
    timed part: the broker, the driver (this process), the stand-ins, and a local Ray's own (raylet, GCS)."""

    def __init__(self, handles: list, broker):
        self.handles, self.broker_handle, self.ray_pids = handles, broker, ray_pids()

    def _counters(self) -> tuple[float, int, float]:
        c = ray.get([h.counters.remote() for h in self.handles])
        return sum(x["busy"] for x in c), sum(x["calls"] for x in c), sum(x["cpu"] for x in c)

    def __enter__(self) -> Meter:
        self.busy0, self.calls0, self.a0 = self._counters()
        self.b0, self.d0 = broker_cpu(self.broker_handle), time.process_time()
        self.r0 = cpu_of(self.ray_pids)
        self.t0 = time.perf_counter()
        return self

    def __exit__(self, *exc) -> None:
        self.wall = time.perf_counter() - self.t0
        self.driver = time.process_time() - self.d0
        self.broker = broker_cpu(self.broker_handle) - self.b0
        self.ray = cpu_of(self.ray_pids) - self.r0
        busy, calls, cpu = self._counters()
        self.busy, self.calls, self.actors = busy - self.busy0, calls - self.calls0, cpu - self.a0

    def numbers(self, evals: float, n: int) -> dict:
        per = 1000 / max(evals, 1e-9)
        return {
            "wall": self.wall,
            "evals": evals,
            "evals_per_s": evals / self.wall,
            "busy_share": self.busy / (n * self.wall),
            "scorer_calls": self.calls,  # scorer calls (chunks, look shares)
            "broker_ms_per_eval": self.broker * per,
            "broker_share": self.broker / self.wall,
            "driver_ms_per_eval": self.driver * per,
            "driver_share": self.driver / self.wall,
            "actors_ms_per_eval": self.actors * per,
            "ray_ms_per_eval": self.ray * per,
            # every process in the path, in cores: what the part asked of the machine's CPUs
            "cores": (self.broker + self.driver + self.actors + self.ray) / self.wall,
        }


class Standins:
    """A pool of ``cfg.pool.actors`` stand-ins (of ``cls``) on ``session``, started by the pool's own path
    (its named pool, if the config names one, is not used); ``release`` ends it. ``k``: the size of the sets
    the parts evaluate; ``tmp``: where their ledgers go."""

    def __init__(self, session: PoolSession, cfg: Config, cls, n_blocks: int, rows: int, tmp: str):
        self.cfg = replace(cfg, pool=replace(cfg.pool, name=None))
        self.n, self.n_blocks, self.rows, self.tmp = cfg.pool.actors, n_blocks, rows, tmp
        self.session = session
        t0 = time.perf_counter()
        self.broker = session.start(self.cfg, actor_class=cls)
        names = ray.get(self.broker.pool_status.remote()).actors
        self.handles = [ray.get_actor(a, namespace=NAMESPACE) for a in names]
        ray.get([h.info.remote() for h in self.handles])
        self.started_s = time.perf_counter() - t0
        self.cost = Cost(0.0, 0.0)

    def meter(self) -> Meter:
        return Meter(self.handles, self.broker)

    def set_cost(self, cost: Cost) -> None:
        ray.get([h.set_cost.remote(cost.row_ms, cost.call_ms) for h in self.handles])
        self.cost = cost

    def idle(self, seconds: float = 2.0) -> tuple[float, float]:
        """The pool idle for ``seconds``: the broker's CPU and the stand-ins' together, in cores (Ray's threads:
        the floor under every part)."""
        c0, a0, t0 = broker_cpu(self.broker), self._cpu(), time.perf_counter()
        time.sleep(seconds)
        c1, a1, dt = broker_cpu(self.broker), self._cpu(), time.perf_counter() - t0
        return (c1 - c0) / dt, (a1 - a0) / dt

    def _cpu(self) -> float:
        return sum(c["cpu"] for c in ray.get([h.counters.remote() for h in self.handles]))

    def pss(self) -> list[int]:
        """Each stand-in's proportional set size, bytes."""
        return [c["pss"] for c in ray.get([h.counters.remote() for h in self.handles])]

    def forget(self) -> None:
        """Empty the broker's shared cache, so that no part is answered from another's values."""
        ray.get(self.broker.__ray_call__.remote(lambda self: self.cache.clear()))

    def client(self, name: str, k: int) -> PoolClient:
        cfg = self.cfg
        ledger = Ledger(os.path.join(self.tmp, name))
        return PoolClient(self.broker, cfg.objective_spec(), ledger, name, 0, cfg.model, cfg.dtype, k=k)

    def distinct_sets(self, n: int, k: int, seed: int) -> list[Candidate]:
        """``distinct_sets`` of the blocks the config does not protect."""
        return distinct_sets(n, k, sorted(set(range(self.n_blocks)) - protected_blocks(self.cfg, self.n_blocks)), seed)

    def throughput(self, k: int, seconds: float, cap: int, seed: int, profile: Any = None) -> dict:
        """One batch of distinct k-sets (about ``seconds`` at the ideal rate, at least 8 a stand-in, at most
        ``cap``) through ``PoolClient.evaluate``, after every stand-in has answered once; ``profile``: an
        object with ``start(broker)`` and ``stop(broker, title)`` around the timed batch."""
        ideal = self.n / (self.cost.candidate_ms(self.rows) / 1000)
        batch = int(min(cap, max(8 * self.n, ideal * seconds)))
        self.forget()
        client = self.client(f"tp-{self.cost.row_ms}-{self.cost.call_ms}-{self.n}-{time.monotonic_ns()}", k)
        client.evaluate(self.distinct_sets(self.n, k, seed + 1000), "warm")
        self.forget()  # the batch is computed, none of it answered from the warm-up's values
        cands = self.distinct_sets(batch, k, seed)
        batch = len(cands)  # all the k-sets there are, where there are fewer
        if profile is not None:
            profile.start(self.broker)
        with self.meter() as m:
            client.evaluate(cands, "throughput")
        if profile is not None:
            profile.stop(
                self.broker,
                f"throughput, {self.cost.row_ms:g} ms a row + {self.cost.call_ms:g} ms a call, N = {self.n}",
            )
        client.ledger.close()
        return {"part": "throughput", "batch": batch, "ideal_per_s": ideal, **m.numbers(batch, self.n)}

    def search(self, searcher: Searcher, k: int, label: str) -> dict:
        """``searcher`` run to its end on the pool: its answer, wall and evaluations, and where the wall went
        (the pool calls, a race's looks or a batch, against the driver between them)."""
        self.forget()
        client = self.client(f"{label}-{self.n}-{time.monotonic_ns()}", k)
        client.n_rows()
        inside = {"s": 0.0, "calls": 0}  # the driver's wall inside pool calls and their count

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
        with self.meter() as m:
            run(searcher, client)
        client.ledger.close()
        removed, value = searcher.result()
        return {
            "part": label,
            "set": list(removed or []),
            "value": value,
            "calls": client.evaluations,
            **m.numbers(searcher.used, self.n),
            "pool_calls": inside["calls"],
            "in_calls_share": inside["s"] / m.wall,
            "busy_in_calls": m.busy / (self.n * inside["s"]) if inside["s"] else 0.0,
            "ms_per_call": 1000 * inside["s"] / max(1, inside["calls"]),
        }

    def floor(self, share_ms: float, looks: int, search: dict | None = None) -> list[dict]:
        """What Ray itself costs a look here: ``looks`` rounds of one ``share_ms`` sleep on every stand-in, sent
        (a) from the driver straight to the stand-ins and (b) through an async relay actor (the broker's hop),
        with no ghostsearch code on the path; beside them, ``search`` (a ``search`` part's row: its pool
        calls, measured on the same pool). Overhead a look = its wall less ``share_ms``."""
        handles, n = self.handles, self.n
        relay = relay_class().remote(handles)
        ray.get(relay.fan.remote(0.0, 1))  # warm
        out = []
        for name, call in (
            ("floor-direct", lambda: ray.get([h.nap.remote(share_ms, 4) for h in handles])),
            ("floor-relay", lambda: ray.get(relay.fan.remote(share_ms, 4))),
        ):
            with self.meter() as m:
                for _ in range(looks):
                    call()
            ms = 1000 * m.wall / looks
            out.append(
                {"part": name, "share_ms": share_ms, "looks": looks, "ms_per_look": ms, "overhead_ms": ms - share_ms}
                | m.numbers(looks * n, n)
            )
        if search is not None:
            out.append(
                {
                    "part": "floor-look",
                    "share_ms": share_ms,
                    "looks": search["pool_calls"],
                    "ms_per_look": search["ms_per_call"],
                    "overhead_ms": search["ms_per_call"] - share_ms,
                    "busy_share": search["busy_share"],
                }
            )
        ray.kill(relay)
        return out


def distinct_sets(n: int, k: int, free: list[int], seed: int) -> list[Candidate]:
    """``n`` distinct k-sets of the blocks ``free`` (all of them where there are no more), sorted, drawn by
    ``seed``."""
    if n >= math.comb(len(free), k):
        return [Candidate(c) for c in itertools.combinations(free, k)]
    rng = random.Random(seed)
    out: set[tuple[int, ...]] = set()
    while len(out) < n:
        out.add(tuple(sorted(rng.sample(free, k))))
    return [Candidate(c) for c in sorted(out)]


def relay_class():
    """The floor's stand-in broker: an async actor that fans one call out to every stand-in and answers when
    all have (what ``Broker.look`` does, without the cache, shares, ledger, retries or metrics)."""

    class Relay:
        def __init__(self, handles):
            self.handles = handles

        async def fan(self, ms: float, n: int) -> list:
            import asyncio

            return list(await asyncio.gather(*[h.nap.remote(ms, n) for h in self.handles]))

    return ray.remote(num_cpus=0)(Relay)


class Profiles:
    """cProfile of the driver (this process) and of the broker over one part. The broker's methods run on
    its event loop's thread, not on the thread ``__ray_call__`` runs on: its profiler is switched on and
    off there (``call_soon_threadsafe`` on every running event loop of the broker's process)."""

    def __init__(self, top: int = 22, say=print):
        self.top, self.say = top, say

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

    def stop(self, broker, title: str) -> None:
        import io
        import pstats

        self.driver.disable()
        top = self.top

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
        self.say(
            f"--- profile, {title}: the broker ({self.loops} event loops)\n{text}\n--- the driver\n{out.getvalue()}"
        )


def parse_actors(text: str) -> list[int]:
    """'2,4,8' -> [2, 4, 8]: the pool sizes to measure (one line on a bad list)."""
    try:
        ns = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        ns = []
    if not ns or min(ns) < 1:
        raise GhostsearchError(f"--actors {text!r}: give pool sizes of 1 or more, comma-separated, e.g. 2,4,8")
    return ns


def ceiling(
    cfg: Config,
    actors: list[int],
    cost: Cost,
    n_blocks: int,
    *,
    seconds: float = 2.0,
    max_batch: int = 20000,
    search: bool = True,
    floor: int = 0,
    profile: Profiles | None = None,
    tmp: str,
    say=print,
) -> list[dict]:
    """``ghostsearch pool ceiling``'s work: per pool size N in ``actors``, a pool of N stand-ins at ``cost``
    (on ``cfg``'s Ray: pool.address / $RAY_ADDRESS, else a local one with as many CPUs as the largest pool
    needs: a stand-in sleeps) with ``cfg.calibration.n_seq`` rows and sets of ``cfg.k`` of ``n_blocks``
    blocks; its throughput (``profile``: the broker and the driver profiled over it) and, with ``search``, the
    config's searcher run on it; with ``floor``, that many bare rounds of a look (``Standins.floor``: of the
    search's mean share of a pool call, else of one candidate's cost). Each part's numbers are passed to
    ``say`` as they come and returned."""
    rows, k, out = cfg.calibration.n_seq, cfg.k, []
    cls = standin_class(n_blocks, rows)
    with PoolSession(cfg, dashboard=False, num_cpus=max(actors) * cfg.pool.threads) as session:
        for n in actors:
            pool = Standins(session, replace(cfg, pool=replace(cfg.pool, actors=n)), cls, n_blocks, rows, tmp)
            pool.set_cost(cost)
            got = [pool.throughput(k, seconds, max_batch, seed=n, profile=profile)]
            ran = None
            if search:
                s = build_searcher(pool.cfg, cfg.searcher, k, cfg.seed, n_blocks)
                got.append(ran := pool.search(s, k, cfg.searcher))
            if floor:
                share = cost.candidate_ms(rows)
                if ran is not None:  # the stand-ins' sleep per pool call and stand-in
                    share = 1000 * ran["busy_share"] * ran["wall"] / max(1, ran["pool_calls"])
                got += pool.floor(share, floor, ran)
            for r in got:
                r.update(actors=n, row_ms=cost.row_ms, call_ms=cost.call_ms, rows=rows)
                say(r)
                out.append(r)
            session.release_pool(pool.broker)
    return out


def ceiling_table(rows: list[dict]) -> str:
    """The ceiling as a markdown table: per N, the throughput against the ideal, the broker's time per
    evaluation, the stand-ins' busy share, the searcher's run, and where measured the floor of a look."""
    floors = any(r["part"].startswith("floor-") for r in rows)
    out = [
        "| N | evals/s | ideal N/cost | x ideal | broker ms/eval (share of wall) | busy "
        "| search | search s | search evals (evals/s, busy) |"
        + (" look ms: search / relay / direct (share) |" if floors else ""),
        "|---|---|---|---|---|---|---|---|---|" + ("---|" if floors else ""),
    ]
    for n in dict.fromkeys(r["actors"] for r in rows):
        by = {r["part"]: r for r in rows if r["actors"] == n}
        t = by["throughput"]
        s = next((r for p, r in by.items() if not p.startswith(("throughput", "floor"))), None)
        cells = [
            str(n),
            f"{t['evals_per_s']:.1f}",
            f"{t['ideal_per_s']:.1f}",
            f"{t['evals_per_s'] / t['ideal_per_s']:.2f}",
            f"{t['broker_ms_per_eval']:.3f} ({100 * t['broker_share']:.0f}%)",
            f"{100 * t['busy_share']:.0f}%",
        ]
        if s:
            cells += [
                s["part"],
                f"{s['wall']:.2f}",
                f"{s['evals']:.1f} ({s['evals_per_s']:.1f}, {100 * s['busy_share']:.0f}%)",
            ]
        else:
            cells += ["-", "-", "-"]
        if floors:
            ms = [
                f"{by[p]['ms_per_look']:.1f}" if p in by else "-" for p in ("floor-look", "floor-relay", "floor-direct")
            ]
            share = next((by[p]["share_ms"] for p in ("floor-relay", "floor-direct") if p in by), None)
            cells.append(" / ".join(ms) + (f" ({share:.1f})" if share is not None else ""))
        out.append("| " + " | ".join(cells) + " |")
    return "\n".join(out)
