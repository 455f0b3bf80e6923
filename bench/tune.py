"""Does Ray Tune earn its place in compare? Its costs, measured against the plain-Ray path in one run.

  pip install "ray[tune]==2.60.0"   # not a ghostsearch dependency (docs/compare.md)
  python bench/tune.py [--cells 4 --tells 200]

The same grid of cells, each a loop of ``--tells`` tells that appends one ledger journal line and
keeps best-so-far (no model: only what Tune would add is measured), run
  (a) as compare runs cells now: one Ray task per cell (num_cpus=0), result JSON per cell;
  (b) as Tune trials: a function trainable per cell reporting best-so-far after every tell
      (tune.report), RunConfig(storage_path=...), FailureConfig(max_failures=1), 0.01 CPU per trial (Tune refuses 0).
Prints wall seconds of each, the ratio (b)/(a), Tune's fixed cost and its cost per report, Tune's extra files and
bytes beside the ledger,
and the import time of ray.tune over ray (fresh interpreters).
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

import ray


def cell_loop(run_dir: str, cell: str, tells: int, report=None) -> dict:
    import random

    rng, best = random.Random(cell), float("inf")
    journal = Path(run_dir) / "ledger" / f"journal-{cell}.jsonl"
    journal.parent.mkdir(parents=True, exist_ok=True)
    with open(journal, "a") as f:
        for i in range(tells):
            v = rng.random()
            f.write(json.dumps({"cell": cell, "i": i, "value": v}) + "\n")
            f.flush()
            best = min(best, v)
            if report is not None:
                report({"best_value": best, "budget_used": i + 1})
    return {"cell": cell, "value": best}


@ray.remote(num_cpus=0)
def cell_task(run_dir: str, cell: str, tells: int) -> dict:
    res = cell_loop(run_dir, cell, tells)
    (Path(run_dir) / "cells").mkdir(exist_ok=True)
    (Path(run_dir) / "cells" / f"{cell}.json").write_text(json.dumps(res))
    return res


def plain(run_dir: str, cells: list[str], tells: int) -> float:
    t0 = time.perf_counter()
    ray.get([cell_task.remote(run_dir, c, tells) for c in cells])
    return time.perf_counter() - t0


def tuned(run_dir: str, storage: str, cells: list[str], tells: int) -> float:
    from ray import tune

    def trainable(config):
        cell_loop(run_dir, config["cell"], tells, report=tune.report)

    t0 = time.perf_counter()
    tuner = tune.Tuner(
        tune.with_resources(trainable, {"cpu": 0.01}),  # 0 is refused: a trial needs a bundle
        param_space={"cell": tune.grid_search(cells)},
        tune_config=tune.TuneConfig(max_concurrent_trials=len(cells)),
        run_config=tune.RunConfig(
            name="cells", storage_path=storage, verbose=0, failure_config=tune.FailureConfig(max_failures=1)
        ),
    )
    results = tuner.fit()
    assert not results.errors, results.errors
    return time.perf_counter() - t0


def import_seconds(module: str) -> float:
    code = f"import time; t = time.perf_counter(); import {module}; print(time.perf_counter() - t)"
    return float(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout)


def tree_size(root: str) -> tuple[int, int]:
    files = [p for p in Path(root).rglob("*") if p.is_file()]
    return len(files), sum(p.stat().st_size for p in files)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--cells", type=int, default=4)
    ap.add_argument("--tells", type=int, default=200)
    args = ap.parse_args()
    cells = [f"cell{i}" for i in range(args.cells)]
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        with tempfile.TemporaryDirectory() as tmp:
            plain(f"{tmp}/warm", cells, 1)  # worker processes started for both
            a = plain(f"{tmp}/a", cells, args.tells)
            b = tuned(f"{tmp}/b", f"{tmp}/tune", cells, args.tells)
            b1 = tuned(f"{tmp}/b1", f"{tmp}/tune1", cells, 1)  # Tune's fixed cost: one report per trial
            n_files, n_bytes = tree_size(f"{tmp}/tune")
            ledger_bytes = tree_size(f"{tmp}/b/ledger")[1]
    finally:
        ray.shutdown()
    imp_ray, imp_tune = import_seconds("ray"), import_seconds("ray.tune")
    print(f"{args.cells} cells x {args.tells} tells")
    print(f"(a) plain Ray tasks : {a:7.2f} s")
    print(f"(b) Tune trials     : {b:7.2f} s   ratio (b)/(a) = {b / a:.1f}x")
    per_report = (b - b1) / (args.cells * (args.tells - 1)) * 1e3
    print(f"    of which fixed (1 tell per trial) {b1:.2f} s; per tune.report {per_report:.1f} ms")
    print(
        f"Tune's experiment dir: {n_files} files, {n_bytes / 1e6:.2f} MB (the ledger itself: "
        f"{ledger_bytes / 1e6:.2f} MB)"
    )
    print(f"import ray {imp_ray:.2f} s; import ray.tune {imp_tune:.2f} s (+{imp_tune - imp_ray:.2f} s)")


if __name__ == "__main__":
    main()
