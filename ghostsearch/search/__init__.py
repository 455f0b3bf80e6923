"""Searchers: which k of the L decoder blocks to remove. ``SEARCHERS`` lists them (base.py)."""

from ghostsearch.search.base import SEARCHERS, Budget, Candidate, Searcher, Space, get_searcher, make_searcher
from ghostsearch.search.loop import FunctionEvaluator, run
from ghostsearch.search.racing import Race, RaceParams

__all__ = [
    "SEARCHERS",
    "Budget",
    "Candidate",
    "FunctionEvaluator",
    "Race",
    "RaceParams",
    "Searcher",
    "Space",
    "get_searcher",
    "make_searcher",
    "run",
]
