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


def test_a_searchers_own_budget_is_read_in_one_place():
    """search.params.<name>.budget overrides search.budget, and is no parameter of the searcher: the
    cell's searcher, the plan and the memory plan all read it through ``Search.searcher_settings``."""
    from ghostsearch.model.memplan import prefix_runs
    from ghostsearch.study.plan import evaluations, searcher_params

    cfg = load_config(None, ["search.budget=30", "search.params.ga.budget=20", "search.params.beam.width=3"])
    assert cfg.search.searcher_settings("ga") == ({}, 20) and cfg.search.params["ga"] == {"budget": 20}
    assert cfg.search.searcher_settings("bo") == ({}, 30)
    assert build_searcher(cfg, "ga", 3, 0, 12).budget.evaluations == 20
    assert searcher_params(cfg, "ga")[1] == 20 and searcher_params(cfg, "bo")[1] == 30
    assert evaluations(cfg, "ga", 3, 12) == evaluations(load_config(None, ["search.budget=20"]), "ga", 3, 12)
    assert prefix_runs(cfg, ["beam"], [3]) == SEARCHERS.get("beam").prefix_runs(searcher_params(cfg, "beam")[0], 3)
