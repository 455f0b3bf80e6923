"""Downstream evaluation of a compare's finalists: on the pool (what compare does) vs one by one.

  python bench/finalists.py [--finalists 4 --tasks arc_easy,piqa --limit 20 --actors 2]

SmolLM2-135M (fp32 on CPUs without native bf16), finalists = the dense model and random 4-block
removals, each unrepaired and Ghosted-repaired (C4 8 x 256), evaluated on WikiText-2 (2 x 512)
and the zero-shot tasks. In the same run:
  baseline: one by one in the driver (all cores), each finalist pruned, repaired and evaluated on
            its own (evaluate.evaluate_model, native engine): the path compare took before;
  pool:     compare.evaluate_finalists(broker=...) on --actors scorers (cores/actors threads each):
            one share per scorer, each share over one dense prefix cache (Broker.with_model).
Prints both wall times (the pool's start is timed separately), the ratio, and the largest
difference between the two runs' numbers.
"""

from __future__ import annotations

import argparse
import os
import random
import tempfile
import time
from pathlib import Path

import benchenv  # noqa: F401  (repository on sys.path, offline HF, ../shared/data)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--finalists", type=int, default=4, help="random removed sets (besides the dense model)")
    ap.add_argument("--tasks", default="arc_easy,piqa")
    ap.add_argument("--limit", type=int, default=20)
    ap.add_argument("--actors", type=int, default=2)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()

    import torch

    from ghostsearch.config import load_config
    from ghostsearch.evaluation.evaluate import evaluate_model
    from ghostsearch.model.models import load_model
    from ghostsearch.pool.session import PoolSession
    from ghostsearch.recovery.repair import repair
    from ghostsearch.study.compare import eval_key, evaluate_finalists, finalist_jobs

    cores = os.cpu_count() or 1
    threads = max(1, cores // args.actors)
    cfg = load_config(
        None,
        [
            "model=smollm2-135m",
            "device=cpu",
            "dtype=fp32",
            f"pool.actors={args.actors}",
            f"pool.threads={threads}",
            "pool.dashboard=false",
            "recovery.n_seq=8",
            "recovery.seq_len=256",
            "calibration.dataset=c4",
            f"eval.tasks=[{args.tasks}]",
            "eval.perplexity=[wikitext2]",
            "eval.ppl_max_seq=2",
            f"eval.limit={args.limit}",
            "compare.recovery=[none,ghosted]",
        ],
    )
    rng = random.Random(args.seed)
    jobs = finalist_jobs(cfg, [sorted(rng.sample(range(1, 29), 4)) for _ in range(args.finalists)])
    print(
        f"{len(jobs)} models (dense + {args.finalists} sets x [none, ghosted]) x ({args.tasks}, limit "
        f"{args.limit}) + WikiText-2; {cores} cores"
    )

    torch.set_num_threads(cores)
    model, tok = load_model(cfg.model, dtype=cfg.dtype, device="cpu")
    t0 = time.perf_counter()
    base = {}
    for removed, method in jobs:
        base[eval_key(removed, method, cfg)] = evaluate_model(repair(model, tok, removed, cfg, method), tok, cfg.eval)
    t_base = time.perf_counter() - t0
    del model
    with PoolSession(cfg, num_cpus=cores).connect() as session:  # released: the pool ended, Ray shut down
        t0 = time.perf_counter()
        broker = session.start()
        t_start = time.perf_counter() - t0
        with tempfile.TemporaryDirectory() as d:
            t0 = time.perf_counter()
            pool = evaluate_finalists(cfg, Path(d), jobs, progress=False, broker=broker)
            t_pool = time.perf_counter() - t0
    flat = {k: (base[k].to_dict(), pool[k].to_dict()) for k in base}
    diff = max(abs(b[m] - p[m]) for b, p in flat.values() for m in b if isinstance(b[m], float))
    print(f"baseline (one by one, {cores} threads): {t_base:7.1f} s  ({t_base / len(jobs):.1f} s per model)")
    print(
        f"pool ({args.actors} scorers x {threads} threads): {t_pool:7.1f} s  (+ {t_start:.1f} s pool start, "
        "paid once by compare for search and evaluation)"
    )
    print(f"ratio baseline / pool: {t_base / t_pool:.2f}x   max |difference| of the numbers: {diff:.2e}")


if __name__ == "__main__":
    main()
