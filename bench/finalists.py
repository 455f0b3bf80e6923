"""Downstream evaluation of a compare's finalists: Ray tasks spread over the machine vs one by one.

  python bench/finalists.py [--finalists 4 --tasks arc_easy,piqa --limit 20 --workers 2]

SmolLM2-135M (fp32 on CPUs without native bf16), finalists = random 4-block removals, each
repaired with Ghosted Layers (C4, 8 x 256) and evaluated on WikiText-2 (2 x 512) and the zero-shot
tasks (lm-eval). In the same run:
  baseline:    evaluate_finalists(distributed=False): one process, torch threads = all cores;
  distributed: evaluate_finalists(distributed=True): --workers Ray tasks with cores/workers threads each.
Prints both wall times, the ratio baseline / distributed, and the largest difference between the two
runs' numbers (they evaluate the same models).
"""
from __future__ import annotations

import argparse
import os
import random
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
_shared = Path(__file__).resolve().parents[2] / "shared" / "data"
if _shared.is_dir():
    os.environ.setdefault("GHOSTSEARCH_DATA_DIR", str(_shared))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--finalists", type=int, default=4)
    ap.add_argument("--tasks", default="arc_easy,piqa")
    ap.add_argument("--limit", type=int, default=20)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()

    import ray
    import torch

    from ghostsearch.compare import evaluate_finalists
    from ghostsearch.config import load_config
    from ghostsearch.pool.pool import connect

    cores = os.cpu_count() or 1
    threads = max(1, cores // args.workers)
    cfg = load_config(None, ["model=smollm2-135m", "device=cpu", f"pool.actors={args.workers}",
                             f"pool.threads={threads}", "recovery.method=ghosted", "recovery.n_seq=8",
                             "recovery.seq_len=256", f"eval.tasks=[{args.tasks}]", "eval.perplexity=[wikitext2]",
                             "eval.ppl_max_seq=2", f"eval.limit={args.limit}", "search.protected=[0,-1]"])
    rng = random.Random(args.seed)
    results = [{"cell": f"f{i}", "removed": sorted(rng.sample(range(1, 29), 4))} for i in range(args.finalists)]
    print(f"{args.finalists} finalists x ({args.tasks}, limit {args.limit}) + WikiText-2; {cores} cores")

    torch.set_num_threads(cores)
    with tempfile.TemporaryDirectory() as d:
        t0 = time.perf_counter()
        base = evaluate_finalists(cfg, Path(d), results, progress=False, distributed=False)
        t_base = time.perf_counter() - t0
    connect(None, dashboard=False, num_cpus=cores)
    try:
        with tempfile.TemporaryDirectory() as d:
            t0 = time.perf_counter()
            dist = evaluate_finalists(cfg, Path(d), results, progress=False, distributed=True)
            t_dist = time.perf_counter() - t0
    finally:
        ray.shutdown()
    diff = max(abs(base[k][m] - dist[k][m]) for k in base for m in base[k] if isinstance(base[k][m], float))
    print(f"baseline (one process, {cores} threads): {t_base:7.1f} s  ({t_base / len(base):.1f} s per finalist)")
    print(f"distributed ({args.workers} tasks x {threads} threads): {t_dist:7.1f} s  (incl. worker start, model load)")
    print(f"ratio baseline / distributed: {t_base / t_dist:.2f}x   max |difference| of the numbers: {diff:.2e}")


if __name__ == "__main__":
    main()
