"""target's per-window NLLs on a tiny random Llama (loads in milliseconds): each window's value is
that window's own mean per-token NLL whatever the micro-batching (the windows numbered by their
position in the draw across micro-batches), the same with one window per batch, and kept: a second
``Values`` on the same RUN_DIR computes nothing."""

from __future__ import annotations

import numpy as np
import torch

from ghostsearch.config import load_config
from ghostsearch.study.target import Values, eval_cfg, plan


def values(tiny_model_dir, run_dir, batch: int) -> Values:
    cfg = load_config(
        None,
        [
            f"model={tiny_model_dir}",
            "dtype=fp32",
            "eval.perplexity=[lambada]",
            "eval.ppl_seq_len=32",
            f"eval.batch_size={batch}",
            "target.quality.max_ratio=1.25",
            "target.ks=[1]",
            "target.recovery=none",
        ],
    )
    p = plan(cfg, 6)
    return Values(eval_cfg(cfg, p), p, run_dir, {1: [2]}, held_out=("lambada",), progress=False)


def test_window_nlls_are_per_window_and_kept(tiny_model_dir, tmp_path):
    v = values(tiny_model_dir, tmp_path / "a", batch=3)
    v.ensure([0, 1], 7)  # 7 windows in micro-batches of 3, 3, 1
    assert v.computed == 14 and len(v.values[0]) == len(v.values[1]) == 7
    model, _ = v.model
    windows = v.items(7)
    with torch.no_grad():
        for i in range(7):
            ids = windows[i : i + 1]
            logits = model(ids).logits[0, :-1].double()
            ref = torch.nn.functional.cross_entropy(logits, ids[0, 1:]).item()
            assert abs(v.values[0][i] - ref) < 1e-4, (i, v.values[0][i], ref)
    one = values(tiny_model_dir, tmp_path / "b", batch=1)
    one.ensure([0, 1], 7)
    np.testing.assert_allclose(one.values[0], v.values[0], atol=1e-5)
    np.testing.assert_allclose(one.values[1], v.values[1], atol=1e-5)
    assert not np.allclose(v.values[0], v.values[1])  # block 2 removed changes every window
    again = values(tiny_model_dir, tmp_path / "a", batch=3)
    again.ensure([0, 1], 7)
    assert again.computed == 0 and again.model is None and again.values == v.values
    s = again.sample(1, 7)
    np.testing.assert_allclose(s.diff, np.array(v.values[1]) - np.array(v.values[0]))


def test_accuracy_items_are_paired_0_1_with_their_tasks(tiny_model_dir, tmp_path):
    """mean_acc: the run's item draw (RUN_DIR/items.parquet), each item 0/1 (lm-eval's acc) for the dense
    and the pruned model, the tasks as strata; kept like the windows."""
    cfg = load_config(
        None,
        [
            f"model={tiny_model_dir}",
            "dtype=fp32",
            "eval.tasks=[arc_easy,piqa]",
            "target.quality.metric=mean_acc",
            "target.quality.max_drop=0.05",
            "target.ks=[1]",
            "target.looks=[16,32]",  # the first look at least certify.MIN_FIRST_LOOK; 8 items read here
            "target.recovery=none",
        ],
    )
    p = plan(cfg, 6)
    v = Values(eval_cfg(cfg, p), p, tmp_path, {1: [2]}, held_out=(), progress=False)
    s = v.sample(1, 8)
    assert (tmp_path / "items.parquet").exists() and sorted(set(s.strata)) == ["arc_easy", "piqa"]
    assert set(v.values[0]) <= {0.0, 1.0} and len(v.values[1]) == 8
    np.testing.assert_allclose(s.diff, np.array(v.values[0]) - np.array(v.values[1]))
    again = Values(eval_cfg(cfg, p), p, tmp_path, {1: [2]}, held_out=(), progress=False)
    again.ensure([0, 1], 8)
    assert again.computed == 0 and again.values == v.values


def test_values_are_kept_chunk_by_chunk_and_an_interrupted_look_resumes(tiny_model_dir, tmp_path, monkeypatch):
    """ensure computes CHUNK items at a time and keeps each chunk as it ends: a look interrupted in its
    third chunk keeps the first two, and the rerun computes only the rest, to the same values as one
    uninterrupted pass."""
    from ghostsearch.study import target as t

    whole = values(tiny_model_dir, tmp_path / "whole", batch=2)
    whole.ensure([0, 1], 7)
    monkeypatch.setattr(t, "CHUNK", 3)
    v = values(tiny_model_dir, tmp_path / "cut", batch=2)
    real, calls = v._compute, []

    def compute(ks, lo, hi):
        calls.append((lo, hi))
        if len(calls) == 3:
            raise KeyboardInterrupt  # a SIGTERM in the middle of the look
        return real(ks, lo, hi)

    monkeypatch.setattr(v, "_compute", compute)
    try:
        v.ensure([0, 1], 7)
    except KeyboardInterrupt:
        pass
    assert calls == [(0, 3), (3, 6), (6, 7)]
    again = values(tiny_model_dir, tmp_path / "cut", batch=2)
    assert len(again.values[0]) == len(again.values[1]) == 6  # two chunks kept
    again.ensure([0, 1], 7)
    assert again.computed == 2  # one window for each of the two models
    np.testing.assert_allclose(again.values[0], whole.values[0], atol=1e-5)
    np.testing.assert_allclose(again.values[1], whole.values[1], atol=1e-5)
