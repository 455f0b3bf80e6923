"""`ghostsearch target` on SmolLM2: the certified k at a perplexity ratio and at mean_acc, with Ghosted
and without repair; items used against a fixed design of the same power; wall time.

  nice -n 19 python bench/target.py --out docs/results/bench-target [--cases ppl-ghosted,ppl-none,...]
  python bench/target.py --table docs/results/bench-target        # the table from OUT/bench.jsonl

Each case is one `ghostsearch target` run, one line appended to OUT/bench.jsonl when it ends and its
target block kept as OUT/<case>.json; a case already in bench.jsonl is skipped (--again reruns it).
The cases share one run directory, OUT/run: they differ only in target.*, eval.* and the repair, none
of which is in the run's fingerprint, so greedy's search (the same calibration, the same path) runs
once and the later cases replay it from the ledger; per-item values are kept per model
(RUN_DIR/target/values/<metric>/<eval_key>.json), so the dense model's windows (items) are computed
once for the two perplexity (accuracy) cases. A case's wall time is therefore that of a run which
found what the earlier cases left; each row says what it found (``search_replayed``,
``items_computed_now`` against ``items_used``). Resumable: rerun the command and every searched value
and evaluated item is read back.

"Items used": per model, the items the looks consumed (the dense model's count is that of the
largest k judged; each k's its own), summed over the dense model and every k judged. "Fixed design of
the same power": the one-look design that has the group-sequential design's power (0.8 at half the
target) needs n_max / IF items per model, IF the spending design's inflation factor
(``stats.repeated.inflation_factor``: simulation of the looks' joint normal, 200,000 paths); the fixed
design evaluates every judged model (and the dense one) on all of them: (ks judged + 1) x n_max / IF items.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

CASES = {
    # SmolLM2, greedy on LAMBADA (8 x 128), the repair on LAMBADA's calibration half (32 x 256)
    "ppl-ghosted": ["target.quality.metric=ppl_lambada", "target.quality.max_ratio=1.25", "target.recovery=ghosted"],
    "ppl-none": ["target.quality.metric=ppl_lambada", "target.quality.max_ratio=1.25", "target.recovery=none"],
    "acc-ghosted": [
        "target.quality.metric=mean_acc",
        "target.quality.max_ratio=null",  # target-quick's ratio is a perplexity's
        "target.quality.max_drop=0.02",
        "target.recovery=ghosted",
        "eval.tasks=[arc_easy,piqa,hellaswag]",
        "target.looks=[600,1200,2400]",
    ],
    "acc-none": [
        "target.quality.metric=mean_acc",
        "target.quality.max_ratio=null",  # target-quick's ratio is a perplexity's
        "target.quality.max_drop=0.02",
        "target.recovery=none",
        "eval.tasks=[arc_easy,piqa,hellaswag]",
        "target.looks=[600,1200,2400]",
    ],
}


def run_case(name: str, out: Path, config: Path) -> dict:
    from ghostsearch.config import load_config
    from ghostsearch.stats.repeated import inflation_factor
    from ghostsearch.study.target import target

    run = out / "run"
    replayed = (run / "result.json").exists()  # an earlier case's search is in the ledger
    cfg = load_config(str(config), [*CASES[name], f"out={run}"])
    t0 = time.monotonic()
    started = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    load0 = os.getloadavg()
    block = target(cfg, progress=False)
    wall = time.monotonic() - t0
    (out / f"{name}.json").write_text(json.dumps(block, indent=1) + "\n")
    judged = [v for v in block["ks"] if v["stop"] != "not tested"]
    used = max(v["items"] for v in judged) + sum(v["items"] for v in judged)
    IF = inflation_factor(block["looks"], 1 - block["level"], block["spending"])
    fixed = (len(judged) + 1) * block["looks"][-1] / IF
    return {
        "case": name,
        "certified_k": block["certified_k"],
        "removed": block["removed"],
        "estimate": block["estimate_shown"],
        "upper": block["upper_shown"],
        "first_failed_k": block["first_failed_k"],
        "ks": [(v["k"], v["stop"], v["items"]) for v in block["ks"]],
        "items_used": used,
        "fixed_items_same_power": round(fixed),
        "ratio": round(used / fixed, 3),
        "inflation": round(IF, 4),
        "items_computed_now": block["items_computed_now"],
        "wall_seconds": round(wall, 1),
        "search_replayed": replayed,
        "resumed": block["items_computed_now"] < used,
        "started": started,
        "when": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "load_start": [round(x, 2) for x in load0],
        "load_end": [round(x, 2) for x in os.getloadavg()],
    }


def table(out: Path) -> list[str]:
    rows = [json.loads(x) for x in (out / "bench.jsonl").read_text().splitlines() if x.strip()]
    lines = [
        "| case | certified k | estimate (upper) | first failed | ks: stop (items) | items used (computed now) "
        "| fixed, same power | ratio | wall s | load (1-min avg, start / end) |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        ks = ", ".join(f"{k}: {stop} ({n})" for k, stop, n in r["ks"] if stop != "not tested")
        found = " search replayed" if r.get("search_replayed") else ""
        load = f"{r['load_start'][0]} / {r['load_end'][0]}" if "load_start" in r else "-"
        lines.append(
            f"| {r['case']} | {r['certified_k']} {r['removed']} | {r['estimate']} ({r['upper']}) | "
            f"{r['first_failed_k']} | {ks} | {r['items_used']} ({r['items_computed_now']}) | "
            f"{r['fixed_items_same_power']} | {r['ratio']} | {r['wall_seconds']}{found} | {load} |"
        )
    return lines


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=ROOT / "docs" / "results" / "bench-target")
    ap.add_argument("--config", type=Path, default=ROOT / "configs" / "target-quick.yaml")
    ap.add_argument("--cases", default=",".join(CASES))
    ap.add_argument("--table", type=Path, default=None, help="print the table of OUT/bench.jsonl and exit")
    ap.add_argument("--again", action="store_true", help="rerun cases already in OUT/bench.jsonl")
    args = ap.parse_args()
    if args.table is not None:
        print("\n".join(table(args.table)))
        return
    from ghostsearch.core import interrupts
    from ghostsearch.core.logs import quiet_libraries, setup_logging

    setup_logging(0)  # target's own lines (what it fitted, measured, read back) on stderr, as the CLI has them
    quiet_libraries()
    interrupts.install()  # SIGTERM ends a case as Ctrl-C does: the lock released, a local Ray stopped, values kept
    args.out.mkdir(parents=True, exist_ok=True)
    bench = args.out / "bench.jsonl"
    done = {json.loads(x)["case"] for x in bench.read_text().splitlines() if x.strip()} if bench.exists() else set()
    for name in args.cases.split(","):
        if name in done and not args.again:
            print(f"{name}: in {bench} already (--again reruns it)", flush=True)
            continue
        print(f"{name}: start {time.strftime('%H:%M:%S UTC', time.gmtime())}, load {os.getloadavg()}", flush=True)
        row = run_case(name, args.out, args.config)
        with open(args.out / "bench.jsonl", "a") as f:
            f.write(json.dumps(row) + "\n")
        print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main()
