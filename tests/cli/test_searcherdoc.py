"""The lists of searchers in README.md and docs/ are generated from the registry and the classes'
traits (ghostsearch/cli/searcherdoc.py): this fails when one goes stale (a searcher added, renamed
or given another trait without `python -m ghostsearch.cli.searcherdoc`)."""

import pytest

from ghostsearch.cli import searcherdoc


def test_every_list_matches_the_registry():
    assert searcherdoc.main(["--check"]) == 0, "run python -m ghostsearch.cli.searcherdoc"


def test_every_file_has_lists_and_every_kind_is_used():
    texts = [(searcherdoc.ROOT / f).read_text() for f in searcherdoc.FILES]
    kinds = {m.group("kind") for t in texts for m in searcherdoc.SPAN.finditer(t)}
    assert all(searcherdoc.SPAN.search(t) for t in texts) and kinds == set(searcherdoc.LISTS)


def test_check_catches_a_stale_list(monkeypatch):
    monkeypatch.setitem(searcherdoc.LISTS, "budget-driven", lambda: "ga, bo, cbo and a new one")
    assert searcherdoc.main(["--check"]) == 1


def test_an_unknown_list_is_refused():
    with pytest.raises(ValueError, match="unknown searcher list 'nope'"):
        searcherdoc.render("<!-- searchers:nope -->x<!-- /searchers -->", "f.md")
