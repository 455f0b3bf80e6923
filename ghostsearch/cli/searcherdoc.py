"""Lists of searchers in the docs, generated from the registry and the classes' traits (as
docs/config.md is from config.py), so a new searcher appears in them and none goes stale.

A list is a span ``<!-- searchers:KIND -->...<!-- /searchers -->`` in a markdown file of ``FILES``
(an HTML comment: it does not show when rendered); KIND is one of ``LISTS``.

  python -m ghostsearch.cli.searcherdoc            # rewrite every span
  python -m ghostsearch.cli.searcherdoc --check    # exit 1 when a span differs from the code
"""

from __future__ import annotations

import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ghostsearch.search import SEARCHERS, Space
from ghostsearch.search.common import ModelBased

ROOT = Path(__file__).resolve().parents[2]
FILES = ["README.md", "docs/searchers.md", "docs/compare.md", "docs/architecture.md"]
SPAN = re.compile(r"<!-- searchers:(?P<kind>[\w-]+) -->(?P<body>.*?)<!-- /searchers -->", re.S)
# the space the numbers are computed on: k = 6 of SmolLM2's 30 blocks, the first and last protected
SPACE = Space(30, 6, frozenset({0, 29}))


def names(keep: Callable[[Any], bool] = lambda cls: True) -> list[str]:
    return [n for n in SEARCHERS.names() if keep(SEARCHERS.get(n))]


def budget_driven(cls) -> bool:
    """It would search for ever: the run's budget, or its ``default_budget``, ends it."""
    return cls.default_budget(SPACE, cls.parse_params({})) is not None


def words(items: list[str], code: bool = False) -> str:
    items = [f"`{n}`" if code else n for n in items]
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def min_budgets() -> str:
    return ", ".join(f"{n} {SEARCHERS.get(n).min_budget(SPACE, SEARCHERS.get(n).parse_params({})):g}" for n in names())


LISTS: dict[str, Callable[[], str]] = {
    "all": lambda: words(names(), code=True),
    "budget-driven": lambda: words(names(budget_driven)),
    "ends-by-itself": lambda: words(names(lambda c: c.ends_by_itself)),
    "races": lambda: words(names(lambda c: c.races())),
    "model-based": lambda: words(names(lambda c: issubclass(c, ModelBased))),
    "no-seed": lambda: words(names(lambda c: not c.uses_seed)),
    "uses-prefix": lambda: words(names(lambda c: c.uses_prefix)),
    "objective-blind": lambda: words(names(lambda c: c.objective_blind)),
    "min-budget": min_budgets,
}


def render(text: str, where: str = "") -> str:
    def one(m: re.Match) -> str:
        kind = m.group("kind")
        if kind not in LISTS:
            raise ValueError(f"{where}: unknown searcher list {kind!r}; known: {', '.join(LISTS)}")
        return f"<!-- searchers:{kind} -->{LISTS[kind]()}<!-- /searchers -->"

    return SPAN.sub(one, text)


def stale() -> list[str]:
    """The files whose spans differ from what the code gives."""
    return [f for f in FILES if render((ROOT / f).read_text(), f) != (ROOT / f).read_text()]


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if "--check" in argv:
        bad = stale()
        if bad:
            print(
                f"{', '.join(bad)}: a list of searchers differs from the registry; run: "
                "python -m ghostsearch.cli.searcherdoc",
                file=sys.stderr,
            )
        return 1 if bad else 0
    for f in FILES:
        path = ROOT / f
        text = path.read_text()
        new = render(text, f)
        if new != text:
            path.write_text(new)
            print(f"{f}: lists of searchers rewritten")
    return 0


if __name__ == "__main__":
    sys.exit(main())
