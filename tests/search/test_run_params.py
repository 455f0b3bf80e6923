"""A searcher says which of its parameters point into the run directory (``Searcher.run_params``):
the runner no longer knows bo's Optuna ``storage`` by name."""

from __future__ import annotations

from ghostsearch.config import build_searcher, load_config
from ghostsearch.search import SEARCHERS


def test_a_searcher_keeps_its_files_in_the_run_directory(tmp_path):
    cfg = load_config(None, ["search.params.bo.sampler=tpe"])
    assert build_searcher(cfg, "bo", 3, 0, 12, run_dir=tmp_path, cell="c1").params.storage == str(
        tmp_path / "optuna-c1.log"
    )
    assert build_searcher(cfg, "bo", 3, 0, 12).params.storage is None  # no run directory, no journal
    own = load_config(None, [f"search.params.bo.storage={tmp_path / 'mine.log'}"])
    assert build_searcher(own, "bo", 3, 0, 12, run_dir=tmp_path, cell="c1").params.storage == str(tmp_path / "mine.log")
    for name in SEARCHERS.names():  # the others add nothing (an added unknown parameter would be refused)
        assert build_searcher(cfg, name, 3, 0, 12, run_dir=tmp_path, cell=name).name == name
