"""Study 2 of docs/results.md ("Pre-registration: study 2", 2026-12-01): eleven fixed models at
k = 8 (the pilot's perplexity-objective finalists, no new search), seven contrasts (left - right,
mean accuracy), and claim S1 (the objectives shape the removed set) tested on a compare of
configs/study2-s1.yaml. bench/study2.py is its command line."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import numpy as np

from ghostsearch.rundir.layout import result_cells
from ghostsearch.stats import inference as stats
from ghostsearch.study.studies.base import Study

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


def s1_test(run_dir: Path):
    """Claim S1's data and test: greedy's k = 8 sets under both objectives x calibration seeds
    (configs/study2-s1.yaml), sorted (objective, seed, removed); statistic: mean Jaccard of
    same-objective pairs minus cross-objective pairs; exact permutation test over every way to
    relabel the sets' objectives (70 for 4 + 4), one-sided. Returns (rows, stats.PermutationResult)."""
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
