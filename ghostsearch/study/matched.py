"""The matched comparison (issue 14; ``bench/search.py`` is its command line): every searcher on one
pool against exact greedy, a budget-driven one given exactly greedy's cost as its budget.

What decides lives here: the cases, from the registry and the classes' traits (:func:`cases`; a new
searcher runs matched with no edit); which of them take no seed (:func:`deterministic`); the budget at
which a searcher first reaches the reference's value (:func:`reach`, 1.0001x); the cells a previous
invocation finished, which a rerun skips (:func:`earlier_cells`, the resume rule of matched.jsonl);
running the cells (:func:`run`) and each cell's line of matched.jsonl (:func:`cell_line`); the docs'
table (:func:`table`) and keeping it current in a markdown file (:func:`into`); the curves
(:func:`plot`) and a compare run's reach report (:func:`reach_report`).

Every search runs in fp32 on any CPU: reach is judged at 1.0001x, and a bf16 value on a CPU with
native bf16 moves by up to 1.3% with the thread count alone (bench/dtype.py)."""

from __future__ import annotations

import functools
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

from ghostsearch.config import budget_driven
from ghostsearch.core.io import write_text_atomic
from ghostsearch.rundir.curves import Curve, best_so_far
from ghostsearch.search import SEARCHERS, Space

REFERENCE = "greedy"  # the comparison's reference: every searcher is judged against exact greedy's value
TOL = 1e-4  # reach: within 1.0001x of the target (relative, either sign)


@dataclass(frozen=True)
class Case:
    """One case of the comparison: its label (a cell's searcher in matched.jsonl), the registered
    searcher it runs, that searcher's parameters, and whether the default set (``--searchers`` unset)
    takes it."""

    label: str
    searcher: str
    params: dict[str, object] = field(default_factory=dict)
    default: bool = True


# The comparison's own settings of a searcher, on all its cases (issue 14: beam at width 2), and the
# pre-registered variants beside the generated cases (a design that names its arms, not a switch):
# issue 40's endgame rule (docs/benchmarks.md) and cbo without its value transform.
SETTINGS: list[tuple[str, dict[str, object]]] = [("beam", {"width": 2})]
VARIANTS: tuple[Case, ...] = (
    Case("ga+endgame", "ga", {"endgame": 0.25}, default=False),
    Case("cbo+none", "cbo", {"transform": "none"}, default=False),
)


@functools.cache
def cases() -> tuple[Case, ...]:
    """The cases, from the registry and the classes' traits, so a new searcher runs matched with no
    edit: every registered searcher that searches the objective's values (not ``objective_blind``), a
    budget-driven one (``config.budget_driven``: it gets greedy's cost, ``compare.budget=matched``)
    with its defaults; one that ends by itself and races (``races()``) twice, exact (``NAME``, race
    off) and raced (``NAME+race``; the default set takes the raced one, the reference's exact one
    too); the reference first (the others' reach is judged by it); then the VARIANTS."""
    space = Space(30, 6, frozenset({0, 29}))  # any space: the traits do not depend on it
    out: list[Case] = []
    for name in SEARCHERS.names():
        cls = SEARCHERS.get(name)
        if cls.objective_blind:
            continue
        own = next((p for n, p in SETTINGS if n == name), {})
        if cls.races() and not budget_driven(cls, space, own):
            out.append(Case(name, name, {**own, "race": False}, name == REFERENCE))
            out.append(Case(f"{name}+race", name, {**own, "race": True}))
        else:
            out.append(Case(name, name, own))
    out.sort(key=lambda c: c.searcher != REFERENCE)
    return (*out, *VARIANTS)


def labels() -> list[str]:
    """Every case's label, in the comparison's order (the tables' and plots' order too)."""
    return [c.label for c in cases()]


def default_labels() -> list[str]:
    return [c.label for c in cases() if c.default]


def deterministic(label: str) -> bool:
    """No seed enters the case's run (``Searcher.uses_seed`` False; the race's row order is fixed):
    it runs once and stands for every seed. A label that is no case names its searcher before '+'."""
    name = next((c.searcher for c in cases() if c.label == label), label.split("+")[0])
    return not SEARCHERS.get(name).uses_seed


def improvements(history: list[dict]) -> list[dict]:
    """The entries of a cell history where the best value changes, and the last one (all the plot and
    the table need: the budget at which a value is first reached is one of them)."""
    out = [h for i, h in enumerate(history) if i == 0 or h["best_value"] != history[i - 1]["best_value"]]
    return out + ([history[-1]] if history and out[-1] is not history[-1] else [])


def reach(history: list[dict], target: float, tol: float = TOL) -> float | None:
    """Budget at which a cell history [{budget_used, best_value}] first reaches target within tol (relative,
    either sign); None: never."""
    return next(
        (
            h["budget_used"]
            for h in history
            if h["best_value"] is not None and h["best_value"] <= target + tol * abs(target)
        ),
        None,
    )


def cell_key(objective: str, k: int, seed: int, searcher: str) -> tuple:
    """A cell's key in :func:`earlier_cells`: no seed for a searcher that takes none (any seed's run
    stands for all)."""
    return (objective, k, None if deterministic(searcher) else seed, searcher)


def earlier_cells(path: str | Path, n_seq: int, seq_len: int) -> dict[tuple, dict]:
    """The cells a previous invocation finished into ``path`` (matched.jsonl) at the same calibration
    size, by :func:`cell_key` (seed None for a searcher that takes none: its run stands for every seed,
    also in an invocation that asks for other seeds only): a rerun skips them (a cell stopped part-way
    resumes from its run directory's ledger instead, its wall time then counting only the rest)."""
    if not os.path.exists(path):
        return {}
    out = {}
    with open(path) as f:
        for line in f:
            r = json.loads(line)
            if r.get("n_seq") == n_seq and r.get("seq_len") == seq_len:
                out[cell_key(r["objective"], r["k"], r["seed"], r["searcher"])] = r
    return out


def cell_line(
    r: dict, *, objective: str, k: int, seed: int, label: str, cost: int, n_seq: int, seq_len: int, resumed: bool
) -> dict:
    """A finished cell's line of matched.jsonl from its result (``CellResult.to_dict``): what the table,
    the plot and a rerun read (the history cut to its improvements)."""
    return {
        "objective": objective,
        "k": k,
        "seed": seed,
        "searcher": label,
        "value": r["value"],
        "budget_used": r["budget_used"],
        "greedy_cost": cost,
        "wall_seconds": r["wall_seconds"],
        "removed": r["removed"],
        "history": improvements(r["history"]),
        "n_seq": n_seq,
        "seq_len": seq_len,
        "race": r.get("race") or {},
        "evaluations": r["evaluations"],
        "resumed": resumed,
    }


class Row(NamedTuple):
    """One cell of :func:`run`: its value, budget used, the budget at which it reached the reference's
    value (None: not reached), greedy's cost, wall seconds and set."""

    objective: str
    k: int
    seed: int
    label: str
    value: float
    budget_used: float
    reached: float | None
    greedy_cost: int
    wall_seconds: float
    removed: list[int]

    @classmethod
    def of(cls, r: dict, objective: str, k: int, seed: int, label: str, at: float | None, cost: int) -> Row:
        """The row of a cell's result (``CellResult.to_dict`` or its matched.jsonl line)."""
        return cls(objective, k, seed, label, r["value"], r["budget_used"], at, cost, r["wall_seconds"], r["removed"])


def chosen(names: list[str] | None, greedy_value: float | None) -> list[str]:
    """The labels an invocation runs (None: the default set); unknown labels, or a set without the
    reference and no reference value to reach, are refused before any work."""
    out = names if names else default_labels()
    unknown = sorted(set(out) - set(labels()))
    if unknown:
        raise SystemExit(f"--searchers: unknown {unknown}; choose from {labels()}")
    if REFERENCE not in out and greedy_value is None:
        raise SystemExit(
            f"--searchers without {REFERENCE} needs --greedy-value (exact {REFERENCE}'s best value of an earlier run)"
        )
    return out


def progress(r: dict, *, objective: str, k: int, seed: int, label: str, at: float | None, cost: int, g) -> str:
    """A finished cell's line as run prints it (g: the reference's result of this objective and k, if any)."""
    race = r.get("race") or {}
    return (
        f"{objective:10s} k={k} seed={seed} {label:12s} best {r['value']:10.4f} used "
        f"{r['budget_used']:7.1f} "
        f"reached greedy at {'-' if at is None else f'{at:.1f} ({at / cost:.2f}x)':>14s} "
        f"wall {r['wall_seconds']:7.1f}s {r['removed']} ({race.get('used', '-')})"
        + (
            f" | vs exact greedy: budget {r['budget_used'] / g['budget_used']:.2f}x, wall "
            f"{r['wall_seconds'] / g['wall_seconds']:.2f}x, same set "
            f"{sorted(r['removed']) == sorted(g['removed'])}"
            if g is not None and label != REFERENCE
            else ""
        )
    )


def run(
    out: str,
    *,
    n_seq: int,
    seq_len: int,
    objectives: list[str],
    ks: list[int],
    seeds: list[int],
    actors: int = 2,
    searchers: list[str] | None = None,
    greedy_value: float | None = None,
    overrides: list[str] | None = None,
) -> list[Row]:
    """Every chosen case on each (objective, k, seed), a budget-driven searcher at greedy's cost, on one
    pool; each finished cell appended to <out>/matched.jsonl. A cell :func:`earlier_cells` holds is
    not run again, nor a deterministic case for a second seed; a pool starts at the first cell to run
    (a rerun whose cells are all done starts nothing)."""
    from ghostsearch.config import load_config, protected_blocks
    from ghostsearch.model.models import model_depth
    from ghostsearch.pool.session import PoolSession
    from ghostsearch.run.runner import run_cell
    from ghostsearch.rundir import close_run_dir, open_run_dir
    from ghostsearch.search.common import greedy_cost

    base = [
        f"out={out}",
        f"calibration.n_seq={n_seq}",
        f"calibration.seq_len={seq_len}",
        "search.protected=[0,-1]",
        "dtype=fp32",  # reach is judged at 1.0001x; bf16 values move by ~1% (module docstring)
        f"pool.actors={actors}",
        "pool.threads=1",
        "pool.dashboard=false",
        *(overrides or []),
    ]
    names = chosen(searchers, greedy_value)
    cfg = load_config(None, base)
    n_blocks = model_depth(cfg.model)
    jsonl = os.path.join(out, "matched.jsonl")
    done = earlier_cells(jsonl, n_seq, seq_len)
    rows = []
    session = PoolSession(cfg)  # released (the pool ended, the local Ray shut down) however this ends
    broker = None  # started at the first cell to run
    with session:
        for objective in objectives:
            for k in ks:
                cost = greedy_cost(Space(n_blocks, k, protected_blocks(cfg, n_blocks)))
                first: dict[str, dict] = {}  # label -> the first seed's result (deterministic searchers)
                for seed in seeds:
                    greedy_best = greedy_value if REFERENCE not in first else first[REFERENCE]["value"]
                    for case in cases():
                        label, name = case.label, case.searcher
                        if label not in names:
                            continue
                        if deterministic(label) and label in first:  # no seed: the same run again
                            print(
                                f"{objective:10s} k={k} seed={seed} {label:12s} deterministic: seed "
                                f"{first[label]['seed']}'s run stands",
                                flush=True,
                            )
                            continue
                        r = done.get(cell_key(objective, k, seed, label))
                        if r is not None:  # a cell of an earlier invocation: its line stands
                            first.setdefault(label, r)
                            if label == REFERENCE:
                                greedy_best = r["value"]
                            assert greedy_best is not None  # chosen(): the reference runs first, or its value is given
                            at = reach(r["history"], greedy_best)
                            rows.append(Row.of(r, objective, k, seed, label, at, cost))
                            print(
                                f"{objective:10s} k={k} seed={seed} {label:12s} done earlier: {r['value']:.4f}",
                                flush=True,
                            )
                            continue
                        over = [f"search.params.{name}.{p}={str(v).lower()}" for p, v in case.params.items()]
                        d = f"{out}/{label.replace('+', '-')}-{objective}-k{k}-s{seed}"
                        c = load_config(None, base + over + [f"objective={objective}", f"out={d}"])
                        resumed = os.path.isdir(os.path.join(d, "ledger"))  # a part ran before: its wall is lost
                        if broker is None:
                            broker = session.start()
                        run_dir = open_run_dir(c, "bench-search")
                        try:
                            r = run_cell(
                                c,
                                broker,
                                run_dir,
                                searcher=name,
                                objective=objective,
                                k=k,
                                seed=seed,
                                n_blocks=n_blocks,
                                progress=False,
                                matched=True,  # a budget-driven searcher gets greedy's cost (config.build_searcher)
                            ).to_dict()  # the JSON form it writes
                        finally:
                            close_run_dir(run_dir)
                        first.setdefault(label, r)
                        if label == REFERENCE:
                            greedy_best = r["value"]
                        assert greedy_best is not None
                        at = reach(r["history"], greedy_best)
                        rows.append(Row.of(r, objective, k, seed, label, at, cost))
                        line = cell_line(
                            r,
                            objective=objective,
                            k=k,
                            seed=seed,
                            label=label,
                            cost=cost,
                            n_seq=n_seq,
                            seq_len=seq_len,
                            resumed=resumed,
                        )
                        with open(jsonl, "a") as f:
                            f.write(json.dumps(line) + "\n")
                        g = first.get(REFERENCE)
                        print(
                            progress(r, objective=objective, k=k, seed=seed, label=label, at=at, cost=cost, g=g),
                            flush=True,
                        )
    return rows


def read_cells(paths: list[str]) -> list[dict]:
    """Every cell line of these matched.jsonl files, in order."""
    out = []
    for p in paths:
        with open(p) as f:
            out += [json.loads(line) for line in f if line.strip()]
    return out


def table(paths: list[str]) -> list[str]:
    """A markdown table (its lines) from matched.jsonl files: per (objective, k, calibration size, seed)
    every searcher's best value, budget used, the budget at which it first reached exact greedy's value
    (<= 1.0001x), computed from its history against the greedy row of the same objective, k and calibration
    (greedy is deterministic: one row stands for every seed), and its wall time against greedy's (comparable
    only when both ran unloaded and neither resumed: a resumed cell's wall time counts only its last part)."""
    rows = read_cells(paths)
    if not rows:
        raise SystemExit(f"--table: no cells in {', '.join(paths)} (bench/search.py --matched writes them)")
    greedy = {(r["objective"], r["k"], r["n_seq"], r["seq_len"]): r for r in rows if r["searcher"] == REFERENCE}
    order = list(dict.fromkeys(labels() + [r["searcher"] for r in rows]))
    out = []
    rows.sort(key=lambda r: (r["objective"], r["n_seq"] * r["seq_len"], r["k"], order.index(r["searcher"]), r["seed"]))
    out.append(
        "| calibration | k | searcher | seed | best value | budget used | reached greedy's value at "
        "(x its cost) | wall s (x greedy's) | set |"
    )
    out.append("|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        g = greedy.get((r["objective"], r["k"], r["n_seq"], r["seq_len"]))
        at = None if g is None else reach(r["history"], g["value"])
        same = g is not None and r["searcher"] != REFERENCE and sorted(r["removed"]) == sorted(g["removed"])
        ratio = (
            "-" if r["searcher"] == REFERENCE else ("not reached" if at is None else f"{at / r['greedy_cost']:.2f}x")
        )
        if at is None and g is not None and r["searcher"] != REFERENCE:
            ratio += f" ({r['value'] / g['value']:.4f}x greedy's value)" if g["value"] > 0 else ""
        if r.get("resumed"):  # its wall counts only the last part: no ratio, in either direction
            wall = f"{r['wall_seconds']:.1f} (resumed: last part only)"
        elif g is None or r is g:
            wall = f"{r['wall_seconds']:.1f}"
        elif g.get("resumed"):
            wall = f"{r['wall_seconds']:.1f} (greedy's resumed)"
        else:
            wall = f"{r['wall_seconds']:.1f} ({r['wall_seconds'] / g['wall_seconds']:.2f}x)"
        out.append(
            f"| {r['objective']} {r['n_seq']} x {r['seq_len']} | {r['k']} | {r['searcher']} | "
            f"{'all' if deterministic(r['searcher']) else r['seed']} | "
            f"{r['value']:.4f}{' (same set)' if same else ''} | "
            f"{r['budget_used']:.1f} of {r['greedy_cost']} | {ratio} | {wall} | "
            f"{sorted(r['removed'])} |"
        )
    return out


def into(doc: str, table_lines: list[str]) -> str:
    """Replace, in the markdown file ``doc``, the matched table whose first row has the same calibration
    and k as ``table_lines``' first row and whose searchers are all among ``table_lines``' (the same
    comparison, perhaps with a searcher added since: another comparison at that calibration and k,
    e.g. a variant's table, is not it) by ``table_lines`` (header, separator and rows: the block runs
    to the first line that is not a table row), whole or not at all; returns the line that says so. No
    such table: an error that names it, and the file untouched."""
    key = table_lines[2].split("|")[1:3]
    label = "|".join(key)
    with open(doc) as f:
        lines = f.read().split("\n")

    def block(i: int) -> list[str]:  # the table's rows from line i on
        j = i
        while j < len(lines) and lines[j].startswith("|"):
            j += 1
        return lines[i:j]

    def searchers(rows: list[str]) -> set[str]:
        return {r.split("|")[3].strip() for r in rows if r.count("|") > 3}

    mine = searchers(table_lines[2:])
    at = [
        i
        for i in range(len(lines) - 2)
        if lines[i] == table_lines[0]
        and lines[i + 1] == table_lines[1]
        and lines[i + 2].split("|")[1:3] == key
        and searchers(block(i + 2)) <= mine
    ]
    if len(at) != 1:
        raise SystemExit(
            f"--into {doc}: {len(at)} matched tables whose first row starts '|{label}|' and whose searchers are "
            "among this table's (need exactly one); paste the table once by hand (bench/search.py --table FILE), "
            "then --into keeps it current"
        )
    i = at[0]
    j = i + len(block(i))
    lines[i:j] = table_lines
    write_text_atomic(doc, "\n".join(lines))
    return f"{doc}: the '{label.strip()}' table now has {len(table_lines) - 2} rows (was {j - i - 2})"


def plot(paths: list[str], out: str) -> None:
    """Best value against budget (x greedy's cost), one panel per (objective, k), a colour per searcher,
    a line style per seed; the dashed line is exact greedy's value. From the matched.jsonl files."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = read_cells(paths)
    panels = sorted({(r["objective"], r["k"]) for r in rows})
    order = list(dict.fromkeys(labels() + [r["searcher"] for r in rows]))
    fig, axes = plt.subplots(1, len(panels), figsize=(5.2 * len(panels), 4), squeeze=False)
    for ax, (objective, k) in zip(axes[0], panels):
        mine = [r for r in rows if (r["objective"], r["k"]) == (objective, k)]
        finals = []
        for r in mine:
            h = [
                (x["budget_used"] / r["greedy_cost"], x["best_value"])
                for x in r["history"]
                if x["best_value"] is not None
            ]
            if not h:
                continue
            xs, ys = zip(*h)
            ax.step(
                xs,
                ys,
                where="post",
                color=f"C{order.index(r['searcher'])}",
                ls=["-", "--", ":", "-."][r["seed"] % 4],
                label=f"{r['searcher']} s{r['seed']}",
            )
            finals.append(r["value"])
            if r["searcher"] == REFERENCE:
                ax.axhline(r["value"], color="grey", ls="--", lw=0.8)
        lo, hi = min(finals), max(finals)
        pad = 0.5 * (hi - lo) + 1e-3 * abs(hi)
        ax.set_ylim(lo - pad, hi + 3 * pad)  # the end game, not the first (catastrophic) candidates
        ax.axvline(1.0, color="grey", lw=0.8)
        n = mine[0]
        ax.set(
            title=f"{objective}, k={k} ({n['n_seq']} x {n['seq_len']} tokens)",
            xlabel="budget used (x exact greedy's cost)",
            ylabel="best value (lower is better)",
        )
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(out, dpi=110)


def curves(run_dir, objective: str, k: int) -> dict[str, Curve]:
    """Per searcher (its first cell at this k, by name): the cell's best-so-far curve from the ledger
    (``rundir.curves``, the report's rule: full-fidelity k-sets, a race block charged its own rows)."""
    out: dict[str, Curve] = {}
    for cell, c in sorted(best_so_far(run_dir, objective).items()):
        if c.k == k:
            out.setdefault(cell.split("-")[0], c)
    return out


def reach_report(run_dir, objective: str = "perplexity", k: int = 6) -> list[str]:
    """A compare run's searchers at this k against its greedy cell (lines): best value, evaluations used,
    wall seconds, the evaluations at which each reached greedy's best value and their ratio to greedy's."""
    cs = curves(run_dir, objective, k)
    if REFERENCE not in cs:
        raise SystemExit(f"no {REFERENCE} cell for {objective} k={k} in {run_dir}")
    g = cs[REFERENCE]
    out = [
        f"{objective}, k={k}; greedy best {g.final:.4f} after {g.used:.0f} evaluations",
        f"{'searcher':10s} {'best':>10s} {'evals used':>10s} {'wall s':>8s} {'evals to greedy':>16s} {'ratio':>7s}",
    ]
    for name in SEARCHERS.names():
        if name not in cs:
            continue
        c = cs[name]
        used = (c.reach(g.final) or (None, None))[0]
        ratio = f"{used / g.used:.2f}x" if used else "-"
        out.append(
            f"{name:10s} {c.final:10.4f} {c.used:10.1f} {c.wall:8.1f} "
            f"{(f'{used:.1f}' if used else 'not reached'):>16s} {ratio:>7s}"
        )
    return out


def run_every_searcher(out: str, *, k: int, objective: str, n_seq: int, seq_len: int) -> Path:
    """Every registered searcher at this k and objective as one compare grid on one pool (fp32, the ends
    protected, 2 actors of one thread); returns the run directory :func:`reach_report` reads."""
    from ghostsearch.config import load_config
    from ghostsearch.model.models import model_depth
    from ghostsearch.pool.session import PoolSession
    from ghostsearch.rundir import close_run_dir, open_run_dir
    from ghostsearch.study.compare import grid, run_cells

    cfg = load_config(
        None,
        [
            f"k={k}",
            f"objective={objective}",
            f"out={out}",
            f"calibration.n_seq={n_seq}",
            f"calibration.seq_len={seq_len}",
            "search.protected=[0,-1]",
            "dtype=fp32",
            f"compare.searchers=[{','.join(SEARCHERS.names())}]",
            "pool.actors=2",
            "pool.threads=1",
            "pool.dashboard=false",
        ],
    )
    run_dir = open_run_dir(cfg, "bench-search")
    ok = False
    try:
        with PoolSession(cfg) as session:
            run_cells(cfg, session.start(), run_dir, grid(cfg), model_depth(cfg.model))
        ok = True
    finally:
        close_run_dir(run_dir, ok)  # the lock released (and a fresh directory that ledgered nothing removed)
    return run_dir
