"""bench/search.py --matched resumes over sessions: a rerun into the same --out skips the cells its
matched.jsonl already holds at the same calibration size, and starts no pool when nothing is left
(the 64 x 64 cells of issue 27 take 15-35 CPU-minutes each, more than one session holds)."""

from __future__ import annotations

import argparse
import shutil
from pathlib import Path

import ray

from tests.conftest import load_bench

DONE = Path(__file__).resolve().parents[2] / "docs" / "results" / "bench-search" / "matched-16x32.jsonl"


def args(out: Path, **over) -> argparse.Namespace:
    a = dict(
        out=str(out), n_seq=16, seq_len=32, objectives="perplexity", ks="6", seeds="0,1", actors=1,
        searchers="greedy,greedy+race,ga,bo,cbo", greedy_value=None,
    )  # fmt: skip
    return argparse.Namespace(**{**a, **over})


def test_a_rerun_skips_the_cells_done_and_starts_nothing(tmp_path, capsys):
    bench = load_bench("search")
    shutil.copy(DONE, tmp_path / "matched.jsonl")
    before = (tmp_path / "matched.jsonl").read_text()
    rows = bench.matched(args(tmp_path))
    assert not ray.is_initialized()
    assert (tmp_path / "matched.jsonl").read_text() == before  # nothing appended
    got = {(r[2], r[3]): r[4] for r in rows}
    assert got[(0, "greedy")] == got[(0, "ga")] == 204.62542998655414
    assert (1, "greedy") not in got  # greedy takes no seed: seed 0's run stands for seed 1
    assert set(got) == {
        (0, "greedy"),
        (0, "greedy+race"),
        (0, "ga"),
        (0, "bo"),
        (0, "cbo"),
        (1, "ga"),
        (1, "bo"),
        (1, "cbo"),
    }
    assert capsys.readouterr().out.count("done earlier") == 8


def test_cells_at_another_calibration_size_are_not_taken_for_done(tmp_path):
    bench = load_bench("search")
    shutil.copy(DONE, tmp_path / "matched.jsonl")
    assert bench.earlier_cells(str(tmp_path / "matched.jsonl"), 64, 64) == {}
    assert len(bench.earlier_cells(str(tmp_path / "matched.jsonl"), 16, 32)) == 28


def test_docs_benchmarks_quotes_every_matched_table_as_printed(capsys):
    """Each matched table in docs/benchmarks.md is what `bench/search.py --table <matched.jsonl>` prints
    from the committed cells (value, budget, reach, wall, set), so a row cannot be edited by hand or
    go stale when a cell is added."""
    bench = load_bench("search")
    root = DONE.parents[2]
    doc = (root / "benchmarks.md").read_text()
    for name in ("bench-search/matched-16x32.jsonl", "bench-search/matched-8x256.jsonl", "bench-race-64/matched.jsonl"):
        bench.table([str(root / "results" / name)])
        printed = capsys.readouterr().out.rstrip("\n")
        assert printed.count("\n") >= 3, name
        assert printed in doc, f"docs/benchmarks.md does not carry the table of {name} as printed"


def test_an_invocation_for_another_seed_does_not_rerun_greedy(tmp_path, capsys):
    """Greedy takes no seed: an invocation asking for seed 1 alone finds seed 0's greedy run and
    runs it again for nobody (it once did: 15 CPU-minutes of exact greedy at 64 x 64)."""
    bench = load_bench("search")
    shutil.copy(DONE, tmp_path / "matched.jsonl")
    rows = bench.matched(args(tmp_path, seeds="1"))
    assert not ray.is_initialized()
    got = {(r[2], r[3]): r[4] for r in rows}
    assert got[(1, "greedy")] == got[(1, "greedy+race")] == 204.62542998655414
    assert set(got) == {(1, s) for s in ("greedy", "greedy+race", "ga", "bo", "cbo")}
    assert capsys.readouterr().out.count("done earlier") == 5
