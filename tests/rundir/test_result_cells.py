"""result.json keeps its cells under ``cells`` (by cell name); a run directory written before the
rename keeps them under ``searchers`` (the committed ones in docs/results/ among them), and every
reader takes both."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ghostsearch.core.errors import GhostsearchError
from ghostsearch.rundir import cells, finalists
from ghostsearch.rundir.layout import result_cells

ROOT = Path(__file__).resolve().parents[2]
CELLS = {
    "greedy-perplexity-k2-s0": {"removed": [4, 3], "value": 9.5},
    "beam-perplexity-k2-s0": {"removed": [0, 5], "value": 9.25},
}


@pytest.mark.parametrize("key", ["cells", "searchers"])
def test_cells_read_under_the_new_and_the_old_key(tmp_path, key):
    (tmp_path / "result.json").write_text(json.dumps({key: CELLS, "data": {}}))
    assert cells(tmp_path) == [("greedy-perplexity-k2-s0", (3, 4), 9.5), ("beam-perplexity-k2-s0", (0, 5), 9.25)]
    assert [f[0] for f in finalists(tmp_path)] == ["beam-perplexity-k2-s0", "greedy-perplexity-k2-s0"]


def test_the_new_key_wins_when_both_are_there():
    assert result_cells({"cells": {"a": 1}, "searchers": {"b": 2}}) == {"a": 1}


def test_neither_key_is_not_a_result(tmp_path):
    (tmp_path / "result.json").write_text(json.dumps({"data": {}}))
    with pytest.raises(GhostsearchError, match="is not a ghostsearch result"):
        cells(tmp_path)


def test_the_committed_run_directories_still_read():
    for run in ("study-cpu", "study-cpu-2/s1"):
        got = cells(ROOT / "docs" / "results" / run)
        assert got and all(name and removed for name, removed, _ in got)


def test_the_committed_cells_read_as_typed_records_and_write_back_unchanged():
    """result.json's cells (either key) and RUN_DIR/cells/*.json read as CellResults, and their JSON
    form is the file's own (a field added since, ``race``, is null where the file has none)."""
    from ghostsearch.rundir.cell import CellResult
    from ghostsearch.rundir.layout import read_cells

    for run in ("study-cpu", "study-cpu-2/s1"):
        result = json.loads((ROOT / "docs" / "results" / run / "result.json").read_text())
        got = read_cells(result)
        assert got and all(isinstance(c, CellResult) and name == c.cell for name, c in got.items())
        for name, c in got.items():
            assert c.to_dict() == {"race": None, **result_cells(result)[name]}
    files = sorted((ROOT / "docs" / "results" / "study-cpu-2" / "s1" / "cells").glob("*.json"))
    assert files
    for f in files:
        d = json.loads(f.read_text())
        assert CellResult.from_dict(d).to_dict() == d


def test_a_misspelt_cell_field_fails_at_once():
    from dataclasses import FrozenInstanceError

    from ghostsearch.rundir.cell import CellResult

    c = CellResult(
        cell="greedy-perplexity-k2-s0",
        searcher="greedy",
        objective="perplexity",
        k=2,
        seed=0,
        removed=(3, 4),
        value=9.5,
        evaluations=3,
        budget_used=3.0,
        cache_hits=0,
        wall_seconds=1.0,
    )
    with pytest.raises(AttributeError):
        c.remove  # noqa: B018
    with pytest.raises(FrozenInstanceError):
        c.value = 1.0  # type: ignore[misc]
    with pytest.raises(ValueError, match="not fields of a cell result: valeu"):
        CellResult.from_dict({**c.to_dict(), "valeu": 1.0})
    assert CellResult.from_dict(json.loads(json.dumps(c.to_dict()))) == c


def test_a_grid_cell_is_a_typed_record_named_as_its_result():
    """compare's grid and plan's cells are CellSpecs: their dict form is the four fields, their name
    the committed cells' names, and a foreign key fails at once."""
    from ghostsearch.config import load_config
    from ghostsearch.rundir import cell_name
    from ghostsearch.rundir.cell import CellSpec
    from ghostsearch.study.compare import grid
    from ghostsearch.study.plan import grid_cells

    run = ROOT / "docs" / "results" / "study-cpu"
    specs = grid(load_config(run / "config.yaml"))
    assert specs == grid_cells(load_config(run / "config.yaml"))
    committed = json.loads((run / "result.json").read_text())
    assert {c.name for c in specs} == set(result_cells(committed))
    for c in specs:
        assert c.name == cell_name(**c.to_dict())
        assert CellSpec.from_dict(json.loads(json.dumps(c.to_dict()))) == c
    with pytest.raises(ValueError, match="not fields of a cell: sede"):
        CellSpec.from_dict({**specs[0].to_dict(), "sede": 1})
