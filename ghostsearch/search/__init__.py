"""Searchers: which k of the L decoder blocks to remove. ``SEARCHERS`` lists them (base.py)."""
from ghostsearch.search.base import (SEARCHERS, Budget, Candidate, FunctionEvaluator, Searcher, Space, get_searcher,
                                     make_searcher, run)

__all__ = ["SEARCHERS", "Budget", "Candidate", "FunctionEvaluator", "Searcher", "Space", "get_searcher",
           "make_searcher", "run"]
