"""Study 3's design as the package makes it (study.studies.study3.configure, issue 50: bench/study3.py only
parses and prints): from the committed pilot, the configuration, N, the shrunk SDs and the looks must be
what the study ran with, as its run directory recorded them (docs/results/study-3: config.yaml, study.json)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from ghostsearch.core.errors import GhostsearchError
from ghostsearch.study.studies.study3 import configure, models

ROOT = Path(__file__).resolve().parents[2]
RUN = ROOT / "docs" / "results" / "study-3"


def test_the_design_is_what_the_study_ran(monkeypatch):
    monkeypatch.chdir(ROOT)  # the pilot's path is recorded relative to the repository
    cfg, sets, n, sds, se = configure("configs/study3-gemma3.yaml", [], Path("docs/results/study-3/pilot"))
    ran = json.loads((RUN / "study.json").read_text())
    assert (n, cfg.eval.looks, sds) == (ran["n"], ran["looks"], ran["shrunk_sds"])
    assert se == pytest.approx(ran["planned_se"], rel=1e-12)
    recorded = yaml.safe_load((RUN / "config.yaml").read_text())["eval"]
    for key in ("allocation", "max_items", "neyman_from", "neyman_shrink", "exclude_from", "looks"):
        assert getattr(cfg.eval, key) == recorded[key], key
    # the pilot's sets, as the study's models took them
    assert {m: r for m, (_, r, _) in models(sets).items()} == {m: v["removed"] for m, v in ran["models"].items()}


def test_a_pilot_not_yet_run_is_one_line(tmp_path):
    with pytest.raises(GhostsearchError, match="run the pilot first"):
        configure(str(ROOT / "configs/study3-gemma3.yaml"), [], tmp_path)
