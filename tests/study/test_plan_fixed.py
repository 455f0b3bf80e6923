"""`plan`'s whole-run time beyond scoring (issue 25): the finalist count, the evaluation model built
from a probe's two timings, what a plan without --measure says it does not count, and the report's
timing over a stand-in grid."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from ghostsearch.config import load_config
from ghostsearch.study.plan import EvalProbe, command_of, distinct_sets, evaluation_from_probe, grid_cells, plan_run

ROOT = Path(__file__).resolve().parents[2]
QUICK = str(ROOT / "configs/smollm2-quick.yaml")
COMPARE = str(ROOT / "configs/compare-quick.yaml")


def test_command_and_distinct_sets():
    assert command_of(load_config(QUICK)) == "search"
    cfg = load_config(COMPARE)
    assert command_of(cfg) == "compare"
    assert len(grid_cells(cfg)) == 4
    # fastblock's set depends on the objective, LoRP's (similarity of the perplexity text) does not
    assert distinct_sets(cfg, grid_cells(cfg)) == 3
    own = load_config(COMPARE, ["search.params.lorp.similarity_source=objective"])
    assert distinct_sets(own, grid_cells(own)) == 4


def test_evaluation_from_probe_by_hand():
    cfg = load_config(COMPARE, ["pool.actors=2", "eval.share=8"])
    p = plan_run(cfg)  # no --measure: the shape and the evaluation's items
    # a probe of the whole evaluation (all items, all windows): no scaling. 2 models (none, ghosted) cost
    # 30 - 20 = 10 s over the dense pass, 5 s each; 3 sets x 2 repairs = 6 models + dense in 2 shares
    probe = EvalProbe(items=20, of_items=20, windows=4, models=2, dense_s=20.0, share_s=30.0)
    seconds, note = evaluation_from_probe(cfg, p.shape, p.evaluation, probe, 3)
    assert seconds == pytest.approx(20.0 + 3 * 5.0)
    assert "2 share(s), 1 wave(s) of 3 model(s)" in note
    # one scorer: one share, all 6 models after the dense pass
    one = load_config(COMPARE, ["pool.actors=1"])
    assert evaluation_from_probe(one, p.shape, p.evaluation, probe, 3)[0] == pytest.approx(20.0 + 6 * 5.0)
    # eval.share=2 on 2 scorers: 4 shares of at most 2 models, 2 waves
    small = load_config(COMPARE, ["pool.actors=2", "eval.share=2"])
    assert evaluation_from_probe(small, p.shape, p.evaluation, probe, 3)[0] == pytest.approx(2 * (20.0 + 2 * 5.0))
    # half the windows timed: both parts scale up by their FLOPs
    half = dataclasses.replace(probe, windows=2)
    assert evaluation_from_probe(cfg, p.shape, p.evaluation, half, 3)[0] > 1.5 * seconds


def test_plan_without_measure_says_what_it_does_not_count():
    from ghostsearch.study.plan import format_plan

    cfg = load_config(COMPARE)
    p = plan_run(cfg)
    assert set(p.fixed) == {"start"} and "stated" in p.fixed["start"].note
    assert p.not_counted == ["process", "checks", "cells", "stop", "report"]
    assert p.compare_wall_s == pytest.approx(p.wall_s + p.startup_s + p.evaluation_s)
    out = format_plan(cfg, p)
    assert "the process's start and imports" in out and "the report (plan --measure times them" in out
    assert "at the FLOP rate" in out


@pytest.mark.slow
def test_report_timed_over_a_stand_in_grid():
    from ghostsearch.study.plan import measure_report

    cfg = load_config(COMPARE)
    assert measure_report(cfg, 30, None) > 0
