"""No module decides something by a searcher's name (issue 39): a searcher's traits live on its class
(``Searcher.uses_prefix``, ``objective_blind``, ``cost_class``, ``expected_evaluations``,
``blocks_run``, ``prefix_runs``, ``same_set_for_every_objective``, ``races``,
``conformance_variants``), so a new searcher is one file plus its registry line and plan, memplan,
claims and the suites that cover every searcher pick it up.

Checked from the source with ``ast``: outside a searcher's own module (and the registry's table), no
comparison with a searcher's name (``s == "greedy"``, ``s in ("ga", "bo")``), no literal tuple, list,
set or dict keys of two or more searcher names (a hand-kept list), and no ``.get("beam")`` or
``x["lorp"]`` lookup by one, and no call given one as an argument (``make_searcher("greedy")``,
``Case("ga+endgame", "ga", ...)``). The package is checked whole. The suites that cover every searcher
(``SUITES``: every test module that loops over ``SEARCHERS.names()``) and every bench/ script are
checked for switches (comparisons) and plain name lists; a table of parameters by searcher (a case's
data, e.g. a quicker sampler) is allowed there, and other tests name searchers as the data of a
particular case, which is fine. A bench script that names the arms of a pre-registered study (its
design, not a switch) is listed in ``DESIGNS`` with why."""

from __future__ import annotations

import ast
import functools
import sys
from pathlib import Path

from ghostsearch.search import SEARCHERS

ROOT = Path(__file__).resolve().parents[2]
SUITES = sorted(
    str(p.relative_to(ROOT))
    for p in (ROOT / "tests").rglob("test_*.py")
    if "SEARCHERS.names()" in p.read_text() and p.resolve() != Path(__file__).resolve()
)
BENCH = sorted(str(p.relative_to(ROOT)) for p in (ROOT / "bench").glob("*.py"))

# (bench script, the searcher names a place in it holds) -> why: a study's design names its arms.
# test_designs_are_current fails on an entry that no longer occurs, so the list only shrinks.
MATCHED_VARIANTS = "the matched comparison's pre-registered variants (ga with its endgame, cbo untransformed)"
STUDY3 = "study 3's models are the pilot's sets of the searchers it names (pre-registered)"
DESIGNS: dict[tuple[str, tuple[str, ...]], str] = {
    ("ghostsearch/study/studies/ghosted.py", ("fastblock", "greedy")): "the Ghosted study's two arms (docs/results.md)",
    ("ghostsearch/study/studies/ghosted.py", ("greedy",)): "the saturation rows take the greedy arm's set",
    ("ghostsearch/study/matched.py", ("ga",)): MATCHED_VARIANTS,
    ("ghostsearch/study/matched.py", ("cbo",)): MATCHED_VARIANTS,
    ("ghostsearch/study/report/study_table.py", ("lorp",)): "the LoRP paper's claim: lorp against its baselines",
    ("ghostsearch/study/adaptive.py", ("greedy",)): "design three's arms are greedy's k = 8 set (pre-registered)",
    ("ghostsearch/study/studies/study2.py", ("greedy",)): "claim S1 is pre-registered on greedy's k = 8 sets",
    ("ghostsearch/study/studies/study3.py", ("fastblock",)): STUDY3,
    ("ghostsearch/study/studies/study3.py", ("lorp",)): STUDY3,
    ("ghostsearch/study/studies/study3.py", ("shortgpt",)): STUDY3,
    ("ghostsearch/study/studies/study3.py", ("streamline",)): STUDY3,
    ("ghostsearch/study/report/study_table.py", ("shortgpt", "streamline")): "the LoRP paper's baselines of its claim",
    ("bench/scale.py", ("greedy",)): "--parts names (throughput, greedy, ga, bo): each part a particular case",
    ("bench/scale.py", ("ga",)): "--parts names (throughput, greedy, ga, bo): each part a particular case",
    ("bench/scale.py", ("bo",)): "--parts names (throughput, greedy, ga, bo): each part a particular case",
}


def names_in(node: ast.AST, names: set[str]) -> list[str]:
    if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in names:
        return [node.value]
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return [n for e in node.elts for n in names_in(e, names)]
    return []


def _is_name(node: ast.AST, names: set[str]) -> bool:
    return isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in names


def decisions(tree: ast.AST, names: set[str], suite: bool = False) -> list[tuple[int, list[str]]]:
    """(line, searcher names) of every place that decides by a searcher's name (module docstring above);
    ``suite``: a test suite's rules (comparisons and lists made of names only)."""
    skip = {  # the registry's own table: Registry("searcher", {...})
        id(a)
        for n in ast.walk(tree)
        if isinstance(n, ast.Call) and getattr(n.func, "id", None) == "Registry"
        for a in n.args
    }
    out = []
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        hits: list[str] = []
        if isinstance(node, ast.Compare):
            hits = [n for c in (node.left, *node.comparators) for n in names_in(c, names)]
        elif isinstance(node, (ast.Tuple, ast.List, ast.Set)):
            pure = not suite or all(isinstance(e, ast.Constant) and e.value in names for e in node.elts)
            hits = names_in(node, names) if pure and len(names_in(node, names)) >= 2 else []
        elif suite:
            continue
        elif isinstance(node, ast.Dict):
            keys = [n for k in node.keys if k is not None for n in names_in(k, names)]
            hits = keys if len(keys) >= 2 else []
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in ("get", "pop"):
            hits = names_in(node.args[0], names) if node.args else []
        elif isinstance(node, ast.Call):  # a searcher named as an argument: make_searcher("greedy"), Case(.., "ga")
            hits = [a.value for a in (*node.args, *(k.value for k in node.keywords)) if _is_name(a, names)]
        elif isinstance(node, ast.Subscript):
            hits = names_in(node.slice, names)
        if hits:
            out.append((node.lineno, hits))
    return out


def own_module(name: str) -> Path:
    return Path(sys.modules[SEARCHERS.get(name).__module__].__file__).resolve()


@functools.cache
def found() -> list[tuple[str, int, tuple[str, ...]]]:
    """(file, line, names) of every decision by name in the package, the suites and bench/."""
    names = set(SEARCHERS.names())
    own = {own_module(n): n for n in names}
    files = sorted((ROOT / "ghostsearch").rglob("*.py")) + [ROOT / s for s in SUITES + BENCH]
    out = []
    for path in files:
        suite = not path.is_relative_to(ROOT / "ghostsearch")
        for line, hits in decisions(ast.parse(path.read_text()), names, suite):
            if set(hits) - {own.get(path.resolve())}:
                out.append((str(path.relative_to(ROOT)), line, tuple(sorted(set(hits)))))
    return out


def test_no_module_suite_or_bench_decides_by_a_searcher_name():
    bad = [f"{f}:{line}: {list(hits)}" for f, line, hits in found() if (f, hits) not in DESIGNS]
    assert bad == [], "decide by a trait on the searcher's class (search/base.py Searcher), not by its name"


def test_designs_are_current():
    here = {(f, hits) for f, _, hits in found()}
    assert [d for d in DESIGNS if (ROOT / d[0]).exists() and d not in here] == []


def test_the_suites_include_the_ones_over_every_searcher():
    assert {"tests/search/test_search_conformance.py", "tests/study/test_budgets.py"} <= set(SUITES)


def test_the_check_finds_a_switch_on_names():
    """The check can fail: the switches plan.py, memplan.py and claims.py held before (issue 39)."""
    names = set(SEARCHERS.names())
    before = """
SEARCH_INDEPENDENT = ("fastblock", "streamline", "lorp")
def blocks_run(searcher, k, n):
    if searcher in ("greedy", "beam"):
        return n / 2
    width = int((params.get("beam") or {}).get("width", 4)) if searcher == "beam" else 1
    return {"ga": 40, "bo": 40}.get(searcher)
VARIANTS = (Case("ga+endgame", "ga", {"endgame": 0.25}), Case("x", searcher="cbo"))
"""
    found = decisions(ast.parse(before), names)
    assert sorted(line for line, _ in found) == [2, 4, 4, 6, 6, 7, 8, 8]
    ok = 'SEARCHERS = Registry("searcher", {"ga": "m:GA", "bo": "m:BO"})\nPROBE = "shortgpt"\n'
    assert decisions(ast.parse(ok), names) == []
    suite = 'PARAMS = {"beam": {"width": 2}, "bo": {}}\nfor n in ("ga", "bo"): pass\nif n == "bo": pass\n'
    assert sorted(line for line, _ in decisions(ast.parse(suite), names, suite=True)) == [2, 3]
