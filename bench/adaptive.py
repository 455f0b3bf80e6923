"""Adaptive evaluation (eval.looks) against the fixed design, on SmolLM2 finalists, same draw, same run.

  python bench/adaptive.py --design three [--threads 2]      # the pre-registered design (below)
  python bench/adaptive.py --design eight                    # the first design (2026-12-01, targets missed)
  python bench/adaptive.py --pilot OUT --seed 5 --tasks arc_easy,piqa,hellaswag --pilot-items 300
  python bench/adaptive.py --replay docs/results/bench-adaptive --looks ... --spending ...

A design (``DESIGNS``) names its models, contrasts, tasks, looks, spending rule, margin and draw seed;
it is fixed in this file, and committed, before its run. Each run:
1. adaptive: compare.evaluate_finalists with eval.looks and the contrasts;
2. fixed: the same run directory copied and extended to the last look for every model (the
   per-item rows resume, so the fixed design costs only what adaptive did not evaluate); its
   verdicts on all items: differs by stats.paired_test + stats.holm at 0.05, within margin when the
   1 - 0.05 / m interval lies inside +-margin, else open.
Prints items per model and in all, the ratio adaptive / fixed, each contrast's verdict and look,
whether both designs reach the same verdicts, CPU seconds of each phase; writes OUT/bench.json.

Design ``eight`` (2026-12-01, from the 400-item pilot in docs/benchmarks.md): the eight commonsense
tasks; dense, dense without block ``DROP1`` (the block whose removal raises C4 perplexity least),
the middle 16 blocks {6..21} removed, the greedy-perplexity k = 8 set {4,5,13,...,18} unrepaired and
Ghosted (C4 8 x 256); contrasts dense - middle-16, dense - drop-1, Ghosted - none; looks 300 / 600 /
900 / 1,200, Pocock, margin 0.04, eval.seed 7. Its targets were missed: on the eight tasks SmolLM2's
dense accuracy is 0.404 against 0.354 chance, so nothing is large.

Design ``three`` (fixed 2026-12-01 19:42 UTC (commit 3a89250), before its data; the pilot: ``--pilot`` with eval.seed 5,
300 items per model on arc_easy, piqa, hellaswag, docs/results/bench-adaptive-3/pilot.json):
- Tasks arc_easy, piqa, hellaswag: the three where SmolLM2's dense model is well above chance
  (pilot: dense 0.547 macro accuracy against 0.417 chance).
- Models: dense; the greedy-perplexity k = 8 set {4,5,13,...,18} unrepaired; the same set repaired
  with LinearPatch (Hadamard, C4 8 x 256).
- Contrasts (Holm across the two, sequential): dense - greedy k8 (large: pruning's cost; pilot
  +0.080, paired variance 0.174, z 3.3 at 300 items; the seed-7 pilot's three tasks: +0.053);
  LinearPatch - none on the greedy set (near-null: pilot +0.003, paired variance 0.050).
  Not Ghosted - none, the issue's large contrast: it is not large on this model (pilot -0.023,
  z -1.1; the seed-7 pilot's three tasks -0.058): it is reported by ``--pilot`` only.
- Looks 600 / 1,200 / 2,400 items per model (the study's), Pocock spending (first bound 2.61 at
  alpha / 2), ``eval.margin`` 0.04 (Amendment 3 of study 2), a fresh draw: eval.seed 11.
- Expected from the pilot: the large contrast decided at look 1 (z about 4.7 at 600 items), the
  near-null one within +-0.04 at look 1 or 2 (half-width 2.61 * sqrt(0.05 / 600) = 0.024 at look 1),
  so 1,800-3,000 of the fixed design's 7,200 items (0.25-0.42).
"""

from __future__ import annotations

import argparse
import json
import shutil
import time
from pathlib import Path
from typing import Any

import benchenv  # noqa: F401  (repository on sys.path, offline HF, ../shared/data)

from ghostsearch.study.adaptive import correct_by_key, fixed_verdicts, pair_differences, replay

GREEDY, MIDDLE = [4, 5, 13, 14, 15, 16, 17, 18], list(range(6, 22))
DROP1 = 14  # oneshot k = 1 (C4 16 x 256, seed 0): C4 perplexity 36.58 dense -> 39.95 without it (+9.2%), 2026-12-01

# each design: models (name -> (removed, repair)), contrasts (name, left, right), eval.tasks (None: all
# eight), looks, spending, margin, eval.seed, and its output directory
DESIGNS: dict[str, dict[str, Any]] = {
    "eight": {
        "models": {
            "dense": ([], "none"),
            "drop-1": ([DROP1], "none"),
            "middle-16": (MIDDLE, "none"),
            "greedy": (GREEDY, "none"),
            "greedy+ghosted": (GREEDY, "ghosted"),
        },
        "contrasts": [
            ("dense - middle-16 (large)", "dense", "middle-16"),
            (f"dense - drop-1 {{{DROP1}}} (near-null)", "dense", "drop-1"),
            ("ghosted - none (greedy-ppl k8)", "greedy+ghosted", "greedy"),
        ],
        "tasks": None,
        "looks": [300, 600, 900, 1200],
        "spending": "pocock",
        "margin": 0.04,
        "seed": 7,
        "out": "docs/results/bench-adaptive",
    },
    "three": {
        "models": {"dense": ([], "none"), "greedy": (GREEDY, "none"), "greedy+linearpatch": (GREEDY, "linearpatch")},
        "contrasts": [
            ("dense - greedy k8 (large)", "dense", "greedy"),
            ("linearpatch - none, greedy k8 (near-null)", "greedy+linearpatch", "greedy"),
        ],
        "tasks": "arc_easy,piqa,hellaswag",
        "looks": [600, 1200, 2400],
        "spending": "pocock",
        "margin": 0.04,
        "seed": 11,
        "out": "docs/results/bench-adaptive-3",
    },
}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--design", choices=list(DESIGNS), default="three", help="the fixed design to run")
    ap.add_argument("--looks", default="300,600,900,1200", help="--replay: items per model at each look")
    ap.add_argument("--spending", default="pocock", choices=["pocock", "obrien-fleming"], help="--replay's rule")
    ap.add_argument("--margin", type=float, default=0.04, help="--replay: eval.margin (0: none)")
    ap.add_argument("--seed", type=int, default=5, help="--pilot: eval.seed, the draw")
    ap.add_argument("--tasks", default=None, help="--pilot: eval.tasks (default: the eight commonsense tasks)")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--out", default=None, help="the run's directory (default: the design's, under docs/results)")
    ap.add_argument(
        "--replay",
        metavar="OUT",
        help="no evaluation: replay the design (--looks, --spending, "
        "--margin) on the per-item rows of an earlier run's fixed design (OUT/fixed)",
    )
    ap.add_argument(
        "--pilot",
        metavar="OUT",
        help="no design: evaluate --pilot-models on --pilot-items items per "
        "model (a fixed draw, --seed, --tasks) and print every pair's paired mean difference and "
        "variance, to choose and size a design before fixing it",
    )
    ap.add_argument("--pilot-models", default="dense,greedy,greedy+ghosted,greedy+replaceme,greedy+linearpatch")
    ap.add_argument("--pilot-items", type=int, default=300)
    args = ap.parse_args()
    if args.pilot:
        pilot(Path(args.pilot), args.pilot_models.split(","), args.pilot_items, args.seed, args.tasks, args.threads)
        return
    if args.replay:
        replay(Path(args.replay), [int(x) for x in args.looks.split(",")], args.spending, args.margin or None)
        return

    import torch

    from ghostsearch.config import load_config
    from ghostsearch.core.logs import quiet_libraries
    from ghostsearch.stats.looks import Contrast
    from ghostsearch.study.compare import eval_key, evaluate_finalists

    quiet_libraries()
    torch.set_num_threads(args.threads)
    des = DESIGNS[args.design]
    looks, margin, spending, seed = des["looks"], des["margin"], des["spending"], des["seed"]
    over = [
        "model=smollm2-135m",
        "dtype=fp32",
        "device=cpu",
        "recovery.n_seq=8",
        "recovery.seq_len=256",
        "eval.perplexity=[]",
        "eval.batch_size=16",
        f"eval.max_items={looks[-1]}",
        f"eval.seed={seed}",
    ] + ([f"eval.tasks=[{des['tasks']}]"] if des["tasks"] else [])
    adaptive = load_config(
        None,
        over
        + [f"eval.looks=[{','.join(map(str, looks))}]", f"eval.spending={spending}"]
        + ([f"eval.margin={margin}"] if margin else []),
    )
    fixed = load_config(None, over)
    names, jobs = list(des["models"]), list(des["models"].values())
    k = {name: eval_key(r, m, adaptive) for name, (r, m) in zip(names, jobs)}
    contrasts = [Contrast(c, k[left], k[right]) for c, left, right in des["contrasts"]]
    out = Path(args.out or des["out"])
    a_dir, f_dir = out / "adaptive", out / "fixed"
    if (out / "bench.json").exists():
        raise SystemExit(
            f"{out} holds a finished run of this bench (bench.json): --replay {out} reads it; "
            f"give --out a new directory to run again"
        )
    foreign = (
        sorted(p.name for p in out.iterdir() if p.name not in ("adaptive", "fixed", "fixed.partial", "pilot.json"))
        if out.exists()
        else []
    )
    if foreign:
        raise SystemExit(f"{out} holds {foreign}, not this bench's output; give --out a new directory")
    resumed = (a_dir / "items.parquet").exists()  # an interrupted run resumes from its per-item rows
    a_dir.mkdir(parents=True, exist_ok=True)

    def on_look(j: int, n: int) -> None:
        print(f"look {j + 1}: {n} items per model evaluated and tested ({time.perf_counter() - t0:.0f} s)", flush=True)

    t0, c0 = time.perf_counter(), time.process_time()
    evaluate_finalists(adaptive, a_dir, jobs, progress=False, contrasts=contrasts, on_look=on_look)
    t_a, c_a = time.perf_counter() - t0, time.process_time() - c0
    res = json.loads((a_dir / "looks.json").read_text())
    if not f_dir.exists():
        shutil.rmtree(out / "fixed.partial", ignore_errors=True)  # this bench's own half-copy
        shutil.copytree(a_dir, out / "fixed.partial")
        (out / "fixed.partial").rename(f_dir)
    print(f"adaptive done ({t_a:.0f} s): {res['items_total']} items; the fixed design's further items next", flush=True)
    t0, c0 = time.perf_counter(), time.process_time()
    evaluate_finalists(fixed, f_dir, jobs, progress=False)  # every model to the last look (resumed rows)
    t_f, c_f = time.perf_counter() - t0, time.process_time() - c0
    verdicts = fixed_verdicts(correct_by_key(f_dir / "eval_items.parquet"), contrasts, margin)
    fixed_total = looks[-1] * len(jobs)
    print(
        f"design {args.design}: looks {looks} items per model, {len(jobs)} models, {spending} spending, "
        f"margin {margin}, Holm over {len(contrasts)} contrasts, eval.seed {seed}, tasks {des['tasks'] or 'all'}"
    )
    print(
        f"adaptive: {res['items_total']} items in all (looks run: {res['looks_run']}); fixed: {fixed_total}; "
        f"ratio adaptive / fixed = {res['items_total'] / fixed_total:.2f}"
    )
    print(f"items per model (adaptive): {[res['items_per_model'][k[n]] for n in k]} for {list(k)}")
    same, out_rows = True, []
    for c, row, (fv, t, p) in zip(contrasts, res["contrasts"], verdicts):
        av = row["verdict"]
        agree = av == fv and (av != "differs" or row["sign"] == (1 if t.estimate > 0 else -1))
        same &= agree
        print(
            f"  {c.name:36s} adaptive: {av} at look {row['decided_at_look']} (estimate {row['estimate']:+.3f}, "
            f"z {row['z']:.2f}); fixed: {fv}, estimate {t.estimate:+.3f}, z {t.z:.2f}, Holm p {p:.3g}"
        )
        out_rows.append(
            {
                "contrast": c.name,
                "adaptive": av,
                "look": row["decided_at_look"],
                "adaptive_estimate": row["estimate"],
                "fixed": fv,
                "fixed_estimate": t.estimate,
                "fixed_z": t.z,
                "fixed_holm_p": float(p),
                "same": agree,
            }
        )
    print(f"same verdicts: {same}")
    print(
        f"seconds: adaptive {t_a:.0f} wall / {c_a:.0f} CPU (ghosted fit and model load included); the fixed design's "
        f"further items {t_f:.0f} wall / {c_f:.0f} CPU (fixed = both)"
    )
    (out / "bench.json").write_text(
        json.dumps(
            {
                "design": args.design,
                "tasks": des["tasks"],
                "looks": looks,
                "spending": spending,
                "margin": margin,
                "seed": seed,
                "drop1": DROP1,
                "keys": k,
                "resumed": resumed,
                "items_adaptive": res["items_total"],
                "items_fixed": fixed_total,
                "ratio": res["items_total"] / fixed_total,
                "items_per_model": {n: res["items_per_model"][k[n]] for n in k},
                "contrasts": out_rows,
                "same_verdicts": same,
                "seconds": {"adaptive_wall": t_a, "adaptive_cpu": c_a, "fixed_extra_wall": t_f, "fixed_extra_cpu": c_f},
            },
            indent=1,
        )
    )


PILOT_MODELS = {
    "dense": ([], "none"),
    "drop-1": ([DROP1], "none"),
    "middle-16": (MIDDLE, "none"),
    "greedy": (GREEDY, "none"),
    "greedy+ghosted": (GREEDY, "ghosted"),
    "greedy+replaceme": (GREEDY, "replaceme"),
    "greedy+linearpatch": (GREEDY, "linearpatch"),
}


def pilot(out: Path, names: list[str], n: int, seed: int, tasks: str | None, threads: int) -> list[dict]:
    """A pilot: the named models on n items each (one seeded draw, the same for all), then every pair's
    paired difference (mean, per-item variance, z). Its draw must differ from the design's (another
    --seed): the design is then chosen on data it is not tested on."""
    import numpy as np
    import torch

    from ghostsearch.config import load_config
    from ghostsearch.core.logs import quiet_libraries
    from ghostsearch.study.compare import eval_key, evaluate_finalists

    quiet_libraries()
    torch.set_num_threads(threads)
    unknown = [m for m in names if m not in PILOT_MODELS]
    if unknown:
        raise SystemExit(f"--pilot-models: unknown {unknown}; choose from {list(PILOT_MODELS)}")
    cfg = load_config(
        None,
        [
            "model=smollm2-135m",
            "dtype=fp32",
            "device=cpu",
            "recovery.n_seq=8",
            "recovery.seq_len=256",
            "eval.perplexity=[]",
            "eval.batch_size=16",
            f"eval.max_items={n}",
            f"eval.seed={seed}",
        ]
        + ([f"eval.tasks=[{tasks}]"] if tasks else []),
    )
    out.mkdir(parents=True, exist_ok=True)
    jobs = [PILOT_MODELS[m] for m in names]
    t0 = time.perf_counter()
    evaluate_finalists(cfg, out, jobs, progress=False)
    keys = {m: eval_key(*PILOT_MODELS[m], cfg) for m in names}
    corr = correct_by_key(out / "eval_items.parquet")
    items = sorted(corr[keys[names[0]]])
    print(
        f"pilot: {len(items)} items per model (eval.seed {seed}, tasks {tasks or 'all eight'}), "
        f"{time.perf_counter() - t0:.0f} s"
    )
    for m in names:
        print(f"  {m:20s} accuracy {np.mean([corr[keys[m]][i] for i in items]):.3f}")
    rows = pair_differences(corr, keys, names, items)
    for r in rows:
        a, b = r["left"], r["right"]
        print(f"  {a:20s} - {b:20s} mean {r['mean']:+.3f}  paired variance {r['var']:.3f}  z {r['z']:+.2f}")
    (out / "pilot.json").write_text(
        json.dumps({"seed": seed, "tasks": tasks, "items": len(items), "keys": keys, "pairs": rows}, indent=1)
    )
    return rows


if __name__ == "__main__":
    main()
