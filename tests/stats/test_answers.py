"""stats.answers (issue 47): the constant-answer floor, majority answers and a contrast's per-task
and leave-one-task-out numbers, on small hand-made cases whose answers are known, and on study 3's
committed per-item rows (docs/results/study-3), where BoolQ's one-answer models carry C1 and C6."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from ghostsearch.stats import answers
from ghostsearch.stats import inference as stats

ROOT = Path(__file__).resolve().parents[2]
STUDY3 = ROOT / "docs" / "results" / "study-3"


def test_constant_answer_is_the_most_common_gold_option_of_the_items_given():
    gold = {("boolq", i): int(i % 3 != 0) for i in range(9)} | {("piqa", i): i % 2 for i in range(4)}
    c = answers.constant_answers(gold)
    assert (c["boolq"].option, c["boolq"].share, c["boolq"].n) == (1, 6 / 9, 9)
    assert (c["piqa"].option, c["piqa"].share) == (0, 0.5)  # a tie: the smaller option
    dense = {it: g for it, g in gold.items()}  # always right
    yes = {it: 1 for it in gold}  # always option 1
    fl = answers.floor(gold, {"dense": dense, "yes": yes}, dense="dense")
    assert fl.macro_floor == pytest.approx((6 / 9 + 0.5) / 2)
    assert fl.models["yes"].acc == {"boolq": 6 / 9, "piqa": 0.5}
    assert fl.models["yes"].margin["boolq"] == pytest.approx(0.0)
    assert fl.at_floor == ["yes"]  # at the floor counts
    assert fl.models["yes"].one_answer() == ["boolq", "piqa"]
    assert fl.constant_beats_dense == []
    worse = {it: 1 - g for it, g in gold.items()}  # always wrong
    assert answers.floor(gold, {"d": worse}, dense="d").constant_beats_dense == ["boolq", "piqa"]


def test_sensitivity_finds_a_difference_carried_by_one_task():
    rng = np.random.default_rng(0)
    tasks = [f"t{j}" for j in range(8)]
    items = [(t, i) for t in tasks for i in range(300)]
    base = {it: float(rng.random() < 0.5) for it in items}
    left = dict(base)
    right = {it: (0.0 if it[0] == "t0" else v) for it, v in base.items()}  # right fails every item of t0
    s = answers.sensitivity(left, right, items, bound=2.5, margin=0.04, rci_bound=2.5)
    t = stats.paired_test([left[i] for i in items], [right[i] for i in items], np.array([i[0] for i in items]))
    assert s.estimate == pytest.approx(t.estimate) and s.se == pytest.approx(t.se)
    assert s.contribution["t0"] == pytest.approx(s.estimate)  # every other task contributes 0
    assert s.verdict == "differs" and s.changes == ["t0"]
    assert s.left_out["t0"].estimate == 0.0 and s.left_out["t0"].verdict == "within margin"
    assert math.isclose(sum(s.contribution.values()), s.estimate)


@pytest.mark.skipif(not (STUDY3 / "looks.json").exists(), reason="study 3 not committed")
def test_study_3s_committed_items_flag_c1_and_c6_on_boolq():
    """Issue 47: G1 answers "no" to all 349 BoolQ items, G3, G4, G5, G9 "yes" to all; the constant
    answer scores 0.398 macro, above every pruned model; C1 and C6 differ with BoolQ and not without it."""
    from ghostsearch.core.eval_numbers import read_item_rows
    from ghostsearch.stats.looks import ContrastRow
    from ghostsearch.study.report import answers as report

    keys = {m: s["eval_key"] for m, s in json.loads((STUDY3 / "study.json").read_text())["models"].items()}
    by_key = {k: read_item_rows(STUDY3 / "evals" / f"{k}.items.parquet") for k in set(keys.values())}
    fl = report.floor_of({m: by_key[k] for m, k in keys.items()}, dense="G0")
    assert round(fl.macro_floor, 3) == 0.398
    assert fl.constant["boolq"].n == 349 and report.option_name("boolq", fl.constant["boolq"].option) == "yes"
    one = {
        m: report.option_name("boolq", a.majority["boolq"].option)
        for m, a in fl.models.items()
        if "boolq" in a.one_answer()
    }
    assert one == {"G1": "no", "G3": "yes", "G4": "yes", "G5": "yes", "G9": "yes"}
    assert sorted(fl.at_floor) == ["G1", "G2", "G3", "G4", "G5", "G7", "G8", "G9"]
    assert "boolq" in fl.constant_beats_dense
    looks = [ContrastRow.from_dict(c) for c in json.loads((STUDY3 / "looks.json").read_text())["contrasts"]]
    sens = report.sensitivities(by_key, looks)
    flagged = {c.split()[0] for c, s in sens.items() if s.verdict == "differs" and s.changes}
    assert flagged == {"C1", "C6"}
    for c, s in sens.items():
        row = next(r for r in looks if r.contrast == c)
        assert s.estimate == pytest.approx(row.estimate, abs=1e-12)  # the rule's own items and estimate
        if c.startswith(("C1", "C6")):
            assert s.changes == ["boolq"] and abs(s.left_out["boolq"].z) < 1.1
    assert round(sens[next(c for c in sens if c.startswith("C1"))].contribution["boolq"], 3) == 0.029


def test_evals_lines_name_the_models_as_its_table_does():
    from ghostsearch.core.eval_numbers import ItemRow
    from ghostsearch.study.report.answers import eval_lines

    def rows(removed, rec, preds):
        return [ItemRow(0, removed, rec, "boolq", d, d % 2, p, None, (0.0, 0.0)) for d, p in enumerate(preds)]

    items = rows((), "none", [0, 1, 0, 1]) + rows((3, 7), "none", [0] * 4) + rows((3, 7), "ghosted", [1, 1, 0, 1])
    text = "\n".join(eval_lines(items))
    assert "| dense | 1.000 | +0.500 |" in text and "| -3,7 | 0.500 | +0.000 AT/BELOW FLOOR |" in text
    assert "| -3,7+ghosted | 0.750 |" in text
    assert "One answer to every item of a task: -3,7 boolq (no)." in text
    assert eval_lines([]) == []
