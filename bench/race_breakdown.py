"""Where a raced evaluation's time goes (issue 40): exact and raced greedy through the real pool path
(search loop -> PoolClient -> Broker -> scorer actor), timed part by part in the driver.

  python bench/race_breakdown.py --sim 20,2,0.2,0.05 --k 6            # simulated scorers, ms per row
  python bench/race_breakdown.py --real fp32,bf16 --k 1 --n-seq 64 --seq-len 64   # SmolLM2, C4
  python bench/race_breakdown.py --shapes fp32 --n-seq 64 --seq-len 64   # one look, split by rows or candidates
  python bench/race_breakdown.py --looks fp32 --steps 3 --n-seq 64 --seq-len 64   # the stored path's looks, in-process
  python bench/race_breakdown.py --real fp32 --probe ...   # and, in the scorers: block forwards, CPU, calls

Parts of a search's wall time (one scorer: nothing overlaps, so the parts add up):
  scorer     the scorer's own seconds for the rows (raced) or candidates (exact) it computed: rows scored
  transport  waiting on the pool beyond the scorer's seconds: broker round trips, Ray scheduling,
             serialization of requests and answers (one broker call per look, one per exact candidate)
  client     PoolClient beyond the wait: ledger rows, partial values (pool/blocks.py), Python
  bound      the race's arithmetic (racing.confidently_worse)
  looks      the rest of run_race: building each look's requests, bookkeeping
  searcher   the rest: the searcher's ask/tell and the loop
``--sim``: the same race driven by the pool's stand-in scorer (pool/standin.py, no model) whose cost is
``call_ms`` per scorer call plus ``row_ms`` per row per candidate (a batched look of m survivors x n rows
costs call_ms + m * n * row_ms + ``look_ms``, an exact candidate call_ms + N * row_ms; ``look_ms`` is a
look's latency that the exact path's concurrent requests would overlap, e.g. a remote pool's round trip),
answering with the per-row losses exact greedy's path really has at C4 64 x 64
(docs/results/bench-race-64/step<t>.parquet, SmolLM2, fp32):
every race drops what the live race dropped. ``--real``: SmolLM2 in that dtype (``bf16`` needs a
CPU with native bf16 to be fast), ``--k`` greedy steps on C4 ``--n-seq`` x ``--seq-len``.
Each search gets a fresh pool (no shared cache between them); exact and raced alternate.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import json
import os
import tempfile
import time
from collections import defaultdict
from pathlib import Path

import benchenv  # noqa: F401  (the repository on sys.path, offline HF, ../shared/data as the data directory)
import numpy as np
import ray

from ghostsearch.config import load_config, protected_blocks
from ghostsearch.pool.client import PoolClient
from ghostsearch.pool.session import PoolSession
from ghostsearch.pool.standin import standin_class
from ghostsearch.rundir.ledger import Ledger
from ghostsearch.search import Space, make_searcher, racing, run
from ghostsearch.search import loop as loop_mod
from ghostsearch.search.race_report import race_report
from ghostsearch.study.race_replay import path_table, race_looks

STEPS = Path(__file__).resolve().parents[1] / "docs" / "results" / "bench-race-64"  # exact greedy's stored path
PARTS = ["scorer", "transport", "client", "bound", "looks", "searcher"]


def probe_class():
    """``--probe``: the real ScorerActor, counting in its own process what its calls do: per method the calls,
    candidates, wall seconds (perf_counter) and this thread's CPU seconds (time.thread_time: a wall above it is
    time the scorer waited for a core), the block forwards in rows x blocks (``Stack.block``, every row of every
    block run, the prefix runs included) and in particular those of prefix runs (``ensure_run``: exact scoring's
    accepted set on every row; ``_look_runs``: a look's prefix on its rows), and the scorer's niceness."""
    from ghostsearch.pool.actors import ScorerActor

    base = ScorerActor.__ray_metadata__.modified_class

    class ProbeScorer(base):  # type: ignore[misc,valid-type]
        def __init__(self, cfg, threads: int, name: str):
            super().__init__(cfg, threads, name)
            self.c: dict = defaultdict(float)
            self.in_prefix = 0
            stack, sc = self.scorer.stack, self.scorer
            block, ensure, look_runs = stack.block, sc.ensure_run, sc._look_runs

            def counted_block(i, h, cap):
                self.c["block_rows"] += h.shape[0]
                if self.in_prefix:
                    self.c["prefix_block_rows"] += h.shape[0]
                return block(i, h, cap)

            def prefixed(fn):
                def run(*a, **kw):
                    self.in_prefix += 1
                    try:
                        return fn(*a, **kw)
                    finally:
                        self.in_prefix -= 1

                return run

            stack.block = counted_block
            sc.ensure_run, sc._look_runs = prefixed(ensure), prefixed(look_runs)

        def _timed(self, name: str, n: int, fn, *a):
            t0, c0 = time.perf_counter(), time.thread_time()
            try:
                return fn(*a)
            finally:
                self.c[name + "_calls"] += 1
                self.c[name + "_items"] += n
                self.c[name + "_wall"] += time.perf_counter() - t0
                self.c[name + "_cpu"] += time.thread_time() - c0

        def score_many(self, spec, items: list):
            return self._timed("score_many", len(items), super().score_many, spec, items)

        def rows_many(self, spec, items: list, rows: tuple):
            return self._timed("rows_many", len(items), super().rows_many, spec, items, rows)

        def score(self, spec, removed, fidelity, prefix):
            return self._timed("score", 1, super().score, spec, removed, fidelity, prefix)

        def probe(self) -> dict:
            out = dict(self.c, nice=os.getpriority(os.PRIO_PROCESS, 0), pid=os.getpid())
            self.c.clear()
            return out

    return ray.remote(max_restarts=-1, max_task_retries=0)(ProbeScorer)


def cpu_by_process() -> dict[int, tuple[str, float]]:
    """pid -> (name, CPU seconds so far) of every process this user can read (/proc): what else ran."""
    tick = os.sysconf("SC_CLK_TCK")
    out = {}
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/stat") as f:
                st = f.read()
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                cmd = f.read().replace(b"\0", b" ").decode(errors="replace")[:80]
        except OSError:
            continue
        fields = st[st.rindex(")") + 2 :].split()
        name = st[st.index("(") + 1 : st.rindex(")")]
        out[int(pid)] = (f"{name}: {cmd}", (int(fields[11]) + int(fields[12])) / tick)
    return out


def cpu_spent(before: dict, after: dict, top: int = 12) -> list[tuple[str, float]]:
    """The CPU seconds each process spent between two ``cpu_by_process`` (new processes from 0), most first."""
    spent = [(after[p][0], after[p][1] - (before[p][1] if p in before else 0.0)) for p in after]
    return sorted(((n, round(s, 2)) for n, s in spent if s > 0.05), key=lambda x: -x[1])[:top]


class Timers:
    """Seconds per part, accumulated by wrappers around the library's own functions (driver side)."""

    def __init__(self):
        self.t: dict[str, float] = defaultdict(float)
        self.n: dict[str, int] = defaultdict(int)
        self.depth = 0

    def wrap(self, name: str, fn):
        @functools.wraps(fn)
        def timed(*a, **kw):
            t0 = time.perf_counter()
            try:
                return fn(*a, **kw)
            finally:
                self.t[name] += time.perf_counter() - t0
                self.n[name] += 1

        return timed


@contextlib.contextmanager
def instrumented(tm: Timers):
    """Wrap: the loop's run_race, racing.confidently_worse, PoolClient.rows/evaluate and the client's
    waits on Ray (ray.get / ray.wait as pool.py calls them)."""
    saved = [
        (loop_mod, "run_race", loop_mod.run_race),
        (racing, "confidently_worse", racing.confidently_worse),
        (PoolClient, "rows", PoolClient.rows),
        (PoolClient, "evaluate", PoolClient.evaluate),
        (ray, "get", ray.get),
        (ray, "wait", ray.wait),
    ]
    loop_mod.run_race = tm.wrap("run_race", loop_mod.run_race)
    racing.confidently_worse = tm.wrap("bound", racing.confidently_worse)
    PoolClient.rows = tm.wrap("client_rows", PoolClient.rows)  # type: ignore[method-assign]
    PoolClient.evaluate = tm.wrap("client_evaluate", PoolClient.evaluate)  # type: ignore[method-assign]
    ray.get = tm.wrap("wait", ray.get)
    ray.wait = tm.wrap("wait", ray.wait)
    try:
        yield tm
    finally:
        for obj, name, fn in saved:
            setattr(obj, name, fn)


def probed(broker) -> list:
    """The scorer actors of ``broker``'s pool (by name)."""
    from ghostsearch.pool.actors import NAMESPACE

    return [ray.get_actor(n, namespace=NAMESPACE) for n in ray.get(broker.pool_status.remote()).actors]


def one_search(
    session: PoolSession,
    cfg,
    k: int,
    raced: bool,
    actor_class=None,
    race: dict | str | None = None,
    probe: bool = False,
    cost: tuple | None = None,
) -> dict:
    """A fresh pool (warmed: objective prepared, row counts known), then greedy (exact or raced)
    timed part by part. ``cost``: the stand-ins' (row_ms, call_ms, look_ms)."""
    broker = session.start(cfg, actor_class=actor_class) if actor_class else session.start(cfg)
    if cost is not None:
        ray.get([a.set_cost.remote(*cost) for a in probed(broker)])
    n_blocks = 30
    space = Space(n_blocks, k, protected_blocks(cfg, n_blocks))
    scorer_s = [0.0]
    looks: list[tuple[int, int]] = []

    def on_result(row):
        if not row.cached and row.seconds is not None:
            scorer_s[0] += row.seconds

    load0 = os.getloadavg()[0]
    with tempfile.TemporaryDirectory() as tmp:
        client = PoolClient(
            broker, cfg.objective_spec(), Ledger(tmp), "bench", 0, cfg.model, cfg.dtype, k=k, on_result=on_result
        )
        client.n_rows()  # warm: the objective prepared on the scorer, the row counts known
        client.evaluate([], "warm")
        ray.get(broker.evaluate.remote(cfg.objective_spec(), [], 1.0, None, "warm"))
        client.look_costs = racing.LookCosts()  # race "auto": its estimate, reported
        setting = (race if isinstance(race, str) else dict(race or {})) if raced else False
        searcher = make_searcher("greedy", space, params={"race": setting})
        tm = Timers()
        inner_rows = PoolClient.rows

        def rows_logged(self, requests, name):
            looks.append((len(requests), len(requests[0].rows) if requests else 0))
            return inner_rows(self, requests, name)

        PoolClient.rows = rows_logged  # type: ignore[method-assign]
        probes = probed(broker) if probe else []
        ray.get([a.probe.remote() for a in probes])  # the warm-up's counts dropped
        cpu0 = cpu_by_process()
        try:
            with instrumented(tm):
                t0 = time.perf_counter()
                run(searcher, client)
                wall = time.perf_counter() - t0
        finally:
            PoolClient.rows = inner_rows  # type: ignore[method-assign]
        cpu = cpu_spent(cpu0, cpu_by_process())
        counts = ray.get([a.probe.remote() for a in probes])
        # one broker round trip with nothing to score (driver -> broker -> driver): the floor of a look
        spec, reps = cfg.objective_spec(), 20
        t1 = time.perf_counter()
        for _ in range(reps):
            ray.get(broker.rows.remote(spec, [], (0, 1), "probe"))
        t_trip = (time.perf_counter() - t1) / reps
    used = searcher.used
    actors = len(ray.get(broker.pool_status.remote()).actors)
    client_t = tm.t["client_rows"] + tm.t["client_evaluate"]
    parts = {
        "scorer": scorer_s[0],
        "transport": max(0.0, tm.t["wait"] - scorer_s[0]),
        "client": client_t - tm.t["wait"],
        "bound": tm.t["bound"],
        "looks": tm.t["run_race"] - tm.t["client_rows"] - tm.t["bound"],
        "searcher": wall - client_t - (tm.t["run_race"] - tm.t["client_rows"]),
    }
    with contextlib.suppress(Exception):
        session.release_pool(broker)
    return {
        "raced": raced,
        "wall": wall,
        "used": used,
        "set": list(searcher.result()[0] or []),
        "value": searcher.result()[1],
        "parts": parts,
        "looks": len(looks),
        "look_costs": client.look_costs.frozen,
        "race": race_report(searcher),  # races, exact_races (auto: no look could pay), used
        "rows_scored": sum(m * n for m, n in looks),
        "broker_calls": tm.n["wait"],
        "round_trip_s": t_trip,
        # from the ledger rows (each computed value's scorer seconds): scorer seconds over actors x wall, and
        # scorer seconds an evaluation (a raced evaluation = its rows' seconds over 64 rows' worth)
        "actors": actors,
        "busy_share": scorer_s[0] / (actors * wall),
        "scorer_s_per_eval": scorer_s[0] / max(used, 1e-9),
        "load": [load0, os.getloadavg()[0]],
        "cpu_s": cpu,  # --probe: CPU seconds per process during the search, most first (this machine's, all users)
        "probes": counts,  # --probe: per scorer, probe_class's counts
    }


def show(label: str, r: dict, exact: dict | None) -> str:
    p, w = r["parts"], r["wall"]
    per = w / max(r["used"], 1e-9)
    cells = " | ".join(f"{p[x]:.2f} ({100 * p[x] / w:.0f}%)" for x in PARTS)
    ratio = f"{w / exact['wall']:.2f}x" if exact else "-"
    ev = f"{r['used'] / exact['used']:.2f}x" if exact else "-"
    return (
        f"| {label} | {'raced' if r['raced'] else 'exact'} | {r['used']:.1f} ({ev}) | {w:.2f} ({ratio}) | "
        f"{per * 1000:.1f} | {cells} | {r['looks']} | {100 * r['busy_share']:.1f}% | {r['scorer_s_per_eval']:.3f} |"
    )


HEADER = (
    "| scorer | greedy | evaluations (x exact) | wall s (x exact) | ms per evaluation | "
    + " | ".join(f"{x} s (share)" for x in PARTS)
    + " | looks | scorers busy (ledger) | scorer s per evaluation |\n|"
    + "---|" * (8 + len(PARTS))
)


def look_shapes(cfg, rows_n: int, repeats: int) -> list[dict]:
    """``--shapes``: greedy's step-2 look (prefix {14}: 27 candidates, the race's first ``rows_n`` rows) scored
    in this process by one scorer (``Scorer.score_rows_many``, 1 thread), whole and as two scorers' shares would
    split it: by rows (``actors.shares``' choice: the prefix once per row) or by candidates (each share every row;
    the prefix rows computed twice). CPU seconds per candidate x row of each, and per split its larger share (a
    look's barrier); ``repeats`` times, interleaved."""
    from ghostsearch.recovery.aware import prepare
    from ghostsearch.scoring import scorer_from_config

    scorer = scorer_from_config(cfg, threads=1)
    key = prepare(scorer, cfg.objective_spec())
    n_rows = len(scorer.statistic(key, "row_counts"))
    rows = tuple(int(r) for r in racing.RaceParams().order(n_rows)[:rows_n])
    prefix = (14,)
    items = [(tuple(sorted((14, b))), prefix) for b in range(1, 29) if b != 14]
    half_r, half_c = len(rows) // 2, len(items) // 2
    shapes = {
        "whole": [(items, rows)],
        "rows": [(items, rows[:half_r]), (items, rows[half_r:])],
        "candidates": [(items[:half_c], rows), (items[half_c:], rows)],
    }
    scorer.score_rows_many(key, items[:2], rows[:1])  # warm
    out = []
    for rep in range(repeats):
        for name, parts in shapes.items():
            secs = []
            for its, rs in parts:
                t0 = time.process_time()
                scorer.score_rows_many(key, its, rs)
                secs.append(time.process_time() - t0)
            cells = len(items) * len(rows)
            out.append(
                {
                    "rep": rep,
                    "split": name,
                    "shares_s": secs,
                    "ms_per_cell": 1000 * sum(secs) / cells,
                    "barrier_s": max(secs),
                    "load": os.getloadavg()[0],
                }
            )
            print(json.dumps(out[-1]), flush=True)
    return out


def look_replay(cfg, steps: list[int], repeats: int) -> list[dict]:
    """``--looks``: the row shares of ``race_looks`` scored in this process (``Scorer.score_rows_many``, 1 thread),
    the look's LM head one candidate at a time (``rows_stack`` off: the code before issue 49's session 5) and
    stacked, interleaved: CPU seconds (thread_time) per candidate x row. Then the same shares with the blocks and
    the head replaced by recorders (no compute): block-rows by the rows of their forward and head rows by the rows
    of their call, which a per-shape cost turns into CPU (exact scoring: every forward and head a micro-batch)."""
    from collections import Counter

    import torch

    from ghostsearch.recovery.aware import prepare
    from ghostsearch.scoring import scorer_from_config

    scorer = scorer_from_config(cfg, threads=1)
    key = prepare(scorer, cfg.objective_spec())
    obj = scorer.prepared[key].objective
    shares_ = race_looks(STEPS, steps)
    cells = sum(len(c) * len(r) for _, _, c, r in shares_)
    out = []
    for rep in range(repeats):
        for stacked in (False, True):
            obj.rows_stack = stacked  # type: ignore[misc]  # the class's setting, overridden on this instance
            c0 = time.thread_time()
            for _, prefix, cands, rows in shares_:
                scorer.score_rows_many(key, [(c, prefix or None) for c in cands], rows)
            cpu = time.thread_time() - c0
            out.append({"part": "cpu", "rep": rep, "steps": steps, "head_stacked": stacked, "cpu_s": cpu})
            out[-1].update(ms_per_cell=1000 * cpu / cells, cells=cells, load=os.getloadavg()[0])
            print(json.dumps(out[-1]), flush=True)
    blocks: Counter = Counter()
    heads: Counter = Counter()

    def block(i, h, cap):
        blocks[h.shape[0]] += h.shape[0]
        return h

    def row_losses(stack, h, batch, rows):
        heads[h.shape[0]] += h.shape[0]
        return torch.zeros(len(rows), dtype=torch.float64), torch.ones(len(rows), dtype=torch.float64)

    scorer.stack.block, obj.row_losses = block, row_losses  # type: ignore[method-assign]
    for stacked in (False, True):
        obj.rows_stack = stacked  # type: ignore[misc]
        blocks.clear()
        heads.clear()
        for _, prefix, cands, rows in shares_:
            scorer.score_rows_many(key, [(c, prefix or None) for c in cands], rows)
        out.append({"part": "shapes", "steps": steps, "head_stacked": stacked, "cells": cells})
        out[-1].update(block_rows_by_forward_rows=dict(sorted(blocks.items())))
        out[-1].update(head_rows_by_call_rows=dict(sorted(heads.items())))
        print(json.dumps(out[-1]), flush=True)
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--sim", default="", help="comma list of ms per row (stand-in scorer), e.g. 20,2,0.2,0.05")
    ap.add_argument("--call-ms", type=float, default=2.0, help="--sim: fixed ms per scorer call (one forward)")
    ap.add_argument("--look-ms", type=float, default=0.0, help="--sim: ms more per look (rows) call only")
    ap.add_argument("--real", default="", help="comma list of dtypes for SmolLM2: fp32,bf16")
    ap.add_argument("--shapes", default="", help="a dtype: one look scored whole and split two ways (no Ray)")
    ap.add_argument(
        "--looks", default="", help="a dtype: the stored path's raced looks replayed, head one by one vs stacked"
    )
    ap.add_argument("--steps", default="1,2,3,4,5,6", help="--looks: greedy's steps whose looks are replayed")
    ap.add_argument("--look-rows", type=int, default=4, help="--shapes: the look's rows")
    ap.add_argument("--k", type=int, default=6)
    ap.add_argument("--actors", type=int, default=1, help="scorer actors (1: the parts add up to the wall)")
    ap.add_argument("--n-seq", type=int, default=64)
    ap.add_argument("--seq-len", type=int, default=64)
    ap.add_argument("--repeats", type=int, default=1, help="exact/raced pairs per configuration (alternating)")
    ap.add_argument(
        "--race", default="{}", help="the raced search's race (JSON: {} defaults, '\"auto\"' auto); several by ';'"
    )
    ap.add_argument("--probe", action="store_true", help="--real: count block forwards, CPU and calls in the scorers")
    ap.add_argument("--json", default=None, help="append every search's numbers to this JSONL file")
    args = ap.parse_args()
    base = [
        f"calibration.n_seq={args.n_seq}",
        f"calibration.seq_len={args.seq_len}",
        "search.protected=[0,-1]",
        f"pool.actors={args.actors}",
        "pool.threads=1",
        "pool.dashboard=false",
    ]
    if args.looks:
        steps = [int(t) for t in args.steps.split(",")]
        got = look_replay(load_config(None, base + [f"dtype={args.looks}"]), steps, args.repeats)
        if args.json:
            with open(args.json, "a") as f:
                f.writelines(json.dumps(r) + "\n" for r in got)
        return
    if args.shapes:
        got = look_shapes(load_config(None, base + [f"dtype={args.shapes}"]), args.look_rows, args.repeats)
        if args.json:
            with open(args.json, "a") as f:
                f.writelines(json.dumps(r) + "\n" for r in got)
        return
    session = PoolSession(None, dashboard=False, num_cpus=2).connect()  # a local Ray of its own, loopback only
    lines = []
    with session:  # released however it ends: the last pool ended, Ray shut down
        configs = []
        if args.sim:
            table = path_table(STEPS, args.k)
            for ms in args.sim.split(","):
                label = f"sim {ms} ms/row + {args.call_ms:g} ms/call"
                label += f" + {args.look_ms:g} ms/look" if args.look_ms else ""
                configs.append((label, ["dtype=fp32"], float(ms), table))
        for dt in filter(None, args.real.split(",")):
            configs.append((f"SmolLM2 {dt}", [f"dtype={dt}"], None, None))
        for label, extra, row_ms, table in configs:
            cfg = load_config(None, base + extra)
            cls = standin_class(30, 64, table) if table is not None else None  # the stored path: 30 blocks, 64 rows
            cost = (row_ms, args.call_ms, args.look_ms) if table is not None else None
            if args.probe and cls is None:
                cls = probe_class()
            for rep in range(args.repeats):
                exact = one_search(session, cfg, args.k, False, cls, probe=args.probe, cost=cost)
                raced = [
                    one_search(session, cfg, args.k, True, cls, json.loads(r), probe=args.probe, cost=cost)
                    for r in args.race.split(";")
                ]
                for r in [exact, *raced]:
                    print(json.dumps({"config": label, "rep": rep, **r}), flush=True)
                    if args.json:
                        with open(args.json, "a") as f:
                            f.write(json.dumps({"config": label, "rep": rep, "k": args.k, **r}) + "\n")
                lines += [show(label, exact, None)] + [
                    show(f"{label}, race {r}", x, exact) for r, x in zip(args.race.split(";"), raced)
                ]
                print("\n".join([HEADER] + lines), flush=True)
    print("\n".join([HEADER] + lines))


if __name__ == "__main__":
    np.set_printoptions(precision=3)
    main()
