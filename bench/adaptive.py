"""Adaptive evaluation (eval.looks) against the fixed design, on SmolLM2 finalists, same draw, same run.

  python bench/adaptive.py [--looks 300,600,900,1200 --spending pocock --margin 0.04 --seed 7 --threads 2]

The design, fixed before this run's data (2026-12-01, from the 400-item pilot of the same models in
docs/benchmarks.md: paired per-item variance about 0.24 for dense - middle-16, Ghosted - none
-0.045 at z -1.95):
- Models: dense; dense without block ``DROP1`` (the one block whose removal raises C4 perplexity
  least: oneshot, perplexity objective, C4 16 x 256, seed 0; a model next to dense); the middle 16
  blocks {6..21} removed (far from dense); the study's greedy-perplexity k = 8 set
  {4,5,13,14,15,16,17,18} unrepaired and Ghosted (C4 8 x 256).
- Contrasts (Holm across the three, sequential): dense - middle-16 (large); dense - drop-1
  (near-null); Ghosted - none on the greedy-perplexity k = 8 set (the issue's; -0.045 in the pilot).
- Looks 300 / 600 / 900 / 1,200 items per model, Pocock spending, ``eval.margin`` 0.04 (the fixed
  design's minimum detectable difference: 80% power at alpha / 3 with 1,200 items and paired
  variance 0.163 is 0.038), a fresh draw (``eval.seed`` 7, not the pilot's 0).
1. adaptive: compare.evaluate_finalists with eval.looks;
2. fixed: the same run directory copied and extended to the last look for every model (the
   per-item rows resume, so the fixed design costs only what adaptive did not evaluate); its
   verdicts on all items: differs by stats.paired_test + stats.holm at 0.05, within margin when the
   1 - 0.05 / 3 interval lies inside +-margin, else open.
Prints items per model and in all, the ratio adaptive / fixed, each contrast's verdict and look,
whether both designs reach the same verdicts, CPU seconds of each phase; writes OUT/bench.json.
"""
from __future__ import annotations

import argparse
import json
import shutil
import time
from pathlib import Path

import benchenv  # noqa: F401  (repository on sys.path, offline HF, ../shared/data)

GREEDY, MIDDLE = [4, 5, 13, 14, 15, 16, 17, 18], list(range(6, 22))
DROP1 = 14  # oneshot k = 1 (C4 16 x 256, seed 0): C4 perplexity 36.58 dense -> 39.95 without it (+9.2%), 2026-12-01


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--looks", default="300,600,900,1200", help="items per model at each look")
    ap.add_argument("--spending", default="pocock", choices=["pocock", "obrien-fleming"])
    ap.add_argument("--margin", type=float, default=0.04, help="eval.margin (0: none)")
    ap.add_argument("--seed", type=int, default=7, help="eval.seed: the draw")
    ap.add_argument("--tasks", default=None, help="eval.tasks (default: the eight commonsense tasks)")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--out", default="runs/bench-adaptive")
    ap.add_argument("--replay", metavar="OUT", help="no evaluation: replay the design (--looks, --spending, "
                    "--margin) on the per-item rows of an earlier run's fixed design (OUT/fixed)")
    args = ap.parse_args()
    if args.replay:
        replay(Path(args.replay), [int(x) for x in args.looks.split(",")], args.spending, args.margin or None)
        return

    import torch

    from ghostsearch import stats
    from ghostsearch.compare import eval_key, evaluate_finalists
    from ghostsearch.config import load_config
    from ghostsearch.logs import quiet_libraries
    from ghostsearch.looks import Contrast

    quiet_libraries()
    torch.set_num_threads(args.threads)
    looks = [int(x) for x in args.looks.split(",")]
    margin = args.margin or None
    over = ["model=smollm2-135m", "dtype=fp32", "device=cpu", "recovery.n_seq=8", "recovery.seq_len=256",
            "eval.perplexity=[]", "eval.batch_size=16", f"eval.max_items={looks[-1]}", f"eval.seed={args.seed}"] \
        + ([f"eval.tasks=[{args.tasks}]"] if args.tasks else [])
    adaptive = load_config(None, over + [f"eval.looks=[{args.looks}]", f"eval.spending={args.spending}"]
                           + ([f"eval.margin={margin}"] if margin else []))
    fixed = load_config(None, over)
    names = ("dense", "drop-1", "middle-16", "greedy", "greedy+ghosted")
    jobs = [([], "none"), ([DROP1], "none"), (MIDDLE, "none"), (GREEDY, "none"), (GREEDY, "ghosted")]
    k = {name: eval_key(r, m, adaptive) for name, (r, m) in zip(names, jobs)}
    contrasts = [Contrast("dense - middle-16 (large)", k["dense"], k["middle-16"]),
                 Contrast(f"dense - drop-1 {{{DROP1}}} (near-null)", k["dense"], k["drop-1"]),
                 Contrast("ghosted - none (greedy-ppl k8)", k["greedy+ghosted"], k["greedy"])]
    out = Path(args.out)
    a_dir, f_dir = out / "adaptive", out / "fixed"
    if out.exists() and not (out / "bench.json").exists() and not (a_dir / "items.parquet").exists():
        raise SystemExit(f"{out} exists and is not this bench's output; give --out a new directory")
    shutil.rmtree(out, ignore_errors=True)
    a_dir.mkdir(parents=True)
    t0, c0 = time.perf_counter(), time.process_time()
    evaluate_finalists(adaptive, a_dir, jobs, progress=False, contrasts=contrasts)
    t_a, c_a = time.perf_counter() - t0, time.process_time() - c0
    res = json.loads((a_dir / "looks.json").read_text())
    shutil.copytree(a_dir, f_dir)
    t0, c0 = time.perf_counter(), time.process_time()
    evaluate_finalists(fixed, f_dir, jobs, progress=False)  # every model to the last look (resumed rows)
    t_f, c_f = time.perf_counter() - t0, time.process_time() - c0
    import pyarrow.parquet as pq

    rows = pq.read_table(f_dir / "eval_items.parquet").to_pylist()
    corr: dict[str, dict] = {}
    for r in rows:
        corr.setdefault(r["key"], {})[(r["task"], r["doc"])] = float(r["pred"] == r["gold"])
    items = sorted(next(iter(corr.values())))
    tests = [stats.paired_test([corr[c.left_key][i] for i in items], [corr[c.right_key][i] for i in items],
                               [t for t, _ in items]) for c in contrasts]
    adj = stats.holm([t.p for t in tests])
    zc = stats.z_of_level(1 - stats.ALPHA / len(contrasts))
    fixed_total = looks[-1] * len(jobs)
    print(f"looks {looks} items per model, {len(jobs)} models, {args.spending} spending, margin {margin}, "
          f"Holm over {len(contrasts)} contrasts, eval.seed {args.seed}")
    print(f"adaptive: {res['items_total']} items in all (looks run: {res['looks_run']}); fixed: {fixed_total}; "
          f"ratio adaptive / fixed = {res['items_total'] / fixed_total:.2f}")
    print(f"items per model (adaptive): {[res['items_per_model'][k[n]] for n in k]} for {list(k)}")
    same, out_rows = True, []
    for c, row, t, p in zip(contrasts, res["contrasts"], tests, adj):
        fv = ("differs" if p <= stats.ALPHA else
              "within margin" if margin and abs(t.estimate) + zc * t.se < margin else "open")
        av = row["verdict"]
        agree = av == fv and (av != "differs" or row["sign"] == (1 if t.estimate > 0 else -1))
        same &= agree
        print(f"  {c.name:36s} adaptive: {av} at look {row['decided_at_look']} (estimate {row['estimate']:+.3f}, "
              f"z {row['z']:.2f}); fixed: {fv}, estimate {t.estimate:+.3f}, z {t.z:.2f}, Holm p {p:.3g}")
        out_rows.append({"contrast": c.name, "adaptive": av, "look": row["decided_at_look"],
                         "adaptive_estimate": row["estimate"], "fixed": fv, "fixed_estimate": t.estimate,
                         "fixed_z": t.z, "fixed_holm_p": float(p), "same": agree})
    print(f"same verdicts: {same}")
    print(f"seconds: adaptive {t_a:.0f} wall / {c_a:.0f} CPU (ghosted fit and model load included); the fixed design's "
          f"further items {t_f:.0f} wall / {c_f:.0f} CPU (fixed = both)")
    (out / "bench.json").write_text(json.dumps({
        "looks": looks, "spending": args.spending, "margin": margin, "seed": args.seed, "drop1": DROP1, "keys": k,
        "items_adaptive": res["items_total"], "items_fixed": fixed_total,
        "ratio": res["items_total"] / fixed_total, "items_per_model": {n: res["items_per_model"][k[n]] for n in k},
        "contrasts": out_rows, "same_verdicts": same, "seconds": {"adaptive_wall": t_a, "adaptive_cpu": c_a,
                                                                   "fixed_extra_wall": t_f, "fixed_extra_cpu": c_f}},
        indent=1))


def replay(out: Path, looks: list[int], spending: str, margin: float | None) -> dict:
    """What an adaptive run with this design would have evaluated and decided, replayed exactly on
    the fixed design's per-item rows: a model's predictions do not depend on which other items are
    evaluated, and every look is a prefix of the run's draw, so the replay is the run without the
    forward passes (its items are OUT/fixed/items.parquet's order). Prints and returns the summary."""
    import pyarrow.parquet as pq

    from ghostsearch.looks import Contrast, Design

    info = json.loads((out / "bench.json").read_text())
    order = [(r["task"], r["doc"]) for r in sorted(pq.read_table(out / "fixed" / "items.parquet").to_pylist(),
                                                    key=lambda r: r["rank"])]
    looked = json.loads((out / "adaptive" / "looks.json").read_text())
    names = {v: n for n, v in info.get("keys", {}).items()}
    correct: dict[str, dict] = {}
    for r in pq.read_table(out / "fixed" / "eval_items.parquet").to_pylist():
        correct.setdefault(r["key"], {})[(r["task"], r["doc"])] = float(r["pred"] == r["gold"])
    n_max = min(len(v) for v in correct.values())
    if looks[-1] > n_max:
        raise SystemExit(f"--looks ends at {looks[-1]} items but the fixed design has {n_max} per model")
    contrasts = [Contrast(c["contrast"], c["left_key"], c["right_key"]) for c in looked["contrasts"]]
    d = Design(looks, contrasts, spending=spending, margin=margin)
    used = {k: 0 for k in correct}
    for j, n in enumerate(looks):
        for k in (correct if j == 0 else d.open_keys()):
            used[k] = n
        d.test(j, correct, order[:n])
        if d.finished():
            break
    rows = d.table(used, j + 1)
    total, fixed = sum(used.values()), looks[-1] * len(correct)
    print(f"replay of {out}/fixed: looks {looks}, {spending}, margin {margin}: {total} items of the fixed "
          f"design's {fixed} (ratio {total / fixed:.2f}); items per model "
          f"{ {names.get(k, k[:6]): v for k, v in used.items()} }")
    by_name = {c["contrast"]: c for c in info["contrasts"]}
    same = True
    for r in rows:
        f = by_name.get(r["contrast"], {})
        agree = r["verdict"] == f.get("fixed") if looks[-1] == info["looks"][-1] else None
        same = same and bool(agree) if agree is not None else same
        print(f"  {r['contrast']:36s} {r['verdict']} at look {r['decided_at_look']} (estimate {r['estimate']:+.3f}, "
              f"z {r['z']:.2f}); fixed design: {f.get('fixed')}")
    return {"looks": looks, "spending": spending, "margin": margin, "items": total, "fixed": fixed,
            "ratio": total / fixed, "contrasts": rows, "same_verdicts": same}


if __name__ == "__main__":
    main()
