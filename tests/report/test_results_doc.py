"""docs/results.md quotes the study's computed output: every claims table in it is what
bench/study_table.py and bench/ghosted_study.py print from the committed Parquet files under
docs/results/ (so a number in a verdict row cannot be edited by hand, or go stale)."""

from __future__ import annotations

import contextlib
import io
from pathlib import Path

import pytest

from tests.conftest import load_bench

ROOT = Path(__file__).resolve().parents[2]
RUN = ROOT / "docs" / "results" / "study-cpu"


def _bench(name: str):
    return load_bench(name)


def _table_rows(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.startswith("| ") and line.count("|") >= 6]


@pytest.mark.skipif(not (RUN / "comparison.parquet").exists(), reason="no committed study run")
def test_results_doc_quotes_the_computed_claims():
    doc = (ROOT / "docs" / "results.md").read_text()
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        _bench("study_table").main(str(RUN))
    rows = [r for r in _table_rows(out.getvalue()) if " holds " in r or "within noise" in r or "not hold" in r]
    assert rows, "study_table printed no claims"
    missing = [r for r in rows if r not in doc]
    assert not missing, f"{len(missing)} computed claim rows are not in docs/results.md, e.g. {missing[0]}"
    if (RUN / "ghosted.parquet").exists():
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            _bench("ghosted_study").print_claims(RUN / "ghosted")
        rows = _table_rows(out.getvalue())[2:]
        missing = [r for r in rows if r not in doc]
        assert not missing, f"{len(missing)} Ghosted claim rows are not in docs/results.md, e.g. {missing[0]}"


def test_results_doc_quotes_study_2s_s1():
    """Study 2's S1 section is what bench/study2.py --s1 prints from the committed compare
    (docs/results/study-cpu-2/s1: every cell's removed set, the Jaccard gap, the exact p)."""
    study2 = _bench("study2")
    printed = study2.s1(ROOT / "docs" / "results" / "study-cpu-2" / "s1")
    doc = (ROOT / "docs" / "results.md").read_text()
    assert printed in doc
    assert "exact permutation p = 0.0286 over 70 relabellings" in printed


def test_results_doc_quotes_study_2s_cheap_claims():
    """Study 2's S2-S4 section is what bench/study2_cheap.py --report-only prints from the committed
    per-window rows (docs/results/study-cpu-2/cheap) and S1's run: perplexities, differences,
    intervals, TOST and Holm p, verdicts."""
    out = ROOT / "docs" / "results" / "study-cpu-2" / "cheap"
    if not any(out.glob("*.parquet")):
        pytest.skip("no committed S2-S4 rows")
    sc = _bench("study2_cheap")
    printed = sc.render(sc.numbers(out, sc.Design(), ROOT / "docs" / "results" / "study-cpu-2" / "s1"), sc.Design())
    doc = (ROOT / "docs" / "results.md").read_text()
    assert printed.rstrip("\n") in doc


def test_results_doc_quotes_study_2s_contrasts():
    """Study 2's C1-C7 table is what bench/study2.py --report-only prints from the committed
    per-item rows and looks.json (docs/results/study-cpu-2): each contrast's estimate, its interval at
    the level the sequential Holm rule held it to, the look, the items, the verdict."""
    import json

    run = ROOT / "docs" / "results" / "study-cpu-2"
    if not (run / "looks.json").exists():
        pytest.skip("no look of C1-C7 committed")
    study2 = _bench("study2")
    keys = {m: spec["eval_key"] for m, spec in json.loads((run / "study.json").read_text())["models"].items()}
    assert set(keys) == set(study2.MODELS)
    printed = study2.report(run, keys)
    doc = (ROOT / "docs" / "results.md").read_text()
    assert printed.rstrip("\n") in doc
