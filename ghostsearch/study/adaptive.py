"""Adaptive evaluation (``stats.looks``) against the fixed design, on SmolLM2 finalists, same draw,
same run: the pre-registered designs (:data:`DESIGNS`), running one (:func:`run_design`: adaptive,
then the fixed design's further items on a copy of the run directory), deciding from per-item rows
(the fixed design's verdicts on every item: :func:`fixed_verdicts`; whether both designs agree:
:func:`agreement`), a design replayed exactly on a fixed run's rows (:func:`replay`: every look is
a prefix of the run's draw, so it is the adaptive run without the forward passes), and a pilot's
paired differences (:func:`pilot`, :func:`pair_differences`). bench/adaptive.py is the command line.

A design names its models, contrasts, tasks, looks, spending rule, margin and draw seed; it is
fixed here, and committed, before its run.

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

import itertools
import json
import shutil
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow.parquet as pq

from ghostsearch.core.eval_numbers import read_item_rows
from ghostsearch.stats import inference as stats
from ghostsearch.stats.looks import Contrast, Design

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

PILOT_MODELS = {
    "dense": ([], "none"),
    "drop-1": ([DROP1], "none"),
    "middle-16": (MIDDLE, "none"),
    "greedy": (GREEDY, "none"),
    "greedy+ghosted": (GREEDY, "ghosted"),
    "greedy+replaceme": (GREEDY, "replaceme"),
    "greedy+linearpatch": (GREEDY, "linearpatch"),
}

# this bench's own entries in a run's directory (anything else there: not its output)
OWN = ("adaptive", "fixed", "fixed.partial", "pilot.json")


def settings(n: int, seed: int, tasks: str | None) -> list[str]:
    """The overrides every run of these designs and pilots evaluates under: SmolLM2, fp32 on CPU,
    repairs fitted on C4 8 x 256, accuracy only, n items per model of the draw ``seed``."""
    return [
        "model=smollm2-135m",
        "dtype=fp32",
        "device=cpu",
        "recovery.n_seq=8",
        "recovery.seq_len=256",
        "eval.perplexity=[]",
        "eval.batch_size=16",
        f"eval.max_items={n}",
        f"eval.seed={seed}",
    ] + ([f"eval.tasks=[{tasks}]"] if tasks else [])


def design_settings(des: dict[str, Any]) -> tuple[list[str], list[str]]:
    """(adaptive, fixed) overrides of a design: the same draw, the adaptive one with its looks,
    spending rule and margin, the fixed one to the last look for every model."""
    looks, margin = des["looks"], des["margin"]
    over = settings(looks[-1], des["seed"], des["tasks"])
    adaptive = (
        over
        + [f"eval.looks=[{','.join(map(str, looks))}]", f"eval.spending={des['spending']}"]
        + ([f"eval.margin={margin}"] if margin else [])
    )
    return adaptive, over


def check_out(out: Path) -> None:
    """Refuse a directory that holds a finished run (bench.json) or something not this bench's."""
    if (out / "bench.json").exists():
        raise SystemExit(
            f"{out} holds a finished run of this bench (bench.json): --replay {out} reads it; "
            f"give --out a new directory to run again"
        )
    foreign = sorted(p.name for p in out.iterdir() if p.name not in OWN) if out.exists() else []
    if foreign:
        raise SystemExit(f"{out} holds {foreign}, not this bench's output; give --out a new directory")


def correct_by_key(path: Path) -> dict[str, dict]:
    """{eval key: {item: 1.0 or 0.0}} of an eval_items.parquet file."""
    corr: dict[str, dict] = {}
    for r in read_item_rows(path):
        corr.setdefault(str(r.key), {})[r.item] = float(r.correct)
    return corr


def fixed_verdicts(corr: dict[str, dict], contrasts: list[Contrast], margin: float | None):
    """The fixed design's verdict of each contrast on every item the models share: (verdict, the
    paired test, its Holm-adjusted p); "differs" when the Holm p is at most 0.05, "within margin"
    when the 1 - 0.05 / m interval lies inside +-margin, else "open"."""
    items = sorted(next(iter(corr.values())))
    tests = [
        stats.paired_test(
            [corr[c.left_key][i] for i in items], [corr[c.right_key][i] for i in items], [t for t, _ in items]
        )
        for c in contrasts
    ]
    adj = stats.holm([t.p for t in tests])
    zc = stats.z_of_level(1 - stats.ALPHA / len(contrasts))
    out = []
    for t, p in zip(tests, adj):
        fv = (
            "differs"
            if p <= stats.ALPHA
            else "within margin"
            if margin and abs(t.estimate) + zc * t.se < margin
            else "open"
        )
        out.append((fv, t, p))
    return out


def agreement(contrasts: list[Contrast], looked: list[dict], verdicts) -> tuple[list[dict], bool]:
    """Each contrast's adaptive verdict (``looked``: looks.json's contrasts) beside the fixed design's
    (:func:`fixed_verdicts`), and whether they agree: the same verdict and, for "differs", the same
    sign. Returns bench.json's rows and whether every contrast agrees."""
    same, rows = True, []
    for c, row, (fv, t, p) in zip(contrasts, looked, verdicts):
        av = row["verdict"]
        agree = av == fv and (av != "differs" or row["sign"] == (1 if t.estimate > 0 else -1))
        same &= agree
        rows.append(
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
    return rows, same


def run_design(name: str, out: Path, say: Callable[[str], None] = print) -> dict:
    """Run design ``name`` into ``out`` (resuming from its per-item rows): adaptive, then the fixed
    design's further items on a copy of the adaptive run's directory (the rows resume, so it costs
    only what adaptive did not evaluate); writes and returns OUT/bench.json's record."""
    from ghostsearch.config import load_config
    from ghostsearch.study.compare import eval_key, evaluate_finalists

    des = DESIGNS[name]
    looks, margin, spending, seed = des["looks"], des["margin"], des["spending"], des["seed"]
    over_a, over_f = design_settings(des)
    adaptive, fixed = load_config(None, over_a), load_config(None, over_f)
    names, jobs = list(des["models"]), list(des["models"].values())
    k = {n: eval_key(r, m, adaptive) for n, (r, m) in zip(names, jobs)}
    contrasts = [Contrast(c, k[left], k[right]) for c, left, right in des["contrasts"]]
    a_dir, f_dir = out / "adaptive", out / "fixed"
    check_out(out)
    resumed = (a_dir / "items.parquet").exists()  # an interrupted run resumes from its per-item rows
    a_dir.mkdir(parents=True, exist_ok=True)

    def on_look(j: int, n: int) -> None:
        say(f"look {j + 1}: {n} items per model evaluated and tested ({time.perf_counter() - t0:.0f} s)")

    t0, c0 = time.perf_counter(), time.process_time()
    evaluate_finalists(adaptive, a_dir, jobs, progress=False, contrasts=contrasts, on_look=on_look)
    t_a, c_a = time.perf_counter() - t0, time.process_time() - c0
    res = json.loads((a_dir / "looks.json").read_text())
    if not f_dir.exists():
        shutil.rmtree(out / "fixed.partial", ignore_errors=True)  # this bench's own half-copy
        shutil.copytree(a_dir, out / "fixed.partial")
        (out / "fixed.partial").rename(f_dir)
    say(f"adaptive done ({t_a:.0f} s): {res['items_total']} items; the fixed design's further items next")
    t0, c0 = time.perf_counter(), time.process_time()
    evaluate_finalists(fixed, f_dir, jobs, progress=False)  # every model to the last look (resumed rows)
    t_f, c_f = time.perf_counter() - t0, time.process_time() - c0
    verdicts = fixed_verdicts(correct_by_key(f_dir / "eval_items.parquet"), contrasts, margin)
    fixed_total = looks[-1] * len(jobs)
    say(
        f"design {name}: looks {looks} items per model, {len(jobs)} models, {spending} spending, "
        f"margin {margin}, Holm over {len(contrasts)} contrasts, eval.seed {seed}, tasks {des['tasks'] or 'all'}"
    )
    say(
        f"adaptive: {res['items_total']} items in all (looks run: {res['looks_run']}); fixed: {fixed_total}; "
        f"ratio adaptive / fixed = {res['items_total'] / fixed_total:.2f}"
    )
    say(f"items per model (adaptive): {[res['items_per_model'][k[n]] for n in k]} for {list(k)}")
    out_rows, same = agreement(contrasts, res["contrasts"], verdicts)
    for c, row, (fv, t, p) in zip(contrasts, res["contrasts"], verdicts):
        say(
            f"  {c.name:36s} adaptive: {row['verdict']} at look {row['decided_at_look']} (estimate "
            f"{row['estimate']:+.3f}, z {row['z']:.2f}); fixed: {fv}, estimate {t.estimate:+.3f}, z {t.z:.2f}, "
            f"Holm p {p:.3g}"
        )
    say(f"same verdicts: {same}")
    say(
        f"seconds: adaptive {t_a:.0f} wall / {c_a:.0f} CPU (ghosted fit and model load included); the fixed design's "
        f"further items {t_f:.0f} wall / {c_f:.0f} CPU (fixed = both)"
    )
    record = {
        "design": name,
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
    }
    (out / "bench.json").write_text(json.dumps(record, indent=1))
    return record


def pilot(out: Path, names: list[str], n: int, seed: int, tasks: str | None, say=print) -> list[dict]:
    """A pilot: the named models (:data:`PILOT_MODELS`) on n items each (one seeded draw, the same for
    all), then every pair's paired difference (mean, per-item variance, z); writes OUT/pilot.json. Its
    draw must differ from the design's (another seed): the design is then chosen on data it is not
    tested on."""
    from ghostsearch.config import load_config
    from ghostsearch.study.compare import eval_key, evaluate_finalists

    unknown = [m for m in names if m not in PILOT_MODELS]
    if unknown:
        raise SystemExit(f"--pilot-models: unknown {unknown}; choose from {list(PILOT_MODELS)}")
    cfg = load_config(None, settings(n, seed, tasks))
    out.mkdir(parents=True, exist_ok=True)
    jobs = [PILOT_MODELS[m] for m in names]
    t0 = time.perf_counter()
    evaluate_finalists(cfg, out, jobs, progress=False)
    keys = {m: eval_key(*PILOT_MODELS[m], cfg) for m in names}
    corr = correct_by_key(out / "eval_items.parquet")
    items = sorted(corr[keys[names[0]]])
    say(
        f"pilot: {len(items)} items per model (eval.seed {seed}, tasks {tasks or 'all eight'}), "
        f"{time.perf_counter() - t0:.0f} s"
    )
    for m in names:
        say(f"  {m:20s} accuracy {np.mean([corr[keys[m]][i] for i in items]):.3f}")
    rows = pair_differences(corr, keys, names, items)
    for r in rows:
        a, b = r["left"], r["right"]
        say(f"  {a:20s} - {b:20s} mean {r['mean']:+.3f}  paired variance {r['var']:.3f}  z {r['z']:+.2f}")
    (out / "pilot.json").write_text(
        json.dumps({"seed": seed, "tasks": tasks, "items": len(items), "keys": keys, "pairs": rows}, indent=1)
    )
    return rows


def pair_differences(corr: dict[str, dict], keys: dict[str, str], names: list[str], items) -> list[dict]:
    """Every pair of named models' paired difference on ``items``: mean, per-item variance, z."""
    rows = []
    for a, b in itertools.combinations(names, 2):
        d = np.array([corr[keys[a]][i] - corr[keys[b]][i] for i in items])
        z = d.mean() / np.sqrt(d.var(ddof=1) / len(d)) if d.var() > 0 else float("nan")
        rows.append({"left": a, "right": b, "mean": float(d.mean()), "var": float(d.var(ddof=1)), "z": float(z)})
    return rows


def replay(out: Path, looks: list[int], spending: str, margin: float | None) -> dict:
    """What an adaptive run with this design would have evaluated and decided, replayed exactly on
    the fixed design's per-item rows: a model's predictions do not depend on which other items are
    evaluated, and every look is a prefix of the run's draw, so the replay is the run without the
    forward passes (its items are OUT/fixed/items.parquet's order). Prints and returns the summary."""

    info = json.loads((out / "bench.json").read_text())
    order = [
        (r["task"], r["doc"])
        for r in sorted(pq.read_table(out / "fixed" / "items.parquet").to_pylist(), key=lambda r: r["rank"])
    ]
    looked = json.loads((out / "adaptive" / "looks.json").read_text())
    names = {v: n for n, v in info.get("keys", {}).items()}
    correct = correct_by_key(out / "fixed" / "eval_items.parquet")
    n_max = min(len(v) for v in correct.values())
    if looks[-1] > n_max:
        raise SystemExit(f"--looks ends at {looks[-1]} items but the fixed design has {n_max} per model")
    contrasts = [Contrast(c["contrast"], c["left_key"], c["right_key"]) for c in looked["contrasts"]]
    d = Design(looks, contrasts, spending=spending, margin=margin)
    used = {k: 0 for k in correct}
    for j, n in enumerate(looks):
        for k in correct if j == 0 else d.open_keys():
            used[k] = n
        d.test(j, correct, order[:n])
        if d.finished():
            break
    rows = [r.to_dict() for r in d.table(used, j + 1)]
    total, fixed = sum(used.values()), looks[-1] * len(correct)
    print(
        f"replay of {out}/fixed: looks {looks}, {spending}, margin {margin}: {total} items of the fixed "
        f"design's {fixed} (ratio {total / fixed:.2f}); items per model "
        f"{ {names.get(k, k[:6]): v for k, v in used.items()} }"
    )
    by_name = {c["contrast"]: c for c in info["contrasts"]}
    same = True
    for r in rows:
        f = by_name.get(r["contrast"], {})
        agree = r["verdict"] == f.get("fixed") if looks[-1] == info["looks"][-1] else None
        same = same and bool(agree) if agree is not None else same
        print(
            f"  {r['contrast']:36s} {r['verdict']} at look {r['decided_at_look']} (estimate {r['estimate']:+.3f}, "
            f"z {r['z']:.2f}); fixed design: {f.get('fixed')}"
        )
    return {
        "looks": looks,
        "spending": spending,
        "margin": margin,
        "items": total,
        "fixed": fixed,
        "ratio": total / fixed,
        "contrasts": rows,
        "same_verdicts": same,
    }
