"""The item draw (ghostsearch/data/items.py): seeded, random (not the first items), the same for every
model, nested across sizes, recorded and reused; allocation across tasks checked against hand
computations (equal, proportional, Neyman from a previous run's per-item rows); previous items left
out; one-line errors for the eval.* keys; both engines evaluate the same drawn items."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from ghostsearch.config import load_config
from ghostsearch.core.errors import GhostsearchError
from ghostsearch.data import items

PILOT = "docs/results/study-cpu"  # the reduced study's per-item rows (first 10 documents of each task)


def ev(*over, data_dir=None):
    return load_config(None, list(over) + ([f"data_dir={data_dir}"] if data_dir else [])).eval


def test_draw_is_seeded_random_nested_and_recorded(data_dir, tmp_path):
    cfg = ev("eval.tasks=[piqa,arc_easy,boolq]", "eval.max_items=60", data_dir=data_dir)
    d = items.draw(cfg, data_dir=data_dir)
    assert d == items.draw(cfg, data_dir=data_dir)  # seeded: the same twice
    other = items.draw(
        ev("eval.tasks=[piqa,arc_easy,boolq]", "eval.max_items=60", "eval.seed=1", data_dir=data_dir), data_dir=data_dir
    )
    assert d.first() != other.first()
    assert d.counts() == {"piqa": 20, "arc_easy": 20, "boolq": 20}  # equal allocation
    assert all(v != sorted(v) and v[:20] != list(range(20)) for v in d.first().values())  # random, not first-N
    for t, ids in d.first().items():  # distinct rows of the task's file
        assert len(set(ids)) == len(ids) and max(ids) < len(items.eligible(t, data_dir))
    for n, m in [(6, 30), (30, 60)]:  # looks are nested prefixes
        small, big = d.first(n), d.first(m)
        assert all(big[t][: len(v)] == v for t, v in small.items())
    first = items.draw(
        ev("eval.tasks=[piqa]", "eval.limit=5", "eval.sample=first", data_dir=data_dir), data_dir=data_dir
    )
    assert first.first() == {"piqa": [0, 1, 2, 3, 4]}  # lm-eval's limit, explicitly
    # recorded before evaluation and reused on resume: run_draw reads the file, whatever the config now draws
    run = tmp_path / "run"
    run.mkdir()
    assert items.run_draw(cfg, run, data_dir=data_dir) == d and (run / "items.parquet").exists()
    items.write_draw(other, run / "items.parquet")
    assert items.run_draw(cfg, run, data_dir=data_dir).order == other.order


def test_allocation_equals_hand_computations():
    caps = {"a": 10**6, "b": 10**6, "c": 10**6}
    assert items.allocate({"a": 1, "b": 1, "c": 1}, caps, 12) == {"a": 4, "b": 4, "c": 4}
    assert items.allocate({"a": 100, "b": 300, "c": 600}, caps, 20) == {"a": 2, "b": 6, "c": 12}  # proportional
    # capped tasks give their share to the others; the total is kept
    assert items.allocate({"a": 1, "b": 1, "c": 1}, {"a": 1, "b": 10, "c": 10}, 9) == {"a": 1, "b": 4, "c": 4}
    # any size: every count within one item of its exact quota, the sum exact, and nested
    w = {"a": 0.65, "b": 0.43, "c": 0.23}
    prev = {t: 0 for t in w}
    for n in range(1, 200):
        got = items.allocate(w, caps, n)
        assert sum(got.values()) == n and all(abs(got[t] - n * w[t] / sum(w.values())) < 1 for t in w)
        assert all(got[t] >= prev[t] for t in w)
        prev = got


def test_neyman_takes_paired_sds_from_a_previous_run(tmp_path):
    """Two tasks, three models: S_t^2 = mean over the 3 pairs of var(c_a - c_b); counts ∝ S_t."""
    corr = {
        "x": {"A": [1, 1, 0, 0], "B": [0, 0, 1, 1], "C": [1, 0, 1, 0]},
        "y": {"A": [1, 0, 0, 0], "B": [0, 0, 0, 0], "C": [0, 0, 0, 0]},
    }
    rows = [
        {"key": m, "task": t, "doc": d, "gold": 1, "pred": int(c == 1)}
        for t, ms in corr.items()
        for m, cs in ms.items()
        for d, c in enumerate(cs)
    ]
    path = tmp_path / "prev.parquet"
    pq.write_table(pa.Table.from_pylist(rows), path)
    hand = {
        t: math.sqrt(np.mean([np.var(np.subtract(ms[a], ms[b]), ddof=1) for a, b in itertools.combinations(ms, 2)]))
        for t, ms in corr.items()
    }
    assert hand["x"] == pytest.approx(math.sqrt((4 / 3 + 2 / 3 + 2 / 3) / 3))
    assert hand["y"] == pytest.approx(math.sqrt(0.25 * 2 / 3))
    sds = items.task_sds(path, ["x", "y"])
    assert sds == pytest.approx(hand)
    n = 100  # quotas 100 * S_x / (S_x + S_y) = 69.79.. and 30.21..
    assert items.allocate(sds, {"x": 10**6, "y": 10**6}, n) == {"x": 70, "y": 30}
    # the pilot's per-item rows: every task gets a positive S, the draw follows them
    cfg = ev("eval.allocation=neyman", f"eval.neyman_from={PILOT}", "eval.max_items=800", f"eval.exclude_from={PILOT}")
    pilot = items.task_sds(PILOT, cfg.tasks)
    counts = items.draw(cfg).counts()
    assert sum(counts.values()) == 800
    assert all(abs(counts[t] - 800 * pilot[t] / sum(pilot.values())) < 1 for t in cfg.tasks)


def test_previous_items_are_left_out(data_dir):
    pilot = items.previous_items(PILOT)
    assert len(pilot) == 80 and ("piqa", 3) in pilot
    cfg = ev(
        "eval.tasks=[piqa,boolq]", "eval.limit=30", "eval.sample=first", f"eval.exclude_from={PILOT}", data_dir=data_dir
    )
    assert items.draw(cfg, data_dir=data_dir).first() == {t: list(range(10, 40)) for t in ("piqa", "boolq")}
    rnd = items.draw(
        ev("eval.tasks=[piqa,boolq]", "eval.max_items=400", f"eval.exclude_from={PILOT}", data_dir=data_dir),
        data_dir=data_dir,
    )
    assert not set(rnd.order) & pilot and len(rnd) == 400


@pytest.mark.parametrize(
    "over, message",
    [
        (["eval.sample=last"], "eval.sample='last'"),
        (["eval.allocation=optimal"], "eval.allocation='optimal'"),
        (["eval.allocation=neyman"], "needs eval.neyman_from"),
        ([f"eval.neyman_from={PILOT}"], "eval.allocation=equal"),
        (["eval.exclude_from=/no/such/run"], "eval.exclude_from=/no/such/run is neither"),
        (["eval.looks=[600,300]"], "increasing"),
        (["eval.looks=[600,1200]", "eval.max_items=900"], "over eval.max_items=900"),
        (["eval.spending=linear"], "eval.spending='linear'"),
        (["eval.max_items=0"], "eval.max_items=0 must be >= 1"),
    ],
)
def test_item_keys_are_checked_in_one_line(over, message):
    with pytest.raises(GhostsearchError, match=message) as e:
        load_config(None, over)
    assert "\n" not in str(e.value)


def test_more_items_than_the_tasks_hold_is_one_line_before_model_work(data_dir):
    cfg = ev("eval.tasks=[openbookqa]", "eval.limit=50", "eval.max_items=60", data_dir=data_dir)
    with pytest.raises(GhostsearchError, match="eval.max_items=60 but only 50 items are eligible") as e:
        items.draw(cfg, data_dir=data_dir)
    assert "\n" not in str(e.value)


@pytest.mark.slow
def test_both_engines_evaluate_the_same_drawn_items(smollm2_tokenizer_dir, data_dir):
    """A random draw (not the first items): the native engine's per-item rows carry the drawn row
    numbers, and lm-eval (given them as ``samples``) scores the same items with the same accuracy."""
    import torch
    from transformers import AutoTokenizer

    from ghostsearch.evaluation.evaluate import zero_shot_finalists
    from tests.conftest import tiny_model

    torch.set_num_threads(2)
    model, tok = tiny_model("llama", 4), AutoTokenizer.from_pretrained(smollm2_tokenizer_dir)
    cfg = ev("eval.tasks=[arc_easy,winogrande]", "eval.max_items=10", "eval.batch_size=4", data_dir=data_dir)
    drawn = items.draw(cfg, data_dir=data_dir).first()
    native, rows = zero_shot_finalists(model, tok, [((), None)], cfg, data_dir)
    assert {t: [r.doc for r in rows if r.task == t] for t in drawn} == drawn
    cfg.engine = "lm-eval"
    ref, no_rows = zero_shot_finalists(model, tok, [((), None)], cfg, data_dir)
    assert no_rows == []
    for t in drawn:
        assert ref[0].tasks[t].n == native[0].tasks[t].n == 5
        assert ref[0].tasks[t].acc == native[0].tasks[t].acc, t
