"""Study 3 of docs/results.md ("Pre-registration: study 3", 2026-12-03): Gemma-3-270M (Q4_K_M GGUF,
de-quantised to fp32 on load) at k = 5 of 18, ten models whose removed sets are the pilot's k = 5
finalists (docs/results/study-3/pilot, configs/study3-gemma3-pilot.yaml), six contrasts numbered as
study 2's, Holm at 0.05 with O'Brien-Fleming looks at N/4, N/2, N items per model, N sized from the
pilot by the pre-registered rule (:func:`planned_n`).

  python bench/study3.py [--config configs/study3-gemma3.yaml] [--commit] [--report-only] [--plan] [key=value ...]

Resumable as bench/study2.py is (it reuses its machinery: compare.evaluate_finalists with
contrasts); ``--commit`` commits docs/results/study-3 after every share of models and every look.
``--plan`` prints the models, N and the allocation from the pilot and exits (no model runs).
"""

from __future__ import annotations

import argparse
import json
import math
import time
from pathlib import Path

import benchenv  # noqa: F401  (repository on sys.path, offline HF, ../shared/data)

PILOT = Path("docs/results/study-3/pilot")
SE_TARGET, N_CAP, N_STEP = 0.0086, 2400, 200  # the pre-registered rule: study 2's planned s.e., its N as the cap
# the pre-registered models: id -> (label, pilot searcher, repair)
MODELS: dict[str, tuple[str, str | None, str]] = {
    "G0": ("dense", None, "none"),
    "G1": ("greedy-perplexity", "greedy", "none"),
    "G2": ("greedy-perplexity", "greedy", "ghosted"),
    "G3": ("fastblock", "fastblock", "none"),
    "G4": ("fastblock", "fastblock", "ghosted"),
    "G5": ("fastblock", "fastblock", "linearpatch"),
    "G6": ("fastblock", "fastblock", "replaceme"),
    "G7": ("lorp", "lorp", "none"),
    "G8": ("shortgpt", "shortgpt", "none"),
    "G9": ("streamline", "streamline", "none"),
}
CONTRASTS: list[tuple[str, str, str, str]] = [
    ("C1", "Ghosted - none, greedy-perplexity set", "G2", "G1"),
    ("C2", "Ghosted - none, fastblock set", "G4", "G3"),
    ("C3", "Ghosted - LinearPatch, fastblock set", "G4", "G5"),
    ("C4", "Ghosted - ReplaceMe, fastblock set", "G4", "G6"),
    ("C5", "LoRP - ShortGPT, unrepaired", "G7", "G8"),
    ("C6", "LoRP - Streamline, unrepaired", "G7", "G9"),
]


def pilot_sets(pilot: Path = PILOT, k: int = 5) -> dict[str, list[int]]:
    """Each searcher's k-block removed set from the pilot's result.json (perplexity objective, seed 0)."""
    from ghostsearch.rundir.layout import result_cells

    cells = result_cells(json.loads((pilot / "result.json").read_text()))
    out = {}
    for c in cells.values():
        if c["objective"] == "perplexity" and c["k"] == k and c["seed"] == 0:
            out[c["searcher"]] = sorted(int(b) for b in c["removed"])
    return out


def planned_n(cfg) -> tuple[int, dict[str, float], float]:
    """(N, the shrunk per-task SDs, the planned s.e. at N): N the smallest multiple of 200 with
    sqrt((sum_h sd_h)^2 / (T^2 N)) <= 0.0086 (T tasks, Neyman allocation), at most 2,400."""
    from ghostsearch.model.items import weights_for

    tasks = list(cfg.eval.tasks)
    sds = weights_for(cfg.eval, tasks, {})
    total = sum(sds.values())
    n = N_STEP
    while n < N_CAP and math.sqrt(total**2 / (len(tasks) ** 2 * n)) > SE_TARGET:
        n += N_STEP
    return n, sds, math.sqrt(total**2 / (len(tasks) ** 2 * n))


def models(sets: dict[str, list[int]]) -> dict[str, tuple[str, list[int], str]]:
    return {m: (lab, sets[s] if s else [], rep) for m, (lab, s, rep) in MODELS.items()}


def design(cfg, held_out, sets):
    """({model id: eval key}, jobs, contrast pairs); a contrast between identical models is dropped."""
    from ghostsearch.study.compare import eval_key

    ms = models(sets)
    keys = {m: eval_key(removed, method, cfg, held_out) for m, (_, removed, method) in ms.items()}
    jobs: list[tuple[list[int], str]] = []
    for _, removed, method in ms.values():
        if (removed, method) not in jobs:
            jobs.append((removed, method))
    pairs = [(f"{cid} {q}", keys[left], keys[right]) for cid, q, left, right in CONTRASTS if keys[left] != keys[right]]
    return keys, jobs, pairs


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--config", default="configs/study3-gemma3.yaml")
    ap.add_argument("--commit", action="store_true", help="commit the run directory after every share and look")
    ap.add_argument("--report-only", action="store_true", help="write study3.md from what has run")
    ap.add_argument(
        "--plan", action="store_true", help="print the models, N and allocation from the pilot; run nothing"
    )
    ap.add_argument("overrides", nargs="*", help="key=value config overrides")
    args = ap.parse_args()

    from ghostsearch.config import load_config, save_config
    from ghostsearch.rundir.dataplan import announce, plan

    items = str(PILOT / "eval_items.parquet")  # the pilot's per-item rows: Neyman SDs, and left out
    if not Path(items).is_file():
        raise SystemExit(f"study3: {items} is not there yet: run the pilot first (scripts/study3.sh does)")
    pilot_items = ["eval.allocation=neyman", "eval.neyman_shrink=0.5", f"eval.neyman_from={items}"]
    pilot_items.append(f"eval.exclude_from={items}")
    cfg = load_config(args.config, pilot_items + args.overrides)
    sets = pilot_sets()
    n, sds, se = planned_n(cfg)
    cfg.eval.max_items, cfg.eval.looks = n, [n // 4, n // 2, n]
    ms = models(sets)
    print(f"study 3: N = {n} items per model (planned s.e. of a difference {se:.4f}); looks {cfg.eval.looks}")
    print("shrunk per-task SDs: " + ", ".join(f"{t} {v:.3f}" for t, v in sds.items()))
    for m, (lab, rem, rep) in ms.items():
        print(f"  {m} {lab} {rem} {rep}")
    if args.plan:
        return

    import study2  # the report's table, shared with study 2
    import torch

    from ghostsearch.core.io import write_json_atomic
    from ghostsearch.study.compare import evaluate_finalists

    torch.set_num_threads(max(1, cfg.pool.threads))
    run_dir = Path(cfg.out)
    data_plan = plan(cfg, ["perplexity"], evaluate=True, repair=True)
    announce(data_plan)
    held_out = data_plan.held_out
    keys, jobs, pairs = design(cfg, held_out, sets)
    if not args.report_only:
        run_dir.mkdir(parents=True, exist_ok=True)
        save_config(cfg, run_dir / "config.yaml")
        write_json_atomic(
            run_dir / "study.json",
            {
                "preregistered": "docs/results.md, 'Pre-registration: study 3' (2026-12-03)",
                "n": n,
                "looks": cfg.eval.looks,
                "planned_se": se,
                "shrunk_sds": sds,
                "models": {
                    m: {"label": lab, "removed": rem, "recovery": rep, "eval_key": keys[m]}
                    for m, (lab, rem, rep) in ms.items()
                },
                "contrasts": [
                    {"id": cid, "question": q, "left": lft, "right": rgt, "dropped": keys[lft] == keys[rgt]}
                    for cid, q, lft, rgt in CONTRASTS
                ],
                "data": data_plan,
            },
        )
        t0 = time.monotonic()
        names = {v: m for m, v in keys.items()}

        def on_look(j: int, n_items: int) -> None:
            print(f"look {j + 1} done: {n_items} items per model, {time.monotonic() - t0:.0f} s", flush=True)
            if args.commit:
                benchenv.commit_dir(run_dir, f"study 3 (issue 37): look {j + 1} ({n_items} items per model) evaluated")

        def on_share(share: list[str]) -> None:
            done = ", ".join(names.get(k, k) for k in share)
            print(f"saved: {done}, {time.monotonic() - t0:.0f} s", flush=True)
            if args.commit:
                benchenv.commit_dir(run_dir, f"study 3 (issue 37): {done} evaluated (rows saved)")

        evaluate_finalists(
            cfg, run_dir, jobs, held_out, progress=True, contrasts=pairs, on_look=on_look, on_share=on_share
        )
    if (run_dir / "looks.json").exists():
        study2.MODELS, study2.CONTRASTS = ms, [c for c in CONTRASTS if keys[c[2]] != keys[c[3]]]
        n_c = len(study2.CONTRASTS)
        text = study2.report(run_dir, keys).replace("over the seven contrasts", f"over the {n_c} contrasts")
        text = text.replace("alpha / 7", f"alpha / {n_c}")
        (run_dir / "study3.md").write_text(text)
        print(text)
        if args.commit:
            benchenv.commit_dir(run_dir, f"study 3 (issue 37): report {run_dir}/study3.md")


if __name__ == "__main__":
    main()
