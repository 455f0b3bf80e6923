"""Study 2 of docs/results.md ("Pre-registration: study 2", 2026-12-01): eleven fixed models at
k = 8 (the pilot's perplexity-objective finalists, no new search), seven contrasts, Holm at 0.05
combined with O'Brien-Fleming looks at 600 / 1,200 / 2,400 items per model (compare's adaptive
evaluation: ``compare.evaluate_finalists`` with contrasts, ``looks.Design``).

  python bench/study2.py [--config configs/study2-smollm2.yaml] [--commit] [--report-only] [key=value ...]

Resumable: the run directory (``out``, default docs/results/study-cpu-2, in the repository so that a
later session continues from it) keeps the draw (items.parquet) and every model's per-item rows
(evals/<key>.items.parquet); rerun the same command and nothing evaluated is evaluated again.
``--commit`` commits the run directory after every model's share (``eval.share``) and every look
(``git commit -- DIR``), so a long run survives the session that started it. Writes DIR/study2.md (the contrasts' table) at the end, or
at once with ``--report-only``.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import benchenv  # (repository on sys.path, offline HF, ../shared/data)

from ghostsearch.stats.windows import cluster_diff, window_clusters  # noqa: F401  (study2_cheap, tests)
from ghostsearch.study import studies
from ghostsearch.study.studies import REDO_NAME, Study

# the pre-registered models: id -> (label, removed blocks, repair)
MODELS: dict[str, tuple[str, list[int], str]] = {
    "M0": ("dense", [], "none"),
    "M1": ("greedy-perplexity", [4, 5, 13, 14, 15, 16, 17, 18], "none"),
    "M2": ("greedy-perplexity", [4, 5, 13, 14, 15, 16, 17, 18], "ghosted"),
    "M3": ("fastblock", [12, 13, 14, 15, 16, 17, 18, 19], "none"),
    "M4": ("fastblock", [12, 13, 14, 15, 16, 17, 18, 19], "ghosted"),
    "M5": ("fastblock", [12, 13, 14, 15, 16, 17, 18, 19], "linearpatch"),
    "M6": ("fastblock", [12, 13, 14, 15, 16, 17, 18, 19], "replaceme"),
    "M7": ("lorp", [4, 6, 8, 17, 19, 25, 26, 27], "none"),
    "M8": ("shortgpt", [12, 13, 14, 15, 16, 17, 25, 26], "none"),
    "M9": ("streamline", [11, 12, 13, 14, 15, 16, 17, 18], "none"),
    "M10": ("greedy-margin", [7, 16, 17, 18, 21, 24, 26, 27], "ghosted"),
}
# the pre-registered contrasts: id, question, left model, right model (left - right, mean accuracy)
CONTRASTS: list[tuple[str, str, str, str]] = [
    ("C1", "Ghosted - none, greedy-perplexity set", "M2", "M1"),
    ("C2", "Ghosted - none, fastblock set", "M4", "M3"),
    ("C3", "Ghosted - LinearPatch, fastblock set", "M4", "M5"),
    ("C4", "Ghosted - ReplaceMe, fastblock set", "M4", "M6"),
    ("C5", "LoRP - ShortGPT, unrepaired", "M7", "M8"),
    ("C6", "LoRP - Streamline, unrepaired", "M7", "M9"),
    ("C7", "greedy: perplexity set - margin set, Ghosted", "M2", "M10"),
]


STUDY2 = Study("study 2 (issue 24)", "docs/results.md, 'Pre-registration: study 2' (2026-12-01)", MODELS, CONTRASTS)


# ---------------------------------------------------------------- perplexity over windows
RUN = Path(__file__).resolve().parents[1] / "docs/results/study-cpu-2"
REDO = RUN / REDO_NAME  # bench/study2_ppl.py: the per-window NLL recomputed (issue 37)


def redone_windows(model: str, corpus: str = "wikitext2", redo: Path = REDO) -> list[float] | None:
    """A study 2 model's per-window mean NLL from bench/study2_ppl.py (studies.redone_windows)."""
    return studies.redone_windows(model, redo, corpus)


def design(cfg, held_out, study: Study = STUDY2):
    """The study's eval keys, jobs and contrast pairs (studies.design), study 2's by default."""
    return studies.design(cfg, held_out, study)


def run_study(cfg, study: Study, keys, jobs, pairs, data_plan, commit: bool = False, extra: dict | None = None) -> None:
    """studies.run_study, RUN_DIR committed after every share and look with ``commit``."""
    studies.run_study(cfg, study, keys, jobs, pairs, data_plan, benchenv.commit_dir if commit else None, extra)


def report(run_dir: Path, keys: dict[str, str], study: Study = STUDY2) -> str:
    """The contrasts' table (studies.report), study 2's by default."""
    return studies.report(run_dir, keys, study)


def s1_test(run_dir: Path):
    """Claim S1's data and test: greedy's k = 8 sets under both objectives x calibration seeds
    (configs/study2-s1.yaml), sorted (objective, seed, removed); statistic: mean Jaccard of
    same-objective pairs minus cross-objective pairs; exact permutation test over every way to
    relabel the sets' objectives (70 for 4 + 4), one-sided. Returns (rows, stats.PermutationResult)."""
    import itertools

    import numpy as np

    from ghostsearch.rundir.layout import result_cells
    from ghostsearch.stats import inference as stats

    cells = result_cells(json.loads((run_dir / "result.json").read_text()))
    rows = sorted((c["objective"], c["seed"], tuple(c["removed"])) for c in cells.values() if c["searcher"] == "greedy")
    sets = [set(r[2]) for r in rows]
    labels = np.array([r[0] for r in rows])
    jac = np.array([[len(a & b) / len(a | b) for b in sets] for a in sets])
    pairs = list(itertools.combinations(range(len(sets)), 2))

    def gap(lab) -> float:
        same = [jac[i, j] for i, j in pairs if lab[i] == lab[j]]
        cross = [jac[i, j] for i, j in pairs if lab[i] != lab[j]]
        return float(np.mean(same) - np.mean(cross))

    return rows, stats.permutation_test(gap, labels, alternative="greater")


def s1(run_dir: Path) -> str:
    """Claim S1's table and sentence (:func:`s1_test`)."""
    rows, t = s1_test(run_dir)
    lines = ["| objective | calibration seed | removed |", "|---|---|---|"]
    lines += [f"| {o} | {sd} | {' '.join(map(str, r))} |" for o, sd, r in rows]
    lines += [
        "",
        f"S1: same-objective minus cross-objective Jaccard = {t.estimate:.3f}; exact permutation p = "
        f"{t.p:.4f} over {t.n_perm} relabellings (one-sided; the smallest possible p is {2 / t.n_perm:.4f}: "
        "swapping the two objectives' names leaves the statistic unchanged).",
    ]
    return "\n".join(lines) + "\n"


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
        announce(data_plan)
        keys, jobs, pairs = design(cfg, data_plan.held_out)
        run_study(cfg, STUDY2, keys, jobs, pairs, data_plan, args.commit)
    text = report(run_dir, keys)
    (run_dir / "study2.md").write_text(text)
    print(text)
    if args.commit:
        benchenv.commit_dir(run_dir, f"study 2 (issue 24): report {run_dir}/study2.md")


if __name__ == "__main__":
    main()
