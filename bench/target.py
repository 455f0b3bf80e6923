"""`ghostsearch target` on SmolLM2: the certified k at a perplexity ratio and at mean_acc, with Ghosted
and without repair; items used against a fixed design of the same power; wall time.

  nice -n 19 python bench/target.py --out docs/results/bench-target [--cases ppl-ghosted,ppl-none,...]
  python bench/target.py --table docs/results/bench-target        # the table from OUT/bench.jsonl

Each case is one `ghostsearch target` run (RUN_DIR under OUT/<case>, resumable: rerun the command and
every searched value and evaluated item is read back), one line appended to OUT/bench.jsonl when it ends.

"Items used": per model, the items the looks consumed (the dense model's count is that of the
largest k judged; each k's its own), summed over the dense model and every k judged. "Fixed design of
the same power": the one-look design that has the group-sequential design's power (0.8 at half the
target) needs n_max / IF items per model, IF the spending design's inflation factor (computed here by
simulation of the looks' joint normal, 200,000 paths); the fixed design evaluates every judged model
(and the dense one) on all of them: (ks judged + 1) x n_max / IF items.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

CASES = {
    # SmolLM2, greedy on LAMBADA (8 x 128), the repair on LAMBADA's calibration half (32 x 256)
    "ppl-ghosted": ["target.quality.metric=ppl_lambada", "target.quality.max_ratio=1.25", "target.recovery=ghosted"],
    "ppl-none": ["target.quality.metric=ppl_lambada", "target.quality.max_ratio=1.25", "target.recovery=none"],
    "acc-ghosted": [
        "target.quality.metric=mean_acc",
        "target.quality.max_drop=0.02",
        "target.recovery=ghosted",
        "eval.tasks=[arc_easy,piqa,hellaswag]",
        "target.looks=[600,1200,2400]",
    ],
    "acc-none": [
        "target.quality.metric=mean_acc",
        "target.quality.max_drop=0.02",
        "target.recovery=none",
        "eval.tasks=[arc_easy,piqa,hellaswag]",
        "target.looks=[600,1200,2400]",
    ],
}


def inflation(looks: list[int], alpha: float, spending: str, power: float = 0.8, paths: int = 200_000) -> float:
    """(theta_seq / theta_fix)^2: the drift the group-sequential one-sided test needs for ``power``
    over the one-look test's (z_{1-alpha} + z_power), by simulation (seeded) and bisection."""
    from ghostsearch.stats import inference as stats

    fr = np.array(looks, dtype=float) / looks[-1]
    c = np.array(stats.spending_bounds(list(fr), alpha, spending, sides=1))
    rng = np.random.default_rng(0)
    w = (rng.normal(size=(paths, len(fr))) * np.sqrt(np.diff(np.concatenate([[0.0], fr])))).cumsum(1)
    lo, hi = 0.0, 10.0
    for _ in range(50):
        mid = (lo + hi) / 2
        z = (w + mid * fr) / np.sqrt(fr)
        lo, hi = (mid, hi) if (z >= c).any(1).mean() < power else (lo, mid)
    fixed = stats.norm_ppf(1 - alpha) + stats.norm_ppf(power)
    return ((lo + hi) / 2 / fixed) ** 2


def run_case(name: str, out: Path, config: Path) -> dict:
    from ghostsearch.config import load_config
    from ghostsearch.study.target import target

    cfg = load_config(str(config), [*CASES[name], f"out={out / name}"])
    t0 = time.monotonic()
    block = target(cfg, progress=False)
    wall = time.monotonic() - t0
    judged = [v for v in block["ks"] if v["stop"] != "not tested"]
    used = max(v["items"] for v in judged) + sum(v["items"] for v in judged)
    IF = inflation(block["looks"], 1 - block["level"], block["spending"])
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
        "resumed": block["items_computed_now"] < used,
        "when": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
    }


def table(out: Path) -> list[str]:
    rows = [json.loads(x) for x in (out / "bench.jsonl").read_text().splitlines() if x.strip()]
    lines = [
        "| case | certified k | estimate (upper) | first failed | items used | fixed, same power | ratio | wall s |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['case']} | {r['certified_k']} {r['removed']} | {r['estimate']} ({r['upper']}) | "
            f"{r['first_failed_k']} | {r['items_used']} | {r['fixed_items_same_power']} | {r['ratio']} | "
            f"{r['wall_seconds']}{' (resumed)' if r['resumed'] else ''} |"
        )
    return lines


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=ROOT / "docs" / "results" / "bench-target")
    ap.add_argument("--config", type=Path, default=ROOT / "configs" / "target-quick.yaml")
    ap.add_argument("--cases", default=",".join(CASES))
    ap.add_argument("--table", type=Path, default=None, help="print the table of OUT/bench.jsonl and exit")
    args = ap.parse_args()
    if args.table is not None:
        print("\n".join(table(args.table)))
        return
    args.out.mkdir(parents=True, exist_ok=True)
    for name in args.cases.split(","):
        row = run_case(name, args.out, args.config)
        with open(args.out / "bench.jsonl", "a") as f:
            f.write(json.dumps(row) + "\n")
        print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main()
