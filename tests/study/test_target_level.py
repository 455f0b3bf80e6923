"""study.target_level: the populations file is what its committed sources give, and the report's
worst row is the worst population's rate."""

from __future__ import annotations

import json
from pathlib import Path

from ghostsearch.stats.certify_level import load, rate
from ghostsearch.study import target_level

ROOT = Path(__file__).resolve().parents[2]
POPULATIONS = ROOT / "docs" / "results" / "target-level" / "populations.json"


def test_the_committed_populations_are_what_their_sources_give():
    """docs/results/target-level/populations.json, byte for byte, from the run data each names
    (a changed source, or a changed rule of which differences or counts are taken, shows here)."""
    assert json.dumps(target_level.build(ROOT), indent=1) + "\n" == POPULATIONS.read_text()


def test_the_report_gives_each_population_and_the_worst():
    pops = load(POPULATIONS)
    lines = list(target_level.report(pops, 40, ["z"], ["acc"]))
    assert lines[0].endswith("40 replications each")
    assert len(lines) == 1 + len(target_level.LOOKS["acc"]) * (len(pops["acc"]) + 2)
    looks = target_level.LOOKS["acc"][-1]
    rates = [rate(p, looks, correction="z", reps=40)[0] for p in pops["acc"]]
    assert lines[-1].split()[-1] == f"{max(rates):.4f}"
    assert [line[2:62].rstrip() for line in lines[-1 - len(rates) : -1]] == [p.name[:60] for p in pops["acc"]]
