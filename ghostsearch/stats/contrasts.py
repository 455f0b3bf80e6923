"""Pre-registered contrasts (``compare.contrasts``): parsed and checked against the grid when the
config is loaded (before any model work), resolved to pairs of evaluated models once the cells
have found their sets.

The grammar (one string per contrast; the left model minus the right one, in mean accuracy)::

    contrast     := side " - " side [ " | " assignments ]
    side         := "dense" | NAME | assignments
    assignments  := key "=" value ("," key "=" value)*       key: searcher objective k recovery seed
    NAME         := a searcher, an objective or a recovery method of the grid (its factor is inferred)

The part after ``|`` (the scope) applies to both sides; a side's own value wins. Each side must
pin one evaluated model: every factor with more than one value in the grid (searchers, objectives,
ks) must be given on the side or in the scope, except ``recovery`` (default ``none``, which must
then be one of ``compare.recovery``) and ``seed`` (default: the grid's first seed). ``dense`` is
the dense model, whatever the scope. Examples::

    ghosted - none | searcher=greedy, objective=perplexity, k=8   # repair's effect on one set
    lorp - shortgpt | objective=perplexity, k=8                   # two searchers, unrepaired
    perplexity - margin | searcher=greedy, k=8, recovery=ghosted  # the objective at one searcher
    ghosted - dense | searcher=fastblock, objective=perplexity, k=8
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from ghostsearch.core.errors import GhostsearchError
from ghostsearch.stats import inference as stats

FACTORS = ("searcher", "objective", "k", "recovery", "seed")


@dataclass(frozen=True)
class Side:
    """One side of a contrast: the dense model, or one cell's set under one recovery."""

    dense: bool = False
    searcher: str | None = None
    objective: str | None = None
    k: int | None = None
    recovery: str = "none"
    seed: int | None = None

    def label(self) -> str:
        if self.dense:
            return "dense"
        return f"{self.searcher}/{self.objective}/k={self.k}/s{self.seed}/{self.recovery}"


@dataclass(frozen=True)
class Contrast:
    """A parsed contrast: its text and the two sides with every factor pinned."""

    name: str
    left: Side
    right: Side


@dataclass(frozen=True)
class ContrastPair:
    """A contrast resolved to two evaluated models, by eval key (``compare.eval_key``)."""

    name: str
    left_key: str
    right_key: str
    left: str = ""  # the models' labels (searcher/objective/k/seed/recovery, or dense) and removed sets
    right: str = ""
    same: bool = False  # both sides came to one evaluated model (two searchers found the same set): difference 0


@dataclass(frozen=True)
class Grid:
    """The names a contrast may use (``config.Config.contrasts`` builds it from ``compare`` and its defaults)."""

    searchers: tuple[str, ...]
    objectives: tuple[str, ...]
    ks: tuple[int, ...]
    seeds: tuple[int, ...]
    recoveries: tuple[str, ...]


def _err(text: str, why: str) -> GhostsearchError:
    return GhostsearchError(
        f"compare.contrasts: {text!r}: {why} (grammar: 'LEFT - RIGHT | key=value, ...'; see docs/compare.md)"
    )


def _assignments(text: str, part: str, grid: Grid) -> dict:
    out: dict[str, str | int] = {}
    for a in part.split(","):
        a = a.strip()
        if not a:
            continue
        if "=" not in a:
            raise _err(text, f"{a!r} is not key=value")
        key, text_value = (x.strip() for x in a.split("=", 1))
        value: str | int = text_value
        if key not in FACTORS:
            raise _err(text, f"unknown key {key!r}; use {', '.join(FACTORS)}")
        if key in out:
            raise _err(text, f"{key} given twice")
        if key in ("k", "seed"):
            try:
                value = int(text_value)
            except ValueError:
                raise _err(text, f"{key}={text_value!r} is not an integer") from None
        allowed = {
            "searcher": grid.searchers,
            "objective": grid.objectives,
            "k": grid.ks,
            "seed": grid.seeds,
            "recovery": grid.recoveries,
        }[key]
        if value not in allowed:
            raise _err(text, f"{key}={value} is not in the grid ({', '.join(map(str, allowed))})")
        out[key] = value
    return out


def _side(text: str, part: str, grid: Grid) -> dict:
    part = part.strip()
    if part == "dense":
        return {"dense": True}
    if "=" in part:
        return _assignments(text, part, grid)
    hits = [
        f
        for f, names in (("searcher", grid.searchers), ("objective", grid.objectives), ("recovery", grid.recoveries))
        if part in names
    ]
    if not hits:
        raise _err(
            text,
            f"{part!r} is not dense, a searcher ({', '.join(grid.searchers)}), an objective "
            f"({', '.join(grid.objectives)}) or a recovery ({', '.join(grid.recoveries)}) of the grid",
        )
    if len(hits) > 1:
        raise _err(text, f"{part!r} is both a {hits[0]} and a {hits[1]}; write {hits[0]}={part}")
    return {hits[0]: part}


def parse(text: str, grid: Grid) -> Contrast:
    """One contrast string, checked against the grid (a one-line GhostsearchError otherwise)."""
    if not isinstance(text, str) or not text.strip():
        raise _err(str(text), "empty")
    body, _, scope_txt = text.partition("|")
    sides = body.split(" - ")
    if len(sides) != 2:
        raise _err(text, "needs exactly one ' - ' (spaces around the minus) between two sides")
    scope = _assignments(text, scope_txt, grid) if scope_txt.strip() else {}
    out = []
    for part in sides:
        s = _side(text, part, grid)
        if s.get("dense"):
            out.append(Side(dense=True))
            continue
        f = {**scope, **s}
        for key, names in (("searcher", grid.searchers), ("objective", grid.objectives), ("k", grid.ks)):
            if key not in f:
                if len(names) > 1:
                    raise _err(
                        text,
                        f"side {part.strip()!r} does not say which {key} ({', '.join(map(str, names))}); "
                        f"add {key}=... to it or to the scope after '|'",
                    )
                f[key] = names[0]
        f.setdefault("seed", grid.seeds[0])
        f.setdefault("recovery", "none")
        if f["recovery"] not in grid.recoveries:
            raise _err(text, f"recovery {f['recovery']} is not in compare.recovery ({', '.join(grid.recoveries)})")
        out.append(Side(**f))
    if out[0] == out[1]:
        raise _err(text, "both sides are the same model")
    return Contrast(text.strip(), out[0], out[1])


def parse_all(texts: Sequence[str] | None, grid: Grid) -> list[Contrast]:
    """Every contrast of ``compare.contrasts`` parsed against the grid; names unique."""
    if not texts:
        return []
    out = [parse(t, grid) for t in texts]
    names = [c.name for c in out]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise _err(twice[0], "listed more than once")
    return out


def resolve_contrasts(
    contrasts: Sequence[Contrast], results: list, key: Callable[[list[int], str], str]
) -> list[ContrastPair]:
    """The parsed ``compare.contrasts`` (``Config.contrasts()``) resolved to pairs of evaluated
    models: each side's cell (searcher, objective, k, seed) is looked up in ``results`` (the cells'
    results, rundir.cell.CellResult: searcher, objective, k, seed, removed) and keyed
    ``key(removed, recovery)``: pass ``compare.eval_key`` bound to the run's config and held-out
    sets, so the keys are those of RUN_DIR/evals and eval_items.parquet. Two sides that come to the
    same evaluated model (two searchers found the same set) give a pair with ``same=True``: its
    difference is 0 on every item, stated as such, never tested."""
    by = {(r.searcher, r.objective, r.k, r.seed): r for r in results}
    out = []
    for c in contrasts:
        keys, labels = [], []
        for s in (c.left, c.right):
            if s.dense:
                keys.append(key([], "none"))
                labels.append("dense")
                continue
            r = by.get((s.searcher, s.objective, s.k, s.seed))
            if r is None:
                raise _err(c.name, f"no finished cell {s.label()}")
            keys.append(key(list(r.removed), s.recovery))
            labels.append(f"{s.label()} {list(r.removed)}")
        out.append(ContrastPair(c.name, keys[0], keys[1], labels[0], labels[1], keys[0] == keys[1]))
    return out


VAR_DIFF_PILOT = 0.163  # variance of a paired per-item accuracy difference in the pilot (issue 23)
TARGET = 0.03  # the difference a contrast should be able to detect ("1-3 percentage points")


def power_lines(
    contrasts: Sequence[Contrast],
    n_items: int | None,
    var_diff: float = VAR_DIFF_PILOT,
    alpha: float = stats.ALPHA,
    power: float = 0.8,
    delta: float = TARGET,
) -> list[str]:
    """Before any model work: per contrast of ``compare.contrasts`` (parsed: ``Config.contrasts()``),
    the paired minimum detectable difference at ``n_items`` items per model (at Holm's strictest
    level, alpha / number of contrasts, 80% power, per-item variance ``var_diff``: the pilot's 0.163
    unless a previous run gives one), and the items per model that would detect ``delta``. A
    contrast whose MDD exceeds ``delta`` is flagged: this size cannot decide a difference that small."""
    cs = list(contrasts)
    if not cs:
        return []
    a = alpha / len(cs)
    need = stats.items_needed(var_diff, delta, alpha=a, power=power)
    out = []
    for c in cs:
        if n_items:
            d = stats.mdd(var_diff, n_items, alpha=a, power=power)
            flag = "cannot decide" if d > delta else "can decide"
            out.append(
                f"contrast {c.name!r}: at {n_items} items per model the minimum detectable difference is "
                f"{d:.3f} (level {a:.4g}, {power:.0%} power, paired item variance {var_diff:.3f}): {flag} "
                f"a difference of {delta:g}; {need:,} items per model would"
            )
        else:
            out.append(
                f"contrast {c.name!r}: {need:,} items per model would detect {delta:g} (level {a:.4g}, "
                f"{power:.0%} power, paired item variance {var_diff:.3f})"
            )
    return out
