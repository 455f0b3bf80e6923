"""Study 2's pre-registered item design (docs/results.md, "Pre-registration: study 2") is what its
config draws: Neyman allocation from the pilot's per-task paired variances shrunk half-way to their
mean (eval.neyman_shrink), the pilot's items left out, nested looks."""

from __future__ import annotations

import math
import re
from pathlib import Path

import pytest

from ghostsearch.config import load_config
from ghostsearch.core.errors import GhostsearchError
from ghostsearch.data import items

ROOT = Path(__file__).resolve().parents[2]
PILOT = str(ROOT / "docs/results/study-cpu")
CONFIG = ROOT / "configs/study2-smollm2.yaml"


def study_eval(*over):
    return load_config(
        str(CONFIG),
        [f"eval.neyman_from={PILOT}/eval_items.parquet", f"eval.exclude_from={PILOT}/eval_items.parquet", *over],
    ).eval


def test_shrink_moves_each_variance_toward_their_mean():
    ev = study_eval()
    raw = items.task_sds(ev.neyman_from, ev.tasks)
    mean_var = sum(v * v for v in raw.values()) / len(raw)
    shrunk = items.weights_for(ev, ev.tasks, {})
    for t in ev.tasks:
        assert shrunk[t] ** 2 == pytest.approx(0.5 * raw[t] ** 2 + 0.5 * mean_var)
    none = items.weights_for(study_eval("eval.neyman_shrink=0"), ev.tasks, {})
    assert none == pytest.approx(raw)
    assert min(raw.values()) < min(shrunk.values()) and max(shrunk.values()) < max(raw.values())


def test_the_preregistered_counts_are_drawn():
    """docs/results.md's table of items per task at each look (the exact quotas rounded by largest
    remainder); the draw allocates by Webster's divisor method: every count within one item."""
    doc = (ROOT / "docs/results.md").read_text()
    header = "| look | items per model | arc_c | arc_e | boolq | hella | obqa | piqa | siqa | wino |"
    assert header in doc
    names = ["arc_challenge", "arc_easy", "boolq", "hellaswag", "openbookqa", "piqa", "social_iqa", "winogrande"]
    draw = items.draw(study_eval())
    assert len(draw) == 2400
    pilot = items.previous_items(PILOT)
    assert not set(draw.order) & pilot
    for n in (600, 1200, 2400):
        row = re.search(rf"^\| \d \| {n:,} \| " + r" \| ".join([r"(\d+)"] * 8), doc, re.M)
        assert row, n
        table = dict(zip(names, map(int, row.groups())))
        got = draw.counts(n)
        assert sum(table.values()) == n == sum(got.values())
        assert all(abs(got[t] - table[t]) <= 1 for t in names), (n, got, table)


def test_shrink_is_checked_in_one_line():
    with pytest.raises(GhostsearchError, match="eval.neyman_shrink=1.5") as e:
        study_eval("eval.neyman_shrink=1.5")
    assert "\n" not in str(e.value)
    with pytest.raises(GhostsearchError, match="needs eval.allocation=neyman"):
        load_config(None, ["eval.neyman_shrink=0.5"])
    assert math.isfinite(study_eval().neyman_shrink)
