"""Study 3 of docs/results.md ("Pre-registration: study 3", 2026-12-03): Gemma-3-270M (Q4_K_M GGUF,
de-quantised to fp32 on load) at k = 5 of 18, ten models whose removed sets are the pilot's k = 5
finalists (docs/results/study-3/pilot, configs/study3-gemma3-pilot.yaml), six contrasts numbered as
study 2's (G6 and C4 dropped before look 1: docs/results.md, note of 2026-12-05), Holm at 0.05
with O'Brien-Fleming looks at N/4, N/2, N items per model, N sized from the pilot by the
pre-registered rule (:func:`planned_n`).

  python bench/study3.py [--config configs/study3-gemma3.yaml] [--commit] [--report-only] [--plan]
                         [--perplexity [--max-windows W] [--models G1,G2] [--ppl-out DIR]] [key=value ...]

Resumable as bench/study2.py is (the same machinery, ghostsearch.study.studies.base: compare.evaluate_finalists
with contrasts); ``--commit`` commits docs/results/study-3 after every share of models and every look.
Once every look is recorded (looks.json), the accuracy stage is not started again.
``--plan`` prints the models, N and the allocation from the pilot and exits (no model runs).

``--perplexity`` (issue 47): the WikiText-2 perplexity stage, model by model, in this process (no
Ray): each distinct model (by eval key; G3 is G9) is repaired as the study fitted it and scored on
every 2048-token window of WikiText-2 test (the paper protocol) one window at a time; its per-window
mean NLL (full float precision) goes to docs/results/study-3/ppl/<eval_key>.json when the model is
done, and ``--commit`` commits that one file at once (``git commit -- FILE``). A rerun skips the
models whose file is there; a model stopped midway resumes from its windows so far, kept in the same
directory's <eval_key>.partial.jsonl (committed alone every 10 windows with ``--commit``, removed in
the commit that adds the model's file). The order puts the models of the contrasts that were decided
first (C1, C6), then C2, C3, C5, then the dense model.

The study's models, contrasts, N and perplexity stage are ``ghostsearch.study.studies.study3``.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import benchenv  # (repository on sys.path, offline HF, ../shared/data)

from ghostsearch.study.studies.study3 import (
    PPL_ORDER,
    configure,
    looks_finished,
    models,
    perplexity_stage,
    study,
)

PILOT = Path("docs/results/study-3/pilot")
PPL_DIR = Path("docs/results/study-3/ppl")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--config", default="configs/study3-gemma3.yaml")
    ap.add_argument("--commit", action="store_true", help="commit the run directory after every share and look")
    ap.add_argument("--report-only", action="store_true", help="write study3.md from what has run")
    ap.add_argument(
        "--plan", action="store_true", help="print the models, N and allocation from the pilot; run nothing"
    )
    ap.add_argument("--perplexity", action="store_true", help="the WikiText-2 stage, model by model (no Ray)")
    ap.add_argument("--max-windows", type=int, help="--perplexity on the first W windows only (a check)")
    ap.add_argument("--models", help="--perplexity for these models only, e.g. G1,G2 (default: all, in PPL_ORDER)")
    ap.add_argument("--ppl-out", default=str(PPL_DIR), help="--perplexity's directory")
    ap.add_argument("overrides", nargs="*", help="key=value config overrides")
    args = ap.parse_args()

    from ghostsearch.core.errors import GhostsearchError
    from ghostsearch.data.dataplan import announce, plan

    try:
        cfg, sets, n, sds, se = configure(args.config, args.overrides, PILOT)
    except GhostsearchError as e:
        raise SystemExit(str(e)) from None
    ms = models(sets)
    print(f"study 3: N = {n} items per model (planned s.e. of a difference {se:.4f}); looks {cfg.eval.looks}")
    print("shrunk per-task SDs: " + ", ".join(f"{t} {v:.3f}" for t, v in sds.items()))
    for m, (lab, rem, rep) in ms.items():
        print(f"  {m} {lab} {rem} {rep}")
    if args.plan:
        return

    import torch

    from ghostsearch.study.studies import base as studies  # the studies' machinery: the design, the run, the report

    torch.set_num_threads(max(1, cfg.pool.threads))
    run_dir = Path(cfg.out)
    data_plan = plan(cfg, ["perplexity"], evaluate=True, repair=True)
    cfg = cfg.evaluating(data_plan.perplexity)  # eval.perplexity as the data plan resolved it here
    announce(data_plan)
    s3 = study(sets)
    keys, jobs, pairs = studies.design(cfg, data_plan.held_out, s3)
    if args.perplexity:
        order = args.models.split(",") if args.models else PPL_ORDER
        commit = benchenv.commit_paths if args.commit else None
        perplexity_stage(cfg, keys, data_plan.held_out, Path(args.ppl_out), commit, order, args.max_windows)
        return
    if looks_finished(run_dir) and not args.report_only:
        print(f"study 3: every look is recorded in {run_dir}/looks.json; the accuracy stage has nothing to run")
    elif not args.report_only:
        extra = {"n": n, "looks": cfg.eval.looks, "planned_se": se, "shrunk_sds": sds}
        studies.run_study(cfg, s3, keys, jobs, pairs, data_plan, benchenv.commit_dir if args.commit else None, extra)
    if (run_dir / "looks.json").exists():
        text = studies.report(run_dir, keys, s3)
        (run_dir / "study3.md").write_text(text)
        print(text)
        if args.commit:  # the report alone: others' files in the directory are never swept in
            benchenv.commit_dir(run_dir / "study3.md", f"study 3 (issue 37): report {run_dir}/study3.md")


if __name__ == "__main__":
    main()
