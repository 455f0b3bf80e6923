"""Study 3 of docs/results.md ("Pre-registration: study 3", 2026-12-03): Gemma-3-270M (Q4_K_M GGUF,
de-quantised to fp32 on load) at k = 5 of 18, ten models whose removed sets are the pilot's k = 5
finalists (docs/results/study-3/pilot, configs/study3-gemma3-pilot.yaml), six contrasts numbered as
study 2's (G6 and C4 dropped before look 1: docs/results.md, note of 2026-12-05), Holm at 0.05
with O'Brien-Fleming looks at N/4, N/2, N items per model, N sized from the pilot by the
pre-registered rule (:func:`planned_n`).

  python bench/study3.py [--config configs/study3-gemma3.yaml] [--commit] [--report-only] [--plan] [key=value ...]

Resumable as bench/study2.py is (it reuses its machinery: compare.evaluate_finalists with
contrasts); ``--commit`` commits docs/results/study-3 after every share of models and every look.
``--plan`` prints the models, N and the allocation from the pilot and exits (no model runs).
"""

from __future__ import annotations

import argparse
import json
import math
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
    # G6 (fastblock + ReplaceMe) was dropped before look 1 (docs/results.md, note of 2026-12-05): ReplaceMe
    # folds into mlp.down_proj, and Gemma-3's MLP output passes post_feedforward_layernorm first
    "G7": ("lorp", "lorp", "none"),
    "G8": ("shortgpt", "shortgpt", "none"),
    "G9": ("streamline", "streamline", "none"),
}
CONTRASTS: list[tuple[str, str, str, str]] = [
    ("C1", "Ghosted - none, greedy-perplexity set", "G2", "G1"),
    ("C2", "Ghosted - none, fastblock set", "G4", "G3"),
    ("C3", "Ghosted - LinearPatch, fastblock set", "G4", "G5"),
    # C4 (Ghosted - ReplaceMe) dropped with G6: the Holm family is C1-C3, C5, C6
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


def study(sets: dict[str, list[int]]):
    """Study 3 as bench/study2.py runs and reports a study: the models with the pilot's sets."""
    from study2 import Study

    return Study(
        "study 3 (issue 37)",
        "docs/results.md, 'Pre-registration: study 3' (2026-12-03)",
        models(sets),
        CONTRASTS,
        mark_dropped=True,
    )


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

    from ghostsearch.config import load_config
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

    import study2  # study 2's machinery: the run, the report
    import torch

    torch.set_num_threads(max(1, cfg.pool.threads))
    run_dir = Path(cfg.out)
    data_plan = plan(cfg, ["perplexity"], evaluate=True, repair=True)
    announce(data_plan)
    s3 = study(sets)
    keys, jobs, pairs = study2.design(cfg, data_plan.held_out, s3)
    if not args.report_only:
        extra = {"n": n, "looks": cfg.eval.looks, "planned_se": se, "shrunk_sds": sds}
        study2.run_study(cfg, s3, keys, jobs, pairs, data_plan, args.commit, extra)
    if (run_dir / "looks.json").exists():
        text = study2.report(run_dir, keys, s3)
        (run_dir / "study3.md").write_text(text)
        print(text)
        if args.commit:
            benchenv.commit_dir(run_dir, f"study 3 (issue 37): report {run_dir}/study3.md")


if __name__ == "__main__":
    main()
