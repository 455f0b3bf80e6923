"""bench/search.py --matched resumes over sessions: a rerun into the same --out skips the cells its
matched.jsonl already holds at the same calibration size, and starts no pool when nothing is left
(the 64 x 64 cells of issue 27 take 15-35 CPU-minutes each, more than one session holds)."""

from __future__ import annotations

import argparse
import json
import shutil
from pathlib import Path

import pytest
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


def test_docs_benchmarks_quotes_every_matched_table_as_printed():
    """Each matched table in docs/benchmarks.md is what `bench/search.py --table <matched.jsonl>` prints
    from the committed cells (value, budget, reach, wall, set), so a row cannot be edited by hand or
    go stale when a cell is added."""
    bench = load_bench("search")
    root = DONE.parents[2]
    doc = (root / "benchmarks.md").read_text()
    for name in (
        "bench-search/matched-16x32.jsonl",
        "bench-search/matched-8x256.jsonl",
        "bench-race-64/matched.jsonl",
        "bench-race-64-greedy-k8/matched.jsonl",
    ):
        printed = "\n".join(bench.table([str(root / "results" / name)]))
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


def test_into_replaces_its_own_table_and_nothing_else(tmp_path, capsys):
    """--table FILE --into DOC swaps the one table of FILE's calibration for what --table prints now
    (rows added or dropped), leaves the prose and the other tables as they were, and refuses, with the
    file untouched, when the doc has no such table to keep current."""
    bench = load_bench("search")
    lines = bench.table([str(DONE)])
    other = "| calibration | k |\n|---|---|\n| perplexity 8 x 256 | 6 |"
    stale = "\n".join(lines[:3])  # the header, separator and first row only: a table that went stale
    doc = tmp_path / "bench.md"
    doc.write_text(f"# intro\n\n{stale}\n\nprose after\n\n{other}\n")
    bench.into(str(doc), lines)
    assert doc.read_text() == "# intro\n\n" + "\n".join(lines) + f"\n\nprose after\n\n{other}\n"
    assert f"now has {len(lines) - 2} rows (was 1)" in capsys.readouterr().out
    bench.into(str(doc), lines)  # current already: the same file again
    assert doc.read_text().count(lines[2]) == 1
    bare = tmp_path / "bare.md"
    bare.write_text("# no table here\n")
    with pytest.raises(SystemExit, match="0 matched tables"):
        bench.into(str(bare), lines)
    assert bare.read_text() == "# no table here\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bare.md", "bench.md"]  # no temporary file left
    (tmp_path / "empty.jsonl").write_text("")
    with pytest.raises(SystemExit, match="no cells in"):
        bench.table([str(tmp_path / "empty.jsonl")])


def test_a_resumed_cell_shows_no_wall_ratio(tmp_path):
    """A cell resumed from its ledger records resumed: its wall time is the last part only, so the
    table gives no ratio for it, nor for the others against a resumed greedy."""
    bench = load_bench("search")
    rows = [json.loads(x) for x in DONE.read_text().splitlines() if x.strip()]
    for r in rows:
        r["resumed"] = r["searcher"] == "ga" and r["seed"] == 1
    f = tmp_path / "m.jsonl"
    f.write_text("".join(json.dumps(r) + "\n" for r in rows))
    walls = {tuple(x.split("|")[3:5]): x.split("|")[8] for x in bench.table([str(f)])[2:]}
    assert walls[(" ga ", " 1 ")].endswith("(resumed: last part only) ")
    assert walls[(" bo ", " 1 ")].endswith("x) ")  # the others keep their ratio to greedy
    for r in rows:
        r["resumed"] = r["searcher"] == "greedy"
    f.write_text("".join(json.dumps(r) + "\n" for r in rows))
    walls = {tuple(x.split("|")[3:5]): x.split("|")[8] for x in bench.table([str(f)])[2:]}
    assert all(w.endswith("(greedy's resumed) ") for key, w in walls.items() if key[0] != " greedy ")
