"""Study 2 of docs/results.md ("Pre-registration: study 2", 2026-12-01): eleven fixed models at
k = 8 (the pilot's perplexity-objective finalists, no new search), seven contrasts, Holm at 0.05
combined with O'Brien-Fleming looks at 600 / 1,200 / 2,400 items per model (compare's adaptive
evaluation: ``compare.evaluate_finalists`` with contrasts, ``looks.Design``).

  python bench/study2.py [--config configs/study2-smollm2.yaml] [--commit] [--report-only] [key=value ...]

Resumable: the run directory (``out``, default docs/results/study-cpu-2, in the repository so that a
later session continues from it) keeps the draw (items.parquet) and every model's per-item rows
(evals/<key>.items.parquet); rerun the same command and nothing evaluated is evaluated again.
``--commit`` commits the run directory after every model's share (``eval.share``) and every look
(``git commit -- DIR``), so a long run survives the session that started it. Writes DIR/study2.md
(the contrasts' table) at the end, or at once with ``--report-only``. The study's models, contrasts
and S1 test are ``ghostsearch.study.studies.study2``; its run and report ``...studies.base``.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import benchenv  # (repository on sys.path, offline HF, ../shared/data)

from ghostsearch.study.studies import base as studies
from ghostsearch.study.studies.study2 import STUDY2, s1


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--config", default="configs/study2-smollm2.yaml")
    ap.add_argument("--commit", action="store_true", help="commit the run directory after every look")
    ap.add_argument("--report-only", action="store_true", help="write study2.md from what has run")
    ap.add_argument("--s1", metavar="RUN_DIR", help="claim S1's table from a compare of configs/study2-s1.yaml")
    ap.add_argument("overrides", nargs="*", help="key=value config overrides")
    args = ap.parse_args()
    if args.s1:
        text = s1(Path(args.s1))
        (Path(args.s1) / "s1.md").write_text(text)
        print(text)
        return

    import torch

    from ghostsearch.config import load_config
    from ghostsearch.data.dataplan import announce, plan

    cfg = load_config(args.config, args.overrides)
    torch.set_num_threads(max(1, cfg.pool.threads))
    run_dir = Path(cfg.out)
    if args.report_only:  # reads only the run directory: no data is needed (a clone without ../shared reports too)
        if not (run_dir / "study.json").exists():
            raise SystemExit(f"study2: {run_dir} holds no study yet: run it without --report-only first")
        models = json.loads((run_dir / "study.json").read_text())["models"]
        keys = {m: spec["eval_key"] for m, spec in models.items()}
    else:  # a report changes nothing it reads: config.yaml records the settings of the last real run
        data_plan = plan(cfg, ["perplexity"], evaluate=True, repair=True)
        cfg = cfg.evaluating(data_plan.perplexity)  # eval.perplexity as the data plan resolved it here
        announce(data_plan)
        keys, jobs, pairs = studies.design(cfg, data_plan.held_out, STUDY2)
        commit = benchenv.commit_dir if args.commit else None
        studies.run_study(cfg, STUDY2, keys, jobs, pairs, data_plan, commit)
    text = studies.report(run_dir, keys, STUDY2)
    (run_dir / "study2.md").write_text(text)
    print(text)
    if args.commit:
        benchenv.commit_dir(run_dir, f"study 2 (issue 24): report {run_dir}/study2.md")


if __name__ == "__main__":
    main()
