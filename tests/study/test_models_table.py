"""The models table (ghostsearch.study.report.models), the one `ghostsearch eval` prints and the compare
report leads with: a repaired row shows the repair's own effect (against the same removed set without
repair, paired over the same items and windows), and a difference whose interval contains no difference
reads "within noise", not as a point difference.

The numbers are compare-quick's at 40 items per task on a fresh clone (issue 36 item 4): dense 0.675,
the set without repair 0.613, with Ghosted 0.525; LAMBADA perplexity x1.537 without repair, x1.174
with it. The bare 0.525 - 0.613 = -0.088 read as "the repair hurts"; paired over the same 80 items its
interval crosses 0."""

from __future__ import annotations

import math

import numpy as np

from ghostsearch.stats import inference as stats
from ghostsearch.stats.bootstrap import ItemMatrix
from ghostsearch.study.report.models import Diff, ModelEntry, markdown_table, model_rows, text_table

SET = (16, 17, 18, 19)
N_TASK = 40


def _correct(rng, n_right: int, base: np.ndarray | None = None, flips: int = 0) -> np.ndarray:
    """80 items (two tasks of 40): ``n_right`` of them right; with ``base``, ``base`` with its net loss
    of right answers and ``flips`` more right answers traded for as many wrong ones."""
    if base is None:
        x = np.zeros(2 * N_TASK)
        x[rng.choice(2 * N_TASK, n_right, replace=False)] = 1
        return x
    x = base.copy()
    right, wrong = np.flatnonzero(x == 1), np.flatnonzero(x == 0)
    net = int(base.sum()) - n_right  # right answers to lose
    lose = rng.choice(right, net + flips, replace=False)
    gain = rng.choice(wrong, flips, replace=False)
    x[lose], x[gain] = 0, 1
    return x


def _models():
    rng = np.random.default_rng(0)
    dense = _correct(rng, 54)
    none = _correct(rng, 49, dense, flips=3)
    ghosted = _correct(rng, 42, dense, flips=0)
    tasks = ["arc_easy"] * N_TASK + ["piqa"] * N_TASK
    docs = list(range(N_TASK)) * 2
    keys = {"dense": "d", "none": "n", "ghosted": "g"}
    cols = ([], [], [], [])
    for name, c in (("dense", dense), ("none", none), ("ghosted", ghosted)):
        for t, d, v in zip(tasks, docs, c):
            cols[0].append(keys[name])
            cols[1].append(t)
            cols[2].append(d)
            cols[3].append(v)
    items = ItemMatrix.from_columns(*cols)
    w = rng.normal(3.76, 0.3, 64)  # per-window mean NLLs, the same windows for all three
    nll = {"dense": w, "none": w + 0.43 + rng.normal(0, 0.05, 64), "ghosted": w + 0.16 + rng.normal(0, 0.05, 64)}

    def numbers(name, acc):
        return {
            "mean_acc": float(acc.mean()),
            "ppl_lambada": math.exp(nll[name].mean()),
            "ppl_lambada_window_nll": nll[name].tolist(),
        }

    entries = [
        ModelEntry(SET, "ghosted", numbers("ghosted", ghosted), "g", "yes: lambada (search), lambada (repair)"),
        ModelEntry((), "none", numbers("dense", dense), "d", "nothing fitted"),
        ModelEntry(SET, "none", numbers("none", none), "n", "yes: lambada (search)"),
    ]
    return entries, items, {"dense": dense, "none": none, "ghosted": ghosted}


def test_the_data_are_compare_quicks():
    _, items, c = _models()
    assert [c[m].sum() for m in ("dense", "none", "ghosted")] == [54, 49, 42]  # 0.675, 0.6125, 0.525 of 80
    # against dense: without repair within noise, Ghosted below dense; Ghosted - none crosses 0
    assert stats.paired_diff_ci(c["none"], c["dense"], items.task_of).lo < 0
    assert stats.paired_diff_ci(c["ghosted"], c["dense"], items.task_of).hi < 0
    iv = stats.paired_diff_ci(c["ghosted"], c["none"], items.task_of)
    assert iv.lo < 0 < iv.hi and abs(iv.estimate - (0.525 - 0.6125)) < 1e-12


def test_a_repaired_row_shows_the_repairs_own_effect_paired_and_within_noise():
    entries, items, c = _models()
    rows = model_rows(entries, items)
    assert [r.label for r in rows] == ["dense", "k=4", "k=4 + ghosted"]
    dense, none, ghosted = rows
    assert dense.acc_vs_none is None and none.acc_vs_none is None and not none.ppl_vs_none
    # the repair's own effect: paired over the same 80 items, the same resampling as stats.paired_diff_ci
    iv = stats.paired_diff_ci(c["ghosted"], c["none"], items.task_of)
    eff = ghosted.acc_vs_none
    assert eff is not None and (eff.estimate, eff.lo, eff.hi) == (iv.estimate, iv.lo, iv.hi) and eff.within_noise
    # perplexity: the repair's ratio to the unrepaired set, over the same windows; clearly below 1
    r = ghosted.ppl_vs_none["lambada"]
    assert r.kind == "ratio" and r.hi is not None and r.hi < 1 and not r.within_noise
    assert abs(r.estimate - ghosted.perplexity["lambada"] / none.perplexity["lambada"]) < 1e-12

    lines = text_table(rows, speed=False).splitlines()
    g = lines[3]
    assert g.startswith("k=4 + ghosted")
    acc_cell = g[lines[0].index("mean acc") :]
    # the point difference (-0.0875) does not speak; the interval does, with the words
    assert "repair: within noise [" in acc_cell and f"{eff.estimate:+.3f}" not in acc_cell
    assert f"repair: x{r.estimate:.3f} [" in g  # a clear effect keeps its point estimate
    assert "-0.150 [" in acc_cell  # Ghosted below dense: the interval excludes 0, shown as is
    assert "within noise [" in lines[2] and "repair:" not in lines[2]  # none vs dense crosses 0; no repair there
    assert "the repair's own effect" in lines[-1] and "within noise" in lines[-1]

    md = markdown_table(rows, speed=False)
    assert "; repair: within noise [" in md and "| k=4 + ghosted |" in md
    d = ghosted.to_dict()
    assert d["acc_vs_none"]["within_noise"] is True and d["ppl_vs_none"]["lambada"]["within_noise"] is False


def test_without_the_unrepaired_set_or_items():
    entries, items, _ = _models()
    only = [e for e in entries if not (e.removed and e.recovery == "none")]
    rows = model_rows(only, items)
    assert rows[1].acc_vs_none is None and not rows[1].ppl_vs_none
    assert "repair:" not in text_table(rows, speed=False).splitlines()[2]
    # no per-item rows: the bare difference, no interval, so no verdict either way
    rows = model_rows(entries, None)
    eff = rows[2].acc_vs_none
    assert eff is not None and eff.lo is None and not eff.within_noise and abs(eff.estimate - (0.525 - 0.6125)) < 1e-12


def test_diff_text():
    assert Diff(-0.02, -0.05, 0.01).text() == "within noise [-0.050, +0.010]"
    assert Diff(-0.1, -0.2, -0.01).text() == "-0.100 [-0.200, -0.010]"
    assert Diff(1.01, 0.99, 1.03, kind="ratio").text() == "within noise [0.990, 1.030]"
    assert Diff(1.2, 1.1, 1.3, kind="ratio").text() == "x1.200 [1.100, 1.300]"
    assert Diff(0.03).text() == "+0.030" and not Diff(0.03).within_noise
