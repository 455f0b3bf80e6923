"""Adaptive evaluation (eval.looks) against the fixed design, on SmolLM2 finalists, same draw, same run.

  python bench/adaptive.py [--looks 100,200,400 --spending pocock --threads 2 --out runs/bench-adaptive]

Models: dense; the greedy-perplexity k = 8 set of the study (docs/results/study-cpu/comparison.parquet,
{4,5,13,14,15,16,17,18}) unrepaired and Ghosted (C4 8 x 256); the middle 16 blocks removed
({6..21}, a model far from dense). Contrasts (pre-registered here): dense - middle-16 (large),
Ghosted - none on the greedy-perplexity k = 8 set (the issue's; small on SmolLM2's accuracy),
greedy-ppl k8 - middle-16.
1. adaptive: compare.evaluate_finalists with eval.looks (O'Brien-Fleming, Holm across contrasts);
2. fixed: the same run directory copied and extended to the last look for every model (the
   per-item rows resume, so the fixed design costs only what adaptive did not evaluate); its
   verdicts: stats.paired_test on all items + stats.holm at 0.05.
Prints items per model and in all, the ratio adaptive / fixed, each contrast's look of decision
and whether both designs reach the same verdicts; CPU seconds of each phase.
"""
from __future__ import annotations

import argparse
import json
import shutil
import time
from pathlib import Path

import benchenv  # noqa: F401  (repository on sys.path, offline HF, ../shared/data)

GREEDY, MIDDLE = [4, 5, 13, 14, 15, 16, 17, 18], list(range(6, 22))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--looks", default="100,200,400", help="items per model at each look")
    ap.add_argument("--spending", default="pocock", choices=["pocock", "obrien-fleming"])
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--out", default="runs/bench-adaptive")
    args = ap.parse_args()

    import torch

    from ghostsearch import stats
    from ghostsearch.compare import eval_key, evaluate_finalists
    from ghostsearch.config import load_config
    from ghostsearch.logs import quiet_libraries
    from ghostsearch.looks import Contrast

    quiet_libraries()
    torch.set_num_threads(args.threads)
    looks = [int(x) for x in args.looks.split(",")]
    over = ["model=smollm2-135m", "dtype=fp32", "device=cpu", "recovery.n_seq=8", "recovery.seq_len=256",
            "eval.perplexity=[]", "eval.batch_size=16", f"eval.max_items={looks[-1]}"]
    adaptive = load_config(None, over + [f"eval.looks=[{args.looks}]", f"eval.spending={args.spending}"])
    fixed = load_config(None, over)
    jobs = [([], "none"), (GREEDY, "none"), (GREEDY, "ghosted"), (MIDDLE, "none")]
    k = {name: eval_key(r, m, adaptive) for name, (r, m) in zip(("dense", "greedy", "greedy+ghosted", "middle16"), jobs)}
    contrasts = [Contrast("dense - middle-16", k["dense"], k["middle16"]),
                 Contrast("ghosted - none (greedy-ppl k8)", k["greedy+ghosted"], k["greedy"]),
                 Contrast("greedy-ppl k8 - middle-16", k["greedy"], k["middle16"])]
    out = Path(args.out)
    a_dir, f_dir = out / "adaptive", out / "fixed"
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
    corr = {}
    for r in rows:
        corr.setdefault(r["key"], {})[(r["task"], r["doc"])] = float(r["pred"] == r["gold"])
    items = sorted(next(iter(corr.values())))
    tests = [stats.paired_test([corr[c.left_key][i] for i in items], [corr[c.right_key][i] for i in items],
                               [t for t, _ in items]) for c in contrasts]
    adj = stats.holm([t.p for t in tests])
    fixed_total = looks[-1] * len(jobs)
    print(f"looks {looks} items per model, {len(jobs)} models, {args.spending} spending, Holm over {len(contrasts)} contrasts")
    print(f"adaptive: {res['items_total']} items in all (looks run: {res['looks_run']}); fixed: {fixed_total}; "
          f"ratio adaptive / fixed = {res['items_total'] / fixed_total:.2f}")
    print(f"items per model (adaptive): {[res['items_per_model'][k[n]] for n in k]} for {list(k)}")
    same = True
    for c, row, t, p in zip(contrasts, res["contrasts"], tests, adj):
        fixed_verdict = bool(p <= stats.ALPHA)
        same &= fixed_verdict == row["decided"]
        print(f"  {c.name:34s} adaptive: decided at look {row['decided_at_look']} (z {row['z']:.2f}, "
              f"estimate {row['estimate']:+.3f}); fixed: estimate {t.estimate:+.3f}, z {t.z:.2f}, Holm p {p:.3g} "
              f"-> {'decided' if fixed_verdict else 'not decided'}")
    print(f"same verdicts: {same}")
    print(f"seconds: adaptive {t_a:.0f} wall / {c_a:.0f} CPU (ghosted fit and model load included); the fixed design's "
          f"further items {t_f:.0f} wall / {c_f:.0f} CPU (fixed = both)")


if __name__ == "__main__":
    main()
