"""The first hour of ``target`` (issue 48): after the search, the repair fits and the looks printed nothing
for 11 minutes on SmolLM2. Each phase now has a bar on the search's machinery (tqdm, ``study.target.Bar``):
the repair fits with their count (and tqdm's ETA), each look per model set ("look 1/2 (16 windows): dense,
k=1", moving a micro-batch at a time) and the speed timing's rounds (its bar: tests/target/test_target_signals.py,
which waits for each phase's bar). On the tiny random Llama."""

from __future__ import annotations

import logging
import re

import pytest

from ghostsearch.config import load_config
from ghostsearch.study.target import Values, eval_cfg, plan

pytestmark = pytest.mark.slow  # ~5 s: LAMBADA tokenized twice (the draw, the repair calibration), a fit, 32 windows


def test_every_phase_after_the_search_shows_its_progress(tiny_model_dir, tmp_path, capsys, caplog):
    cfg = load_config(
        None,
        [
            f"model={tiny_model_dir}",
            "dtype=fp32",
            "eval.perplexity=[lambada]",
            "eval.ppl_seq_len=16",
            "eval.batch_size=8",
            "recovery.n_seq=4",
            "recovery.seq_len=32",
            "target.quality.max_ratio=1.25",
            "target.ks=[1,2]",
            "target.looks=[16,32]",
        ],
    )
    p = plan(cfg, 6)
    v = Values(eval_cfg(cfg, p), p, tmp_path, {1: [2], 2: [2, 4]}, held_out=("lambada",), progress=True)
    with caplog.at_level(logging.INFO, logger="ghostsearch"):
        v.ensure([0, 1], 16)
    err = capsys.readouterr().err.replace("\r", "\n")
    assert "fitting ghosted for k = [1, 2] (one dense pass over 4 x 32 repair tokens, then a fit per k)" in caplog.text
    assert re.search(r"repair ghosted: 100%.*\| 2/2 \[", err), err[-2000:]  # the count of fits, done
    assert re.search(r"repair ghosted: +50%.*\| 1/2 \[.*<", err), err[-2000:]  # half-way, with an ETA
    look = [x for x in err.splitlines() if x.startswith("look 1/2 (16 windows): dense, k=1")]
    assert look and "32/32" in look[-1], err[-2000:]  # 16 windows x 2 models
    assert len(look) >= 2, err[-2000:]  # it moved before the end: a micro-batch at a time (2 batches of 8)
