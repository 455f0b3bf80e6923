"""The ``timing`` mark of the tests of `ghostsearch plan` (tests/study/test_plan*.py).

``timing``: a test that asserts a wall-clock ratio (plan against a run) runs only with
GHOSTSEARCH_TIMING_TESTS=1, on a machine whose load the two measurements share: on a loaded shared
CI runner the load moves every part 2-3x between runs, and a test that fails for that reason says
nothing about the plan (issue 26: no wall-clock limits in CI). bench/plan_check.py prints the same
ratios; docs/benchmarks.md (planning) quotes them."""

from __future__ import annotations

import os

import pytest

timing = pytest.mark.skipif(
    not os.environ.get("GHOSTSEARCH_TIMING_TESTS"),
    reason="a wall-clock ratio: GHOSTSEARCH_TIMING_TESTS=1 on an unloaded machine runs it",
)
