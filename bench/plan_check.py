"""`ghostsearch plan --measure` against the runs it plans, measured in one run (issue 25): the quick
search (configs/smollm2-quick.yaml) and compare-quick (configs/compare-quick.yaml).

  python bench/plan_check.py [--out runs/plan-check] [--only search|compare]

For each config, in this order and in this one process: plan_run(cfg, measure=True) (the rate and
the weight-reading rate measured here, now), then the command itself as a user runs it (a
subprocess, timed as a whole: Ray start, model loads, data, prepare, scoring; for compare also the
repairs, finalist evaluation and the report), then the next config. Prints planned and measured
seconds and their ratio (the target: within +-30%), the planned and measured evaluations, and the
run's own cell seconds (result.json) beside the plan's scoring seconds.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import benchenv  # noqa: F401  (repository on sys.path, offline HF, ../shared/data)

CONFIGS = {"search": "configs/smollm2-quick.yaml", "compare": "configs/compare-quick.yaml"}


def check(command: str, out: Path, env: dict | None = None) -> dict:
    """plan_run(measure=True) for CONFIGS[command], then the command itself in a subprocess (timed
    as a whole) into ``out``: planned and measured seconds, evaluations, the plan, plan's own time."""
    from ghostsearch.config import load_config
    from ghostsearch.rundir.layout import result_cells
    from ghostsearch.study.plan import plan_run

    path = CONFIGS[command]
    env = dict(os.environ if env is None else env)
    if out.exists():
        shutil.rmtree(out)  # this bench's own output, from an earlier run of it
    over = [f"out={out}"] + ([f"data_dir={env['GHOSTSEARCH_DATA_DIR']}"] if "GHOSTSEARCH_DATA_DIR" in env else [])
    cfg = load_config(path, over)
    t0 = time.perf_counter()
    p = plan_run(cfg, measure=True, command=command)
    t_plan = time.perf_counter() - t0
    planned = p.search_wall_s if command == "search" else p.compare_wall_s
    t0 = time.perf_counter()
    r = subprocess.run(
        [sys.executable, "-m", "ghostsearch", command, path, *over], capture_output=True, text=True, env=env
    )
    measured = time.perf_counter() - t0
    if r.returncode != 0:
        print(r.stdout[-2000:], r.stderr[-3000:])
        raise SystemExit(f"{command} failed (exit {r.returncode})")
    cells = result_cells(json.loads((out / "result.json").read_text()))
    used = sum(c.get("budget_used", c.get("evaluations", 0)) for c in cells.values())
    cell_s = sum(c.get("wall_seconds", 0.0) for c in cells.values())
    return {
        "command": command,
        "path": path,
        "planned": planned,
        "measured": measured,
        "plan": p,
        "plan_seconds": t_plan,
        "evaluations": used,
        "cell_seconds": cell_s,
        "load": os.getloadavg()[0],
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="runs/plan-check")
    ap.add_argument("--only", choices=sorted(CONFIGS))
    args = ap.parse_args()

    from ghostsearch.core.logs import quiet_libraries

    quiet_libraries()
    rows = []
    for command in CONFIGS:
        if args.only and command != args.only:
            continue
        c = check(command, Path(args.out) / command)
        p, planned, measured = c["plan"], c["planned"], c["measured"]
        rows.append(
            (
                command,
                planned,
                measured,
                p.evaluations,
                c["evaluations"],
                p.scoring_s + p.prepare_s,
                c["cell_seconds"],
            )
        )
        print(
            f"{command} ({c['path']}): planned {planned:.0f} s = prepare {p.prepare_s:.0f} + scoring "
            f"{p.scoring_s:.0f} + "
            + " + ".join(f"{n} {v.seconds:.0f}" for n, v in p.fixed.items() if command == "compare" or n != "report")
            + (f" + evaluation {p.evaluation_s:.0f}" if command == "compare" else "")
            + f"; rate {p.rate / 1e12:.4f} TFLOP/s per actor, plan --measure took {c['plan_seconds']:.0f} s; "
            f"measured {measured:.0f} s; ratio planned / measured {planned / measured:.2f}; load "
            f"{c['load']:.1f}",
            flush=True,
        )
        if command == "compare":
            print(f"  evaluation: {p.evaluation_note}", flush=True)
    print()
    print(
        "| run | planned s | measured s | ratio | evaluations planned | measured | prepare+scoring planned s | "
        "cells' own s |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for command, planned, measured, ev_p, ev_m, sc_p, sc_m in rows:
        print(
            f"| {command} | {planned:.0f} | {measured:.0f} | {planned / measured:.2f} | {ev_p:.0f} | {ev_m:.0f} | "
            f"{sc_p:.0f} | {sc_m:.0f} |"
        )


if __name__ == "__main__":
    main()
