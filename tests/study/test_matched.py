"""The matched comparison (ghostsearch.study.matched, bench/search.py --matched) on its committed
cells: the cases from the registry's traits, reach at 1.0001x, the resume rule of matched.jsonl (a
rerun into the same --out skips the cells it already holds at the same calibration size, and starts no
pool when nothing is left: the 64 x 64 cells of issue 27 take 15-35 CPU-minutes each, more than one
session holds), each cell's line, and the docs' table."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import ray

from ghostsearch.study import matched as m

RESULTS = Path(__file__).resolve().parents[2] / "docs" / "results"
DONE = RESULTS / "bench-search" / "matched-16x32.jsonl"
FILES = sorted(RESULTS.glob("*/matched*.jsonl"))


def run(out: Path, **over) -> list[m.Row]:
    a = dict(
        n_seq=16, seq_len=32, objectives=["perplexity"], ks=[6], seeds=[0, 1], actors=1,
        searchers=["greedy", "greedy+race", "ga", "bo", "cbo"], greedy_value=None,
    )  # fmt: skip
    return m.run(str(out), **{**a, **over})


def test_a_rerun_skips_the_cells_done_and_starts_nothing(tmp_path, capsys):
    shutil.copy(DONE, tmp_path / "matched.jsonl")
    before = (tmp_path / "matched.jsonl").read_text()
    rows = run(tmp_path)
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
    shutil.copy(DONE, tmp_path / "matched.jsonl")
    assert m.earlier_cells(str(tmp_path / "matched.jsonl"), 64, 64) == {}
    assert len(m.earlier_cells(str(tmp_path / "matched.jsonl"), 16, 32)) == 28


def test_docs_benchmarks_quotes_every_matched_table_as_printed():
    """Each matched table in docs/benchmarks.md is what `bench/search.py --table <matched.jsonl>` prints
    from the committed cells (value, budget, reach, wall, set), so a row cannot be edited by hand or
    go stale when a cell is added."""
    root = DONE.parents[2]
    doc = (root / "benchmarks.md").read_text()
    for name in (
        "bench-search/matched-16x32.jsonl",
        "bench-search/matched-8x256.jsonl",
        "bench-race-64/matched.jsonl",
        "bench-race-64-greedy-k8/matched.jsonl",
    ):
        printed = "\n".join(m.table([str(root / "results" / name)]))
        assert printed.count("\n") >= 3, name
        assert printed in doc, f"docs/benchmarks.md does not carry the table of {name} as printed"


def test_an_invocation_for_another_seed_does_not_rerun_greedy(tmp_path, capsys):
    """Greedy takes no seed: an invocation asking for seed 1 alone finds seed 0's greedy run and
    runs it again for nobody (it once did: 15 CPU-minutes of exact greedy at 64 x 64)."""
    shutil.copy(DONE, tmp_path / "matched.jsonl")
    rows = run(tmp_path, seeds=[1])
    assert not ray.is_initialized()
    got = {(r[2], r[3]): r[4] for r in rows}
    assert got[(1, "greedy")] == got[(1, "greedy+race")] == 204.62542998655414
    assert set(got) == {(1, s) for s in ("greedy", "greedy+race", "ga", "bo", "cbo")}
    assert capsys.readouterr().out.count("done earlier") == 5


def test_into_replaces_its_own_table_and_nothing_else(tmp_path):
    """--table FILE --into DOC swaps the one table of FILE's calibration for what --table prints now
    (rows added or dropped), leaves the prose and the other tables as they were, and refuses, with the
    file untouched, when the doc has no such table to keep current."""
    lines = m.table([str(DONE)])
    other = "| calibration | k |\n|---|---|\n| perplexity 8 x 256 | 6 |"
    stale = "\n".join(lines[:3])  # the header, separator and first row only: a table that went stale
    doc = tmp_path / "bench.md"
    doc.write_text(f"# intro\n\n{stale}\n\nprose after\n\n{other}\n")
    said = m.into(str(doc), lines)
    assert doc.read_text() == "# intro\n\n" + "\n".join(lines) + f"\n\nprose after\n\n{other}\n"
    assert f"now has {len(lines) - 2} rows (was 1)" in said
    m.into(str(doc), lines)  # current already: the same file again
    assert doc.read_text().count(lines[2]) == 1
    variant = [*lines[:2], lines[2].replace("| greedy |", "| ga+endgame |")]  # another comparison, same key
    other_doc = tmp_path / "variant.md"
    other_doc.write_text("\n".join(variant) + "\n")
    with pytest.raises(SystemExit, match="0 matched tables"):
        m.into(str(other_doc), lines)
    assert other_doc.read_text() == "\n".join(variant) + "\n"
    other_doc.unlink()
    bare = tmp_path / "bare.md"
    bare.write_text("# no table here\n")
    with pytest.raises(SystemExit, match="0 matched tables"):
        m.into(str(bare), lines)
    assert bare.read_text() == "# no table here\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bare.md", "bench.md"]  # no temporary file left
    (tmp_path / "empty.jsonl").write_text("")
    with pytest.raises(SystemExit, match="no cells in"):
        m.table([str(tmp_path / "empty.jsonl")])


def test_a_resumed_cell_shows_no_wall_ratio(tmp_path):
    """A cell resumed from its ledger records resumed: its wall time is the last part only, so the
    table gives no ratio for it, nor for the others against a resumed greedy."""
    rows = [json.loads(x) for x in DONE.read_text().splitlines() if x.strip()]
    for r in rows:
        r["resumed"] = r["searcher"] == "ga" and r["seed"] == 1
    f = tmp_path / "m.jsonl"
    f.write_text("".join(json.dumps(r) + "\n" for r in rows))
    walls = {tuple(x.split("|")[3:5]): x.split("|")[8] for x in m.table([str(f)])[2:]}
    assert walls[(" ga ", " 1 ")].endswith("(resumed: last part only) ")
    assert walls[(" bo ", " 1 ")].endswith("x) ")  # the others keep their ratio to greedy
    for r in rows:
        r["resumed"] = r["searcher"] == "greedy"
    f.write_text("".join(json.dumps(r) + "\n" for r in rows))
    walls = {tuple(x.split("|")[3:5]): x.split("|")[8] for x in m.table([str(f)])[2:]}
    assert all(w.endswith("(greedy's resumed) ") for key, w in walls.items() if key[0] != " greedy ")


def test_the_cases_come_from_the_traits_so_a_new_searcher_runs_matched_with_no_edit():
    """A plug-in is a case by its class alone: a budget-driven one once (greedy's cost, in the default
    set), one that ends by itself and races twice (exact, not default; raced, default), an
    objective-blind one not at all; the reference stays first and the variants last. Every label of
    the committed matched.jsonl files is still a case (a rerun finds its cells)."""
    from ghostsearch.search import SEARCHERS
    from ghostsearch.search.beam import Beam
    from ghostsearch.search.ga import GA
    from ghostsearch.search.oneshot import OneShot

    class Driven(GA):
        name = "driven"

    class Walker(Beam):
        name = "walker"

    class Blind(OneShot):
        name = "blind"
        objective_blind = True

    before = m.cases()
    for cls in (Driven, Walker, Blind):
        SEARCHERS.add(cls.name, cls)
    m.cases.cache_clear()
    try:
        got = {c.label: c for c in m.cases()}
        assert got["driven"] == m.Case("driven", "driven", {}, True)
        assert got["walker"] == m.Case("walker", "walker", {"race": False}, False)
        assert got["walker+race"] == m.Case("walker+race", "walker", {"race": True}, True)
        assert "blind" not in got and "blind+race" not in got
        assert m.labels()[0] == m.REFERENCE and m.labels()[-2:] == [v.label for v in m.VARIANTS]
        assert {"driven", "walker+race"} <= set(m.default_labels()) and "walker" not in m.default_labels()
        assert not m.deterministic("driven") and m.deterministic("walker+race")  # GA draws, Beam does not
    finally:
        for cls in (Driven, Walker, Blind):
            SEARCHERS.remove(cls.name)
        m.cases.cache_clear()
    assert m.cases() == before
    committed = {json.loads(x)["searcher"] for f in FILES for x in f.read_text().splitlines() if x.strip()}
    assert committed and committed <= set(m.labels())


def test_reach_is_the_first_budget_within_1_0001x_of_either_sign():
    h = [{"budget_used": b, "best_value": v} for b, v in ((1, None), (2, 100.5), (5, 100.011), (9, 100.009), (12, 99))]
    assert m.reach(h, 100.0) == 9  # 100.011 is over 1.0001x, 100.009 within it; the first such budget
    assert m.reach(h, 99.0) == 12 and m.reach(h, 98.0) is None
    neg = [{"budget_used": b, "best_value": v} for b, v in ((3, -1.9997), (4, -1.99985))]
    assert m.reach(neg, -2.0) == 4  # within 1e-4 of |-2|: -1.9998 is the bound
    rows = [json.loads(x) for x in DONE.read_text().splitlines() if x.strip()]
    greedy = next(r for r in rows if r["searcher"] == "greedy" and r["k"] == 6)
    ga = next(r for r in rows if r["searcher"] == "ga" and r["k"] == 6 and r["seed"] == 0)
    at = m.reach(ga["history"], greedy["value"])
    assert at is not None and at <= ga["budget_used"]
    before = [h["best_value"] for h in ga["history"] if h["budget_used"] < at and h["best_value"] is not None]
    assert before and all(v > greedy["value"] * 1.0001 for v in before)  # none reached it earlier


def test_a_cells_line_is_what_the_committed_files_hold():
    """cell_line's keys (and their order) are the committed lines', and cutting a history to its
    improvements keeps an already-cut one as it is; a flat stretch keeps its first entry and the last."""
    f = RESULTS / "bench-race-64-greedy-k8" / "matched.jsonl"
    for r in (json.loads(x) for x in f.read_text().splitlines() if x.strip()):
        line = m.cell_line(
            r, objective=r["objective"], k=r["k"], seed=r["seed"], label=r["searcher"], cost=r["greedy_cost"],
            n_seq=r["n_seq"], seq_len=r["seq_len"], resumed=r["resumed"],
        )  # fmt: skip
        assert list(line) == list(r) and line == r
    h = [{"budget_used": i, "best_value": v} for i, v in enumerate([5.0, 5.0, 4.0, 4.0, 4.0, 3.0, 3.0])]
    assert [x["budget_used"] for x in m.improvements(h)] == [0, 2, 5, 6]
