"""The search loop's refusal of a searcher that breaks the ask/tell contract is one GhostsearchError line."""

from __future__ import annotations

import pytest

from ghostsearch.core.errors import GhostsearchError
from ghostsearch.search import FunctionEvaluator, Searcher, Space, run


class Mute(Searcher):
    """Asks nothing, yet is never done."""

    name = "mute"
    ends_by_itself = True

    def ask(self):
        return []

    @property
    def done(self) -> bool:
        return False


def test_a_searcher_that_asks_nothing_but_is_not_done_is_one_line():
    with pytest.raises(GhostsearchError, match="searcher 'mute' asked nothing but is not done") as e:
        run(Mute(Space(6, 2)), FunctionEvaluator(lambda r, f: float(sum(r))))
    assert "\n" not in str(e.value)
