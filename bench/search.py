"""Searchers on SmolLM2, k = 6 of 30, perplexity, fixed calibration, one shared pool:
each searcher's best value against evaluations and wall seconds, and how many full-fidelity
evaluations ga, bo and cbo need to reach greedy's best value (greedy itself: 153 at k = 6 and 196
at k = 8 on SmolLM2, 28 free blocks).

  python bench/search.py [--out runs/bench-search] [--n-seq 8 --seq-len 128]   # runs the searches
  python bench/search.py --from-run runs/study-smollm2 --k 6                    # reads a compare's ledger
  python bench/search.py --matched --objectives perplexity,margin --ks 6,8 --seeds 0,1 --n-seq 8 --seq-len 256
  python bench/search.py --table runs/bench-search/matched.jsonl        # the docs' table, reach from the histories
  python bench/search.py --table docs/results/bench-race-64/matched.jsonl --into docs/benchmarks.md  # kept current
  python bench/search.py --plot runs/bench-search/matched.jsonl --plot-out matched.png

``--matched`` (issue 14): in one invocation, on one pool, per objective, k and seed: exact greedy, raced
greedy (race: true), beam (width 2), and ga, bo, cbo given exactly greedy's cost as their budget
(racing on, their default); prints each one's best value, budget used, the budget at which it first
reached exact greedy's value (<= 1.0001x, lower is better) and wall seconds; each cell's result and
best-value history is appended to <out>/matched.jsonl, which ``--plot`` draws. A rerun with the same
``--out`` and calibration size skips the cells matched.jsonl holds (resumable over sessions).
Every search runs in fp32 on any CPU: reach is judged at 1.0001x, and a bf16 value on a CPU with
native bf16 moves by up to 1.3% with the thread count alone (bench/dtype.py); the committed
tables are fp32 (AVX2-only machines, where `dtype: auto` is fp32).
"""

from __future__ import annotations

import argparse
import json
import os

import benchenv  # noqa: E402,F401  (the repository on sys.path, offline HF, ../shared/data as the data directory)

from ghostsearch.config import budget_driven  # noqa: E402
from ghostsearch.core.io import write_text_atomic  # noqa: E402
from ghostsearch.rundir.curves import Curve, best_so_far  # noqa: E402
from ghostsearch.search import SEARCHERS, Space  # noqa: E402

REFERENCE = "greedy"  # the comparison's reference: every searcher is judged against exact greedy's value
# The bench's own settings of a searcher, on all its cases (issue 14: beam at width 2), and the
# pre-registered variants beside the generated cases (label, searcher, params): issue 40's endgame
# rule (docs/benchmarks.md) and cbo without its value transform.
SETTINGS: list[tuple[str, dict[str, object]]] = [("beam", {"width": 2})]
VARIANTS: list[tuple[str, str, dict[str, object]]] = [
    ("ga+endgame", "ga", {"endgame": 0.25}),
    ("cbo+none", "cbo", {"transform": "none"}),
]


def curves(run_dir, objective: str, k: int) -> dict[str, Curve]:
    """Per searcher (its first cell at this k, by name): the cell's best-so-far curve from the ledger
    (``rundir.curves``, the report's rule: full-fidelity k-sets, a race block charged its own rows)."""
    out: dict[str, Curve] = {}
    for cell, c in sorted(best_so_far(run_dir, objective).items()):
        if c.k == k:
            out.setdefault(cell.split("-")[0], c)
    return out


def report(run_dir, objective="perplexity", k=6):
    cs = curves(run_dir, objective, k)
    if REFERENCE not in cs:
        raise SystemExit(f"no {REFERENCE} cell for {objective} k={k} in {run_dir}")
    g = cs[REFERENCE]
    print(f"{objective}, k={k}; greedy best {g.final:.4f} after {g.used:.0f} evaluations")
    print(f"{'searcher':10s} {'best':>10s} {'evals used':>10s} {'wall s':>8s} {'evals to greedy':>16s} {'ratio':>7s}")
    for name in SEARCHERS.names():
        if name not in cs:
            continue
        c = cs[name]
        used = (c.reach(g.final) or (None, None))[0]
        ratio = f"{used / g.used:.2f}x" if used else "-"
        print(
            f"{name:10s} {c.final:10.4f} {c.used:10.1f} {c.wall:8.1f} "
            f"{(f'{used:.1f}' if used else 'not reached'):>16s} {ratio:>7s}"
        )


def matched_cases() -> list[tuple[str, str, dict[str, object], bool]]:
    """(label, searcher, params, in the default set) of --matched, from the registry and the classes'
    traits, so a new searcher runs matched with no edit here: every registered searcher that searches
    the objective's values (not ``objective_blind``), a budget-driven one (``config.budget_driven``:
    it gets greedy's cost, ``compare.budget=matched``) with its defaults; one that ends by itself and
    races (``races()``) twice, exact (``NAME``, race off) and raced (``NAME+race``; the default set
    takes the raced one, the reference's exact one too); then the VARIANTS."""
    space = Space(30, 6, frozenset({0, 29}))  # any space: the traits do not depend on it
    out: list[tuple[str, str, dict[str, object], bool]] = []
    for name in SEARCHERS.names():
        cls = SEARCHERS.get(name)
        if cls.objective_blind:
            continue
        own = next((p for n, p in SETTINGS if n == name), {})
        if cls.races() and not budget_driven(cls, space, own):
            out.append((name, name, {**own, "race": False}, name == REFERENCE))
            out.append((f"{name}+race", name, {**own, "race": True}, True))
        else:
            out.append((name, name, own, True))
    out.sort(key=lambda case: case[1] != REFERENCE)  # the reference first: the others' reach is judged by it
    return out + [(label, name, params, False) for label, name, params in VARIANTS]


MATCHED = [(label, name, params) for label, name, params, _ in matched_cases()]
DEFAULT = [label for label, _, _, default in matched_cases() if default]  # --searchers default


def deterministic(label: str) -> bool:
    """No seed enters the case's run (``Searcher.uses_seed`` False; the race's row order is fixed):
    it runs once and stands for every seed."""
    return not SEARCHERS.get(dict((m[0], m[1]) for m in MATCHED).get(label, label.split("+")[0])).uses_seed


def improvements(history: list[dict]) -> list[dict]:
    """The entries of a cell history where the best value changes, and the last one (all --plot and
    --table need: the budget at which a value is first reached is one of them)."""
    out = [h for i, h in enumerate(history) if i == 0 or h["best_value"] != history[i - 1]["best_value"]]
    return out + ([history[-1]] if history and out[-1] is not history[-1] else [])


def reach(history, target, tol=1e-4):
    """Budget at which a cell history [{budget_used, best_value}] first reaches target within tol (relative, either
    sign)."""
    return next(
        (
            h["budget_used"]
            for h in history
            if h["best_value"] is not None and h["best_value"] <= target + tol * abs(target)
        ),
        None,
    )


def earlier_cells(path: str, n_seq: int, seq_len: int) -> dict[tuple, dict]:
    """The cells a previous --matched invocation finished into ``path`` at the same calibration size,
    by (objective, k, seed, searcher), seed None for a searcher that takes none (its run stands for every seed,
    also in an invocation that asks for other seeds only): a rerun skips them (a cell stopped part-way resumes
    from its run directory's ledger instead, its wall time then counting only the rest)."""
    if not os.path.exists(path):
        return {}
    out = {}
    with open(path) as f:
        for line in f:
            r = json.loads(line)
            if r.get("n_seq") == n_seq and r.get("seq_len") == seq_len:
                out[cell_key(r["objective"], r["k"], r["seed"], r["searcher"])] = r
    return out


def cell_key(objective: str, k: int, seed: int, searcher: str) -> tuple:
    """A cell's key in ``earlier_cells``: no seed for a searcher that takes none (any seed's run stands for all)."""
    return (objective, k, None if deterministic(searcher) else seed, searcher)


def matched(args):
    """Every case of MATCHED on each (objective, k, seed), a budget-driven searcher at greedy's cost, one pool."""
    from ghostsearch.config import load_config, protected_blocks
    from ghostsearch.model.models import model_depth
    from ghostsearch.pool.session import PoolSession
    from ghostsearch.run.runner import run_cell
    from ghostsearch.rundir import close_run_dir, open_run_dir
    from ghostsearch.search import Space
    from ghostsearch.search.common import greedy_cost

    base = [
        f"out={args.out}",
        f"calibration.n_seq={args.n_seq}",
        f"calibration.seq_len={args.seq_len}",
        "search.protected=[0,-1]",
        "dtype=fp32",  # reach is judged at 1.0001x; bf16 values move by ~1% (module docstring)
        f"pool.actors={args.actors}",
        "pool.threads=1",
        "pool.dashboard=false",
        *getattr(args, "overrides", []),
    ]
    labels = args.searchers.split(",") if args.searchers else DEFAULT
    unknown = sorted(set(labels) - {m[0] for m in MATCHED})
    if unknown:
        raise SystemExit(f"--searchers: unknown {unknown}; choose from {[m[0] for m in MATCHED]}")
    if REFERENCE not in labels and args.greedy_value is None:
        raise SystemExit(
            f"--searchers without {REFERENCE} needs --greedy-value (exact {REFERENCE}'s best value of an earlier run)"
        )
    cfg = load_config(None, base)
    n_blocks = model_depth(cfg.model)
    done = earlier_cells(os.path.join(args.out, "matched.jsonl"), args.n_seq, args.seq_len)
    rows = []
    session = PoolSession(cfg)  # released (the pool ended, the local Ray shut down) however this ends
    broker = None  # started at the first cell to run (a rerun whose cells are all done starts nothing)
    with session:
        for objective in args.objectives.split(","):
            for k in map(int, args.ks.split(",")):
                cost = greedy_cost(Space(n_blocks, k, protected_blocks(cfg, n_blocks)))
                first: dict[str, dict] = {}  # label -> the first seed's result (deterministic searchers)
                for seed in map(int, args.seeds.split(",")):
                    greedy_best = args.greedy_value if REFERENCE not in first else first[REFERENCE]["value"]
                    for label, name, params in MATCHED:
                        if label not in labels:
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
                            at = reach(r["history"], greedy_best)
                            row = (objective, k, seed, label, r["value"], r["budget_used"], at, cost)
                            rows.append(row + (r["wall_seconds"], r["removed"]))
                            print(
                                f"{objective:10s} k={k} seed={seed} {label:12s} done earlier: {r['value']:.4f}",
                                flush=True,
                            )
                            continue
                        over = [f"search.params.{name}.{p}={str(v).lower()}" for p, v in params.items()]
                        d = f"{args.out}/{label.replace('+', '-')}-{objective}-k{k}-s{seed}"
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
                        at = reach(r["history"], greedy_best)
                        rows.append(
                            (
                                objective,
                                k,
                                seed,
                                label,
                                r["value"],
                                r["budget_used"],
                                at,
                                cost,
                                r["wall_seconds"],
                                r["removed"],
                            )
                        )
                        g = first.get(REFERENCE)
                        race = r.get("race") or {}
                        with open(os.path.join(args.out, "matched.jsonl"), "a") as f:  # --plot reads these
                            f.write(
                                json.dumps(
                                    {
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
                                        "n_seq": args.n_seq,
                                        "seq_len": args.seq_len,
                                        "race": race,
                                        "evaluations": r["evaluations"],
                                        "resumed": resumed,
                                    }
                                )
                                + "\n"
                            )
                        print(
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
                            ),
                            flush=True,
                        )
    return rows


def plot(paths: list[str], out: str) -> None:
    """Best value against budget (x greedy's cost), one panel per (objective, k), a colour per searcher,
    a line style per seed; the dashed line is exact greedy's value. From the matched.jsonl files."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = [json.loads(line) for p in paths for line in open(p) if line.strip()]
    panels = sorted({(r["objective"], r["k"]) for r in rows})
    labels = list(dict.fromkeys([m[0] for m in MATCHED] + [r["searcher"] for r in rows]))
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
                color=f"C{labels.index(r['searcher'])}",
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
    print(f"wrote {out}")


def table(paths: list[str]) -> list[str]:
    """A markdown table (its lines) from matched.jsonl files: per (objective, k, calibration size, seed)
    every searcher's best value, budget used, the budget at which it first reached exact greedy's value
    (<= 1.0001x), computed from its history against the greedy row of the same objective, k and calibration
    (greedy is deterministic: one row stands for every seed), and its wall time against greedy's (comparable
    only when both ran unloaded and neither resumed: a resumed cell's wall time counts only its last part)."""
    rows = [json.loads(line) for p in paths for line in open(p) if line.strip()]
    if not rows:
        raise SystemExit(f"--table: no cells in {', '.join(paths)} (bench/search.py --matched writes them)")
    greedy = {(r["objective"], r["k"], r["n_seq"], r["seq_len"]): r for r in rows if r["searcher"] == REFERENCE}
    order = list(dict.fromkeys([m[0] for m in MATCHED] + [r["searcher"] for r in rows]))
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


def into(doc: str, table_lines: list[str]) -> None:
    """Replace, in the markdown file ``doc``, the matched table whose first row has the same calibration
    and k as ``table_lines``' first row by ``table_lines`` (header, separator and rows: the block runs to the
    first line that is not a table row). No such table: an error that names it, and the file untouched."""
    key = table_lines[2].split("|")[1:3]
    label = "|".join(key)
    lines = open(doc).read().split("\n")
    at = [
        i
        for i in range(len(lines) - 2)
        if lines[i] == table_lines[0] and lines[i + 1] == table_lines[1] and lines[i + 2].split("|")[1:3] == key
    ]
    if len(at) != 1:
        raise SystemExit(
            f"--into {doc}: {len(at)} matched tables whose first row starts '|{label}|' (need exactly one); "
            "paste the table once by hand (bench/search.py --table FILE), then --into keeps it current"
        )
    i = j = at[0]
    while j < len(lines) and lines[j].startswith("|"):
        j += 1
    lines[i:j] = table_lines
    write_text_atomic(doc, "\n".join(lines))  # whole or not at all
    print(f"{doc}: the '{label.strip()}' table now has {len(table_lines) - 2} rows (was {j - i - 2})")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--matched", action="store_true")
    ap.add_argument("overrides", nargs="*", help="--matched: key=value config overrides, e.g. model=DIR")
    ap.add_argument("--objectives", default="perplexity")
    ap.add_argument("--ks", default="6")
    ap.add_argument("--seeds", default="0")
    ap.add_argument("--actors", type=int, default=2)
    ap.add_argument("--searchers", default=None, help="--matched: a comma list of " + ",".join(m[0] for m in MATCHED))
    ap.add_argument(
        "--greedy-value",
        type=float,
        default=None,
        help="--matched without greedy: exact greedy's best value, the target to reach",
    )
    ap.add_argument("--from-run", default=None)
    ap.add_argument("--out", default="runs/bench-search")
    ap.add_argument("--k", type=int, default=6)
    ap.add_argument("--objective", default="perplexity")
    ap.add_argument("--n-seq", type=int, default=8)
    ap.add_argument("--seq-len", type=int, default=128)
    ap.add_argument("--plot", default=None, help="comma list of matched.jsonl files: draw their curves to --plot-out")
    ap.add_argument("--plot-out", default="matched.png")
    ap.add_argument("--table", default=None, help="comma list of matched.jsonl files: print their markdown table")
    ap.add_argument("--into", default=None, help="--table: replace that table in this markdown file")
    args = ap.parse_args()
    if args.into and not args.table:
        raise SystemExit("--into needs --table (the matched.jsonl files whose table it replaces)")
    if args.table:
        lines = table(args.table.split(","))
        if args.into:
            into(args.into, lines)
        else:
            print("\n".join(lines))
        return
    if args.plot:
        plot(args.plot.split(","), args.plot_out)
        return
    if args.from_run:
        report(args.from_run, args.objective, args.k)
        return
    if args.matched:
        matched(args)
        return
    from ghostsearch.config import load_config
    from ghostsearch.model.models import model_depth
    from ghostsearch.pool.session import PoolSession
    from ghostsearch.rundir import close_run_dir, open_run_dir
    from ghostsearch.study.compare import grid, run_cells

    cfg = load_config(
        None,
        [
            f"k={args.k}",
            f"objective={args.objective}",
            f"out={args.out}",
            f"calibration.n_seq={args.n_seq}",
            f"calibration.seq_len={args.seq_len}",
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
    report(run_dir, args.objective, args.k)


if __name__ == "__main__":
    main()
