"""Racing replayed on exact greedy's path (issue 27): where a race's evaluations go, at no model cost.

  # 1. score: walk exact greedy's path, every candidate of every step on every calibration row (the model)
  nice -n 10 python bench/race_replay.py --score --k 8 --n-seq 64 --seq-len 64 --threads 1
  # 2. replay: races with the real racing code (ghostsearch.search.racing) on the stored rows (no model)
  python bench/race_replay.py --k 6                     # the default RaceParams, per step
  python bench/race_replay.py --k 6 --race '{min_rows: 8, growth: 1.5}'
  python bench/race_replay.py --k 6 --sweep             # a grid of policies, k = 6 only

``--score`` uses the same configuration as ``bench/search.py --matched --n-seq N --seq-len T``
(``calibration.n_seq``, ``calibration.seq_len``, ``search.protected=[0,-1]``, the configured model and
objective, perplexity), one in-process Scorer, and writes one Parquet file per greedy step to
``--dir`` (default docs/results/bench-race-64/): per candidate R ∪ {j} (R the exact step's prefix):
the per-row loss sums in calibration-row order (the objective's ``row_losses``), the per-row counts,
and the full value. Each step's winner is the exact greedy's choice (best value, ties: the smaller
set), so steps 1..k of the files are exact greedy's path; a killed run resumes at the first missing
step. The exact greedy's cost is the number of candidates (each at fidelity 1).

The replay feeds those rows to ``racing.run_race`` through an in-memory ``RowEvaluator`` (the rows a
look asks, in the race order), so every decision is the library's own: per step, the evaluations
used (fidelity n/N per candidate), the winner and whether it equals the exact step's winner, and
where the evaluations went (per look: survivors; per candidate: rows seen). The floor of a step is
1 (its winner at full fidelity) plus the first look for every other candidate.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import time
from pathlib import Path

import benchenv  # noqa: F401  (the repository on sys.path, offline HF, ../shared/data as the data directory)
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from ghostsearch.search import Candidate, Race, RaceParams  # noqa: E402
from ghostsearch.search.racing import race_params, run_race  # noqa: E402

DIR = Path(__file__).resolve().parents[1] / "docs" / "results" / "bench-race-64"


def step_path(d: Path, step: int) -> Path:
    return d / f"step{step}.parquet"


# ---------------------------------------------------------------- scoring (the model)
def score(args) -> None:
    os.environ.setdefault("OMP_NUM_THREADS", str(args.threads))
    import torch

    from ghostsearch.config import load_config, protected_blocks
    from ghostsearch.model.models import model_depth
    from ghostsearch.scoring import scorer_from_config

    torch.set_num_threads(args.threads)
    cfg = load_config(
        None,
        [
            f"calibration.n_seq={args.n_seq}",
            f"calibration.seq_len={args.seq_len}",
            "search.protected=[0,-1]",
            f"objective={args.objective}",
        ],
    )
    L = model_depth(cfg.model)
    free = [j for j in range(L) if j not in protected_blocks(cfg, L)]
    spec = cfg.objective_spec(args.objective)
    sc = scorer_from_config(cfg, threads=args.threads)
    key = sc.prepare(spec)
    value_of = spec.build().value
    N = sc.prepared[key].n_rows
    counts = [float(c) for c in sc.statistic(key, "row_counts")]
    meta = {
        "model": cfg.model,
        "objective": args.objective,
        "calibration": json.dumps(
            {k: getattr(spec.calibration, k) for k in ("dataset", "n_seq", "seq_len", "seed", "micro_batch")}
        ),
        "rows": str(N),
        "blocks": str(L),
        "threads": str(args.threads),
    }
    args.dir.mkdir(parents=True, exist_ok=True)
    R: tuple = ()
    for step in range(1, args.k + 1):
        path = step_path(args.dir, step)
        if path.exists():  # resumed: the step is done; its winner is the next prefix
            t = pq.read_table(path).to_pylist()
            R = tuple(min(t, key=lambda r: (r["value"], tuple(r["removed"])))["removed"])
            print(f"step {step}: read {path.name}; exact greedy takes {R}", flush=True)
            continue
        cands = [tuple(sorted(R + (j,))) for j in free if j not in R]
        recs, t0 = [], time.perf_counter()
        for c in cands:
            r = sc.score_rows(key, c, range(N), prefix=R or None)
            assert list(r.counts) == counts, "per-row counts depend on the candidate: the replay's ranking is void"
            recs.append(
                {
                    "step": step,
                    "prefix": list(R),
                    "block": [j for j in c if j not in R][0],
                    "removed": list(c),
                    "value": float(value_of(sum(r.sums), sum(counts))),
                    "row_losses": [float(s) for s in r.sums],
                    "row_counts": counts,
                    "seconds": r.seconds,
                }
            )
        table = pa.Table.from_pylist(recs).replace_schema_metadata(meta)
        pq.write_table(table, path.with_suffix(".tmp"))
        os.replace(path.with_suffix(".tmp"), path)
        R = tuple(min(recs, key=lambda r: (r["value"], tuple(r["removed"])))["removed"])
        v = min(r["value"] for r in recs)
        print(
            f"step {step}: {len(cands)} candidates in {time.perf_counter() - t0:.0f}s; exact greedy takes {R} "
            f"({v:.4f})",
            flush=True,
        )


# ---------------------------------------------------------------- replay (no model)
class StoredRows:
    """A RowEvaluator over stored per-row losses: {removed: (sums[N], counts[N])} in calibration-row
    order; a request's rows are looked up, its value is the objective's on every row seen so far."""

    def __init__(self, table: dict, value_of):
        self.table, self.value_of = table, value_of
        self.n = len(next(iter(table.values()))[0])
        self.looks: list[tuple[int, int]] = []  # per look: survivors, rows

    def n_rows(self) -> int:
        return self.n

    def rows(self, requests, searcher=""):
        self.looks.append((len(requests), len(requests[0].rows)))
        out = []
        for q in requests:
            sums, counts = self.table[q.removed]
            s = [float(sums[r]) for r in q.rows]
            c = [float(counts[r]) for r in q.rows]
            out.append((s, c, self.value_of(q.before[0] + sum(s), q.before[1] + sum(c))))
        return out


def load_steps(d: Path, k: int) -> list[list[dict]]:
    steps = []
    for step in range(1, k + 1):
        path = step_path(d, step)
        if not path.exists():
            raise SystemExit(f"{path} is missing: run --score --k {k} first")
        steps.append(pq.read_table(path).to_pylist())
    return steps


def perplexity(total: float, count: float) -> float:
    return math.exp(total / count)


def winner(recs: list[dict]) -> int:
    """The index of a step's exact winner (its best value over every row; ties go to the smaller set)."""
    return min(range(len(recs)), key=lambda i: (recs[i]["value"], tuple(recs[i]["removed"])))


def replay_step(recs: list[dict], params: RaceParams) -> dict:
    """One greedy step raced on the stored rows (run_race itself): cost, winner, the exact winner."""
    table = {tuple(r["removed"]): (r["row_losses"], r["row_counts"]) for r in recs}
    ev = StoredRows(table, perplexity)
    cands = [Candidate(tuple(r["removed"]), prefix=tuple(r["prefix"]) or None) for r in recs]
    out = run_race(Race(cands, params, keep=1), ev, "replay")
    used = sum(c.fidelity for c in out.told)
    full = [(v, c.removed) for c, v in zip(out.told, out.values) if c.fidelity >= 1.0]
    exact = min((r["value"], tuple(r["removed"])) for r in recs)
    N = ev.n
    first = params.schedule(N)[0] / N
    rows_seen = sorted(round(c.fidelity * N) for c in out.told)
    X = {tuple(r["removed"]): np.asarray(r["row_losses"]) for r in recs}
    near = 0.0  # what the near-ties cost: rivals whose mean paired difference is < 1/3 of its sd
    for c in out.told:
        d = X[c.removed] - X[exact[1]]
        if c.removed != exact[1] and d.mean() < d.std(ddof=1) / 3:
            near += c.fidelity
    return {
        "candidates": len(recs),
        "used": used,
        "winner": min(full)[1],
        "exact": exact[1],
        "same": min(full)[1] == exact[1],
        "finished": len(full),
        "looks": ev.looks,
        "rows_seen": rows_seen,
        "by_rows": {n: rows_seen.count(n) * n / N for n in sorted(set(rows_seen))},
        "floor": 1 + (len(recs) - 1) * first,
        "ideal": ideal(recs, params),
        "near": near,
    }


def ideal(recs: list[dict], params: RaceParams) -> float:
    """An idealised race, for scale (not a policy: it knows which candidate wins): every rival is
    dropped at the first row count n (any n >= 2, every n a free look) at which its paired mean
    difference from the exact winner, in race order, exceeds z_{1 - delta / (m - 1)} standard errors
    (normal quantile, finite-population corrected); the winner costs 1. What a race that spends a
    union bound over the rivals could cost at best on these rows, give or take its looks' price."""
    from scipy import stats

    N = len(recs[0]["row_losses"])
    order = params.order(N)
    X = np.array([r["row_losses"] for r in recs])[:, order]
    w = winner(recs)
    z = stats.norm.ppf(1 - params.delta / max(1, len(recs) - 1))
    cost = 1.0
    for i in range(len(recs)):
        if i == w:
            continue
        d = X[i] - X[w]
        for n in range(2, N + 1):
            if n == N:
                cost += 1.0
                break
            se = d[:n].std(ddof=1) / math.sqrt(n) * math.sqrt(1 - n / N)
            if d[:n].mean() > z * se:
                cost += n / N
                break
    return cost


def replay(steps: list[list[dict]], params: RaceParams, verbose: bool = True) -> dict:
    total = exact = floor = best = near = 0.0
    same = True
    for t, recs in enumerate(steps, 1):
        r = replay_step(recs, params)
        total, exact, floor = total + r["used"], exact + r["candidates"], floor + r["floor"]
        best += r["ideal"]
        near += r["near"]
        same &= r["same"]
        if verbose:
            rows = r["rows_seen"]
            hist = ", ".join(f"{n}:{rows.count(n)} ({c:.2f})" for n, c in r["by_rows"].items())
            print(
                f"  step {t}: {r['candidates']:2d} candidates, used {r['used']:6.3f} "
                f"({r['used'] / r['candidates']:.2f}x), floor {r['floor']:5.2f}, ideal {r['ideal']:5.2f}; "
                f"survivors per look {[s for s, _ in r['looks']]}; "
                f"candidates by rows seen (rows: candidates (evaluations)) {hist}; winner {list(r['winner'])} "
                f"{'= exact' if r['same'] else '!= exact ' + str(list(r['exact']))}"
            )
    return {
        "used": total,
        "exact": exact,
        "ratio": total / exact,
        "floor": floor,
        "ideal": best,
        "near": near,
        "same": same,
    }


def live(run_dir: str, steps: list[list[dict]], params: RaceParams, save: str | None = None) -> None:
    """A live raced greedy run's ledger (a run directory or a saved .parquet) against the replay, step
    by step: evaluations (the ledger's cost), winner, and the largest difference between a row loss
    the live race scored (its looks' rows, in race order, stacked by score_rows_many) and the stored
    one (score_rows, every row)."""
    from ghostsearch.rundir.ledger import read_ledger

    table = pq.read_table(run_dir) if run_dir.endswith(".parquet") else read_ledger(run_dir)
    if save:  # the run's ledger as one file (docs/results/bench-race-64/live-k<k>.parquet)
        pq.write_table(table, save)
    rows = table.to_pylist()
    N = len(steps[0][0]["row_losses"])
    order = params.order(N)
    total_live = total_replay = 0.0
    for t, recs in enumerate(steps, 1):
        mine = [r for r in rows if len(r["removed"]) == t]
        if not mine:
            print(f"  step {t}: not in the live run")
            continue
        stored = {tuple(r["removed"]): r["row_losses"] for r in recs}
        seen: dict[tuple, list[float]] = {}
        for r in sorted(mine, key=lambda r: r["time"]):
            seen.setdefault(tuple(r["removed"]), []).extend(r["row_losses"] or [])
        diff = max(
            abs(a - stored[c][int(order[i])]) / abs(stored[c][int(order[i])])
            for c, xs in seen.items()
            for i, a in enumerate(xs)
        )
        cost = sum(r["cost"] for r in mine)
        won = min((r["value"], tuple(r["removed"])) for r in mine if r["fidelity"] >= 1.0)[1]
        rep = replay_step(recs, params)
        total_live, total_replay = total_live + cost, total_replay + rep["used"]
        print(
            f"  step {t}: live {cost:7.4f} / replay {rep['used']:7.4f} evaluations; live winner {list(won)}, replay "
            f"{list(rep['winner'])}; rows per candidate live {sorted(len(x) for x in seen.values())}; largest "
            f"relative row-loss difference {diff:.1e}"
        )
    print(f"live {total_live:.4f} vs replay {total_replay:.4f} evaluations")


def describe(p: RaceParams) -> str:
    return f"delta={p.delta:g} min_rows={p.min_rows} growth={p.growth:g} bound={p.bound}" + (
        f" range={p.range:g}" if p.range is not None else ""
    )


def parse_race(text: str | None) -> RaceParams:
    if not text:
        return RaceParams()
    import yaml

    p = race_params(yaml.safe_load(text))
    assert p is not None
    return p


def sweep(steps, grid: list[dict]) -> None:
    """Every policy of ``grid`` replayed on ``steps`` (totals only), cheapest first."""
    N = len(steps[0][0]["row_losses"])
    out = []
    for g in grid:
        p = RaceParams(**g)
        out.append((replay(steps, p, verbose=False), p))
    print(
        f"| policy | looks at {N} rows | evaluations (of exact) | ratio | floor | ideal | near-ties' cost "
        "| same winners |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for r, p in sorted(out, key=lambda x: (x[0]["used"], x[1].min_rows, x[1].growth)):
        print(
            f"| {describe(p)} | {p.schedule(N)} | {r['used']:.2f} of {r['exact']:.0f} | {r['ratio']:.3f}x | "
            f"{r['floor'] / r['exact']:.3f}x | {r['ideal'] / r['exact']:.3f}x | {r['near']:.2f} | "
            f"{'yes' if r['same'] else 'NO'} |"
        )


def decompose(steps, policies: list[RaceParams]) -> None:
    """What each part of the guarantee costs on these rows: each policy replayed as is, at delta 0.1
    and 0.2 (a weaker promise), and with one part of the bound removed by patching the racing
    module for the replay only: the union over the looks (alpha = delta / (m - 1)), the union over the
    rivals (alpha = delta / (looks - 1)), both (alpha = delta), and the Student-t quantile replaced by
    the normal one. The patched rows are NOT policies: none of them keeps the guarantee."""
    from scipy import stats

    import ghostsearch.search.racing as racing

    alpha, radius = racing.race_alpha, racing.radius

    def normal(D, n_total, a, params):
        n = D.shape[-1]
        return stats.norm.ppf(1 - a) * D.std(-1, ddof=1) / math.sqrt(n) * math.sqrt(1 - n / n_total)

    variants = [
        ("as is", {}, alpha, radius),
        ("delta 0.1", {"delta": 0.1}, alpha, radius),
        ("delta 0.2", {"delta": 0.2}, alpha, radius),
        ("no union over the looks (unsound)", {}, lambda d, k, m, n: d / (k * max(1, m - 1)), radius),
        ("no union over the rivals (unsound)", {}, lambda d, k, m, n: d / max(1, n - 1), radius),
        ("no union at all, alpha = delta (unsound)", {}, lambda d, k, m, n: d, radius),
        ("normal quantile instead of t (unsound for heavy tails)", {}, alpha, normal),
    ]
    print("| policy | variant | evaluations (of exact) | ratio | same winners |")
    print("|---|---|---|---|---|")
    try:
        for p in policies:
            for name, over, a, rad in variants:
                racing.race_alpha, racing.radius = a, rad  # type: ignore[assignment]  # the ablation swaps the rules
                q = RaceParams(**{**{f: getattr(p, f) for f in RaceParams.__dataclass_fields__}, **over})
                r = replay(steps, q, verbose=False)
                print(
                    f"| min_rows={p.min_rows} growth={p.growth:g} | {name} | {r['used']:.2f} of {r['exact']:.0f} | "
                    f"{r['ratio']:.3f}x | {'yes' if r['same'] else 'NO'} |",
                    flush=True,
                )
    finally:
        racing.race_alpha, racing.radius = alpha, radius


def bound_check(policies: list[RaceParams]) -> None:
    """tests/search/test_racing_bound.py's false-drop simulation (its populations, 2,000 races a case,
    4 candidates, 8/16/64/128 rows) run with each policy's schedule: the worst rate over its normal,
    t2, t3 and near-tie cases against the test's limit (delta + 3 Monte-Carlo s.e.)."""
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "search"))
    import test_racing_bound as tb

    for p in policies:
        q = RaceParams(delta=tb.DELTA, min_rows=p.min_rows, growth=p.growth)
        worst = max(tb.false_drops(c, n, q)[0] for c in ("normal", "t2", "t3", "near-tie") for n in tb.ROWS)
        print(
            f"min_rows={q.min_rows} growth={q.growth:g}: worst false-drop rate {worst:.4f}, limit {tb.LIMIT:.4f}: "
            f"{'pass' if worst <= tb.LIMIT else 'FAIL'}",
            flush=True,
        )


SPENDING = ("uniform", "sqrt", "rows", "rows2")


def look_weights(looks: list[int], kind: str) -> np.ndarray:
    """The share of alpha each look before the last gets: uniform (racing's), or proportional to the
    rows seen (n), its square root or its square (less alpha early, where the t quantile is huge)."""
    n = np.asarray(looks[:-1], float)
    w = {"uniform": np.ones_like(n), "sqrt": np.sqrt(n), "rows": n, "rows2": n**2}[kind]
    return w / w.sum()


def spent_race(X: np.ndarray, params: RaceParams, kind: str, keep: int = 1) -> tuple[np.ndarray, np.ndarray]:
    """racing.simulate with the looks' alpha weighted by ``look_weights`` (a Bonferroni split with
    weights fixed before the data, so as sound as the uniform one): (alive, cost) of X [races, m, N]."""
    from ghostsearch.search.racing import simulate

    m, N = X.shape[1:]
    alphas = params.delta / (keep * max(1, m - 1)) * look_weights(params.schedule(N), kind)
    return simulate(X, params, keep, alphas=list(alphas))


def spending(steps: list[list[dict]], policies: list[RaceParams]) -> None:
    """Alpha spent unevenly over the looks (``look_weights``): the replayed cost on these rows and the
    worst false-drop rate of tests/search/test_racing_bound.py's simulation (normal, t2, t3, near-tie;
    8-128 rows) against its limit."""
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "search"))
    import test_racing_bound as tb

    print("| policy | alpha over the looks | evaluations (of exact) | ratio | same winners | worst false-drop rate |")
    print("|---|---|---|---|---|---|")
    for p in policies:
        for kind in SPENDING:
            used = total = 0.0
            same = True
            for recs in steps:
                N = len(recs[0]["row_losses"])
                X = np.array([r["row_losses"] for r in recs])[:, p.order(N)][None]
                alive, cost = spent_race(X, p, kind)
                w = winner(recs)
                same &= bool(alive[0, w]) and int(alive[0].sum()) == 1
                used, total = used + float(cost[0]), total + len(recs)
            q = RaceParams(delta=tb.DELTA, min_rows=p.min_rows, growth=p.growth)
            worst = max(
                1.0 - spent_race(tb.population(c, n, 0), q, kind)[0][:, 0].mean()
                for c in ("normal", "t2", "t3", "near-tie")
                for n in tb.ROWS
            )
            print(
                f"| {describe(p)} | {kind} | {used:.2f} of {total:.0f} | {used / total:.3f}x | "
                f"{'yes' if same else 'NO'} | {worst:.4f} (limit {tb.LIMIT:.4f}) |",
                flush=True,
            )


def max_alpha(R: np.ndarray, a_look: float, draws: int = 400_000, seed: int = 0) -> float:
    """The per-comparison level at which the largest of the rivals' correlated normal statistics
    (correlation R) exceeds its quantile with probability ``a_look``: Dunnett's correction, where the
    union bound's is a_look / len(R). Monte Carlo, seeded."""
    from scipy import stats

    z = np.random.default_rng(seed).standard_normal((draws, len(R))) @ np.linalg.cholesky(R + 1e-9 * np.eye(len(R))).T
    return float(1 - stats.norm.cdf(np.quantile(z.max(1), 1 - a_look)))


def correlation(steps: list[list[dict]], policies: list[RaceParams]) -> None:
    """What a union bound that knew the rivals' correlation could save (an oracle, not a policy): per
    step, the correlation of every rival's per-row difference from the exact winner over all rows, a
    Dunnett-type per-comparison alpha from it (``max_alpha``), and the race replayed at that alpha.
    'effective rivals' = the look's alpha / that alpha (the union bound's is m - 1)."""
    for p in policies:
        used = total = 0.0
        same, eff = True, []
        for recs in steps:
            N, m = len(recs[0]["row_losses"]), len(recs)
            X = np.array([r["row_losses"] for r in recs])[:, p.order(N)]
            w = winner(recs)
            looks = len(p.schedule(N)) - 1
            a = max_alpha(np.corrcoef(np.delete(X - X[w], w, axis=0)), p.delta / looks)
            eff.append(f"{p.delta / looks / a:.1f} of {m - 1}")
            q = RaceParams(
                **{**{f: getattr(p, f) for f in RaceParams.__dataclass_fields__}, "delta": a * (m - 1) * looks}
            )
            alive, cost = spent_race(X[None], q, "uniform")
            same &= bool(alive[0, w]) and int(alive[0].sum()) == 1
            used, total = used + float(cost[0]), total + m
        print(
            f"{describe(p)}: with the rivals' correlation known, {used:.2f} of {total:.0f} ({used / total:.3f}x), "
            f"same winners: {'yes' if same else 'NO'}; effective rivals per step: {', '.join(eff)}",
            flush=True,
        )


SWEEP = [{"min_rows": m, "growth": g} for m in (2, 3, 4, 6, 8, 12, 16) for g in (1.25, 1.5, 2.0, 3.0)]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--score", action="store_true", help="walk exact greedy's path with the model (slow)")
    ap.add_argument("--k", type=int, default=6)
    ap.add_argument("--n-seq", type=int, default=64)
    ap.add_argument("--seq-len", type=int, default=64)
    ap.add_argument("--objective", default="perplexity")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--dir", type=Path, default=DIR)
    ap.add_argument("--race", default=None, help="a race mapping in YAML, e.g. '{min_rows: 8}' (default: RaceParams())")
    ap.add_argument("--sweep", action="store_true", help="replay a grid of policies (totals only)")
    ap.add_argument(
        "--decompose", action="store_true", help="the cost of each part of the bound (default and --race policies)"
    )
    ap.add_argument(
        "--spending", action="store_true", help="alpha spent unevenly over the looks (default and --race policies)"
    )
    ap.add_argument(
        "--correlation", action="store_true", help="the union bound with the rivals' correlation known (an oracle)"
    )
    ap.add_argument("--bound", action="store_true", help="the false-drop simulation with the default and --race")
    ap.add_argument(
        "--live", default=None, help="a live raced greedy run directory (or its saved ledger .parquet): vs the replay"
    )
    ap.add_argument("--save-live", default=None, help="--live: write the run's ledger to this .parquet file")
    args = ap.parse_args()
    if args.score:
        score(args)
        return
    if args.bound:
        bound_check([RaceParams()] + ([parse_race(args.race)] if args.race else []))
        return
    steps = load_steps(args.dir, args.k)
    if args.sweep:
        sweep(steps, SWEEP)
        return
    p = parse_race(args.race)
    if args.correlation:
        correlation(steps, [RaceParams()] + ([p] if args.race else []))
        return
    if args.spending:
        spending(steps, [RaceParams()] + ([p] if args.race else []))
        return
    if args.decompose:
        decompose(steps, [RaceParams()] + ([p] if args.race else []))
        return
    if args.live:
        live(args.live, steps, p, args.save_live)
        return
    print(f"replay, k={args.k}, {describe(p)}, {len(steps[0][0]['row_losses'])} rows")
    r = replay(steps, p)
    print(
        f"raced {r['used']:.3f} of exact greedy's {r['exact']:.0f} evaluations ({r['ratio']:.3f}x); floor "
        f"{r['floor']:.2f} ({r['floor'] / r['exact']:.3f}x); ideal {r['ideal']:.2f} ({r['ideal'] / r['exact']:.3f}x); "
        f"near-ties (rivals within 1/3 sd of the winner) cost {r['near']:.2f}; "
        f"every step's winner = exact's: {r['same']}"
    )


if __name__ == "__main__":
    main()
