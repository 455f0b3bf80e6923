"""Searchers: which k of the L decoder blocks to remove. Importing this package fills the registry."""
from ghostsearch.search.base import (REGISTRY, Budget, Candidate, FunctionEvaluator, Searcher, Space, get_searcher,
                                     make_searcher, register, run)
from ghostsearch.search import beam, bo, cbo, fastblock, ga, lorp, oneshot  # noqa: F401  (register)

__all__ = ["REGISTRY", "Budget", "Candidate", "FunctionEvaluator", "Searcher", "Space", "get_searcher",
           "make_searcher", "register", "run"]
