"""Pool throughput and overhead, measured in one run.

  python bench/pool.py [--evals 24 --n-seq 4 --seq-len 128]

1. Throughput of the real scorer (SmolLM2) with 1 vs 2 scorer actors, one torch thread each:
   the same distinct candidates through the broker; ratio 2-actor / 1-actor (target >= 1.7x on 2 cores).
2. Pool overhead per evaluation with no-op scorers (``ghostsearch.pool.standin``'s stand-ins at no cost: no model,
   no sleep): driver -> broker -> actor -> broker -> driver for distinct candidates; median and p90 ms per
   evaluation (target median <= 5 ms).
3. The ledger's share of it: a journal line per row (now) vs a Parquet part per row (before), ratio.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

import benchenv  # noqa: E402,F401  (the repository on sys.path, offline HF, ../shared/data as the data directory)

from ghostsearch.config import load_config  # noqa: E402
from ghostsearch.pool.client import PoolClient  # noqa: E402
from ghostsearch.pool.session import PoolSession  # noqa: E402
from ghostsearch.pool.standin import Standins, distinct_sets, standin_class  # noqa: E402
from ghostsearch.rundir.ledger import Ledger  # noqa: E402


def candidates(n, seed=0):
    return distinct_sets(n, 6, list(range(1, 29)), seed)  # 6-sets of 30 blocks, the first and last kept


def throughput(session: PoolSession, cfg, cands, tmp) -> float:
    broker = session.start(cfg)
    client = PoolClient(broker, cfg.objective_spec(), Ledger(tmp), "bench", 0, cfg.model, cfg.dtype)
    client.evaluate(cands[: cfg.pool.actors], "warm")  # prepares the objective on each actor
    t0 = time.perf_counter()
    client.evaluate(cands[cfg.pool.actors :], "bench")
    dt = time.perf_counter() - t0
    session.release_pool(broker)  # its CPUs free for the next pool
    return (len(cands) - cfg.pool.actors) / dt


ROW = {  # a ledger row, as a search appends one
    "cell": "c",
    "searcher": "s",
    "objective": "perplexity",
    "objective_key": "k" * 80,
    "removed": [1, 2, 3],
    "k": 3,
    "fidelity": 1.0,
    "value": 3.25,
    "tokens": 512,
    "seconds": 0.1,
    "cached": False,
}


def ledger_write(tmp, n=200) -> tuple[float, float]:
    """ms per row: Ledger.append (journal line, flushed) vs one Parquet part per row (temp + rename)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from ghostsearch.rundir.ledger import SCHEMA

    row = {**ROW, "actor": "a", "node": "n", "time": 1.0, "seed": 0}
    led = Ledger(os.path.join(tmp, "journal"))
    t0 = time.perf_counter()
    for i in range(n):
        led.append({**row, "eval_id": f"j{i}"})
    journal = (time.perf_counter() - t0) * 1000 / n
    d = os.path.join(tmp, "parts")
    os.makedirs(d)
    t0 = time.perf_counter()
    for i in range(n):
        tmpf = os.path.join(d, f".p{i}.tmp")
        pq.write_table(pa.Table.from_pylist([{**row, "eval_id": f"p{i}"}], schema=SCHEMA), tmpf)
        os.replace(tmpf, os.path.join(d, f"part-{i}.parquet"))
    parts = (time.perf_counter() - t0) * 1000 / n
    return journal, parts


def ledger_fsync(tmp, n=200, rows=5000) -> dict:
    """ms per appended row under each fsync policy (never, at most once a second = the default, every
    row), and ms to compact ``rows`` rows (new part fsynced, directory fsynced, old files removed)."""
    from ghostsearch.rundir.ledger import compact

    row = ROW
    out = {}
    for name, every in (("never", float("inf")), ("1 s", 1.0), ("every row", 0.0)):
        led = Ledger(os.path.join(tmp, f"fsync-{name}"), fsync_seconds=every, checkpoint_seconds=float("inf"))
        t0 = time.perf_counter()
        for i in range(n):
            led.append(dict(row, eval_id=f"{name}{i}"))
        out[name] = (time.perf_counter() - t0) * 1000 / n
    run = os.path.join(tmp, "compact")
    led = Ledger(run, checkpoint_seconds=float("inf"))
    for i in range(rows):
        led.append(dict(row, eval_id=f"c{i}"))
    led.close()
    for i in range(rows // 10):  # a resumed writer's journal beside the part
        Ledger(run, checkpoint_seconds=float("inf")).append(dict(row, eval_id=f"r{i}"))
    t0 = time.perf_counter()
    compact(run)
    out["compact"] = (time.perf_counter() - t0) * 1000
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--evals", type=int, default=24)
    ap.add_argument("--n-seq", type=int, default=4)
    ap.add_argument("--seq-len", type=int, default=128)
    ap.add_argument("--noop-evals", type=int, default=400)
    ap.add_argument("--overhead-only", action="store_true", help="skip the model throughput part")
    ap.add_argument("--ledger-only", action="store_true", help="only the ledger's fsync policies and compaction")
    args = ap.parse_args()
    import tempfile

    tmp = tempfile.mkdtemp(prefix="gs-bench-pool-")
    f = ledger_fsync(tmp)
    print(
        f"ledger append per row: no fsync {f['never']:.3f} ms | fsync at most every 1 s (default) {f['1 s']:.3f} ms "
        f"| fsync every row {f['every row']:.3f} ms (ratio to the default {f['every row'] / f['1 s']:.0f}x); "
        f"compaction of 5,000 rows + 500 journal rows (fsync file and directory) {f['compact']:.0f} ms"
    )
    if args.ledger_only:
        return
    session = PoolSession(None, dashboard=False, num_cpus=2).connect()  # each part's pool: its own config
    base = [
        "dtype=fp32",
        "device=cpu",
        "calibration.dataset=lambada",
        f"calibration.n_seq={args.n_seq}",
        f"calibration.seq_len={args.seq_len}",
        "pool.threads=1",
    ]
    if not args.overhead_only:
        r1 = throughput(session, load_config(None, base + ["pool.actors=1"]), candidates(args.evals), tmp)
        r2 = throughput(session, load_config(None, base + ["pool.actors=2"]), candidates(args.evals, seed=1), tmp)
        print(f"throughput: 1 actor {r1:.3f} eval/s | 2 actors {r2:.3f} eval/s | ratio {r2 / r1:.2f}x (target >= 1.7x)")

    cfg = load_config(None, ["pool.actors=2", "pool.threads=1", "calibration.dataset=lambada"])
    client = Standins(session, cfg, standin_class(30, cfg.calibration.n_seq), 30, cfg.calibration.n_seq, tmp).client(
        "noop", 6
    )
    lat = []
    for c in candidates(args.noop_evals, seed=2):
        t0 = time.perf_counter()
        client.evaluate([c], "noop")
        lat.append((time.perf_counter() - t0) * 1000)
    lat.sort()
    t0 = time.perf_counter()
    batch = candidates(args.noop_evals, seed=3)
    client.evaluate(batch, "noop-batch")
    per = (time.perf_counter() - t0) * 1000 / len(batch)
    print(
        f"overhead (no-op scorer, ledger included): one at a time median {statistics.median(lat):.2f} ms, "
        f"p90 {lat[int(0.9 * len(lat))]:.2f} ms per evaluation; in a batch of {len(batch)}: {per:.2f} ms per "
        f"evaluation (target median <= 5 ms)"
    )
    session.release()  # the pools ended, Ray shut down
    journal, parts = ledger_write(tmp)
    print(
        f"ledger write per row: journal line {journal:.3f} ms | Parquet part per row (the old ledger) {parts:.2f} ms "
        f"| ratio {parts / journal:.0f}x"
    )


if __name__ == "__main__":
    main()
