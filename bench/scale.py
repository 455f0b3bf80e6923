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
from pathlib import Path

import benchenv  # noqa: F401  (the repository on sys.path, offline HF, ../shared/data as the data directory)
import numpy as np

from ghostsearch.config import load_config, protected_blocks
from ghostsearch.pool.session import PoolSession
from ghostsearch.pool.standin import Cost, Profiles, Standins, standin_class
from ghostsearch.search import Budget, Space, make_searcher
from ghostsearch.study.race_replay import path_table

N_BLOCKS, K, ROWS = 30, 6, 64
STEPS = Path(__file__).resolve().parents[1] / "docs" / "results" / "bench-race-64"  # exact greedy's stored path
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


def part_search(pool: Standins, searcher: str, params: dict, budget, label: str) -> dict:
    space = Space(N_BLOCKS, K, protected_blocks(pool.cfg, N_BLOCKS))
    return pool.search(make_searcher(searcher, space, params=params, budget=budget), K, label)


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
    cls = standin_class(N_BLOCKS, ROWS, path_table(STEPS, K))
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
                    got += pool.floor(share, 30, raced)
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
