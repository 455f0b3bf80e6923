"""result.json keeps its cells under ``cells`` (by cell name); a run directory written before the
rename keeps them under ``searchers`` (the committed ones in docs/results/ among them), and every
reader takes both."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from ghostsearch.errors import GhostsearchError
from ghostsearch.rundir import cells, finalists
from ghostsearch.rundir.layout import result_cells

ROOT = Path(__file__).resolve().parents[2]
CELLS = {"greedy-perplexity-k2-s0": {"removed": [4, 3], "value": 9.5},
         "beam-perplexity-k2-s0": {"removed": [0, 5], "value": 9.25}}


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
