"""Racing replayed on exact greedy's path (issue 27): where a race's evaluations go, at no model cost.
The stored rows (bench/race_replay.py --score writes one Parquet file per greedy step: every
candidate's per-row losses) are fed to ``racing.run_race`` through an in-memory ``RowEvaluator``
(:class:`StoredRows`), so every decision is the library's own: per step the evaluations used, the
winner against the exact one, where the evaluations went (:func:`replay_step`, :func:`replay`); an
idealised race for scale (:func:`ideal`); a grid of policies (:func:`sweep`); what each part of the
bound costs (:func:`decompose`); alpha spent unevenly over the looks (:func:`spent_race`); a union
bound that knew the rivals' correlation (:func:`correlation`); a live run's ledger against the
replay (:func:`live`). The rows themselves are written by :func:`score_path` (exact greedy's path walked
with the model); bench/race_replay.py is the command line."""

from __future__ import annotations

import json
import math
import os
import time
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq

from ghostsearch.search import Candidate, Race, RaceParams
from ghostsearch.search.racing import race_params, run_race


def step_path(d: Path, step: int) -> Path:
    return d / f"step{step}.parquet"


def score_path(cfg, d: Path, k: int, objective: str, threads: int) -> None:
    """Walks exact greedy's path for ``k`` steps with one in-process Scorer (the configured model and
    calibration) and writes one Parquet file per step to ``d`` (what :func:`load_steps` reads): per candidate
    R ∪ {j} (R the exact step's prefix, j every free block) the per-row loss sums in calibration-row order (the
    objective's ``row_losses``), the per-row counts, the full value and its seconds; the metadata names the
    model, objective, calibration, rows, blocks and threads. Each step's winner is exact greedy's choice (best
    value, ties: the smaller set); a step whose file exists is read, not scored (a killed run resumes)."""
    import pyarrow as pa

    from ghostsearch.config import protected_blocks
    from ghostsearch.model.models import model_depth
    from ghostsearch.scoring import scorer_from_config

    L = model_depth(cfg.model)
    free = [j for j in range(L) if j not in protected_blocks(cfg, L)]
    spec = cfg.objective_spec(objective)
    sc = scorer_from_config(cfg, threads=threads)
    key = sc.prepare(spec)
    value_of = spec.build().value
    N = sc.prepared[key].n_rows
    counts = [float(c) for c in sc.statistic(key, "row_counts")]
    fields = ("dataset", "n_seq", "seq_len", "seed", "micro_batch")
    meta = {
        "model": cfg.model,
        "objective": objective,
        "calibration": json.dumps({f: getattr(spec.calibration, f) for f in fields}),
        "rows": str(N),
        "blocks": str(L),
        "threads": str(threads),
    }
    d.mkdir(parents=True, exist_ok=True)
    R: tuple = ()
    for step in range(1, k + 1):
        path = step_path(d, step)
        if path.exists():  # resumed: the step is done; its winner is the next prefix
            t = pq.read_table(path).to_pylist()
            R = tuple(t[winner(t)]["removed"])
            print(f"step {step}: read {path.name}; exact greedy takes {R}", flush=True)
            continue
        cands = [tuple(sorted(R + (j,))) for j in free if j not in R]
        recs, t0 = [], time.perf_counter()
        for c in cands:
            r = sc.score_rows(key, c, range(N), prefix=R or None)
            if list(r.counts) != counts:
                raise RuntimeError("per-row counts depend on the candidate: the replay's ranking is void")
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
        R = tuple(recs[winner(recs)]["removed"])
        v = min(r["value"] for r in recs)
        print(
            f"step {step}: {len(cands)} candidates in {time.perf_counter() - t0:.0f}s; exact greedy takes {R} "
            f"({v:.4f})",
            flush=True,
        )


class StoredRows:
    """A RowEvaluator over stored per-row losses: {removed: (sums[N], counts[N])} in calibration-row
    order; a request's rows are looked up, its value is the objective's on every row seen so far."""

    def __init__(self, table: dict, value_of):
        self.table, self.value_of = table, value_of
        self.n = len(next(iter(table.values()))[0])
        self.looks: list[tuple[int, int]] = []  # per look: survivors, rows
        self.asked: list[tuple[list[tuple], tuple]] = []  # per look: the survivors' removed sets, the rows

    def n_rows(self) -> int:
        return self.n

    def rows(self, requests, searcher=""):
        self.looks.append((len(requests), len(requests[0].rows)))
        self.asked.append(([q.removed for q in requests], tuple(requests[0].rows)))
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


def path_table(d: Path, k: int) -> dict:
    """removed set (sorted) -> (value, row sums, row counts) of every candidate of the stored path's first
    ``k`` steps: what a stand-in scorer answers with (``pool.standin.standin_class``'s table)."""
    return {
        tuple(sorted(r["removed"])): (r["value"], r["row_losses"], r["row_counts"])
        for recs in load_steps(d, k)
        for r in recs
    }


def race_looks(d: Path, which: list[int], actors: int = 2) -> list[tuple[int, tuple, list[tuple], tuple]]:
    """The looks raced greedy makes at steps ``which`` of the stored path in ``d`` (survivors as the live race
    had them), each split into ``actors`` scorers' row shares as ``Broker.rows`` splits it
    (``pool.actors.shares``): per share (step, prefix, [removed], rows), one rows tuple for all its candidates."""
    from ghostsearch.pool.actors import shares

    out = []
    for t in which:
        recs = pq.read_table(step_path(d, t)).to_pylist()
        prefix = tuple(sorted(recs[0]["prefix"] or []))
        ev = StoredRows({tuple(r["removed"]): (r["row_losses"], r["row_counts"]) for r in recs}, perplexity)
        cands = [Candidate(tuple(r["removed"]), prefix=prefix or None) for r in recs]
        run_race(Race(cands, RaceParams(), keep=1), ev, "replay")
        for removed, rows in ev.asked:
            for group, (_, lo, hi) in shares(list(range(len(removed))), len(rows), actors):
                out.append((t, prefix, [removed[j] for j in group], rows[lo:hi]))
    return out


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


# ---------------------------------------------------------------- the racing bound, simulated
# the populations the bound is held to (tests/search/test_racing_bound.py) and a policy is priced on
RACES, M, DELTA = 2000, 4, 0.05
LIMIT = DELTA + 3 * math.sqrt(DELTA * (1 - DELTA) / RACES)  # delta plus three Monte-Carlo standard errors
ROWS = [8, 16, 64, 128]
CASES = ("normal", "t2", "t3", "near-tie")  # the cases the t bound must hold on


def population(case: str, n_rows: int, seed: int) -> np.ndarray:
    """Per-row losses X [RACES, M, n_rows] of M candidates, in a random row order; candidate 0 is the
    true best (lowest mean over all rows). Rival minus best, per row:
    normal / t2 / t3: 0.3 + noise (sd 1 for normal); near-tie: 0.02 + N(0, 1);
    outlier (the issue's construction): the best loses by 0.1 on 7 of every 8 rows and wins by 0.9
    on the 8th (noise 0.01), so that it is best by 0.0125 a row overall."""
    rng = np.random.default_rng([seed, n_rows, len(case)])
    shared = rng.normal(0, 3, (RACES, 1, n_rows))  # row difficulty, common to every candidate (pairing cancels it)
    shape = (RACES, M - 1, n_rows)
    if case == "normal":
        e = 0.3 + rng.normal(0, 1, shape)
    elif case in ("t2", "t3"):
        e = 0.3 + rng.standard_t(int(case[1]), shape)
    elif case == "near-tie":
        e = 0.02 + rng.normal(0, 1, shape)
    else:
        outlier = np.argsort(rng.random((RACES, n_rows)), axis=1) < max(1, n_rows // 8)
        e = np.where(outlier[:, None, :], 0.9, -0.1) + rng.normal(0, 0.01, shape)
    mean = e.mean(-1, keepdims=True)
    e = np.where(mean > 0, e, e - mean + 1e-3)  # a finite draw can tip a rival below the best: shift it back
    return np.concatenate([shared, shared + e], 1)


def false_drops(case: str, n_rows: int, params: RaceParams) -> tuple[float, float]:
    """(the rate the true best is dropped, the mean cost per candidate) of ``params`` on a case."""
    from ghostsearch.search.racing import simulate

    alive, cost = simulate(population(case, n_rows, 0), params)
    return 1.0 - alive[:, 0].mean(), cost.mean() / M


def bound_check(policies: list[RaceParams]) -> None:
    """The false-drop simulation (:func:`population`: 2,000 races a case, 4 candidates,
    8/16/64/128 rows; tests/search/test_racing_bound.py holds the bound to it) run with each policy's
    schedule: the worst rate over its normal, t2, t3 and near-tie cases against the limit (delta + 3
    Monte-Carlo s.e.)."""
    for p in policies:
        q = RaceParams(delta=DELTA, min_rows=p.min_rows, growth=p.growth)
        worst = max(false_drops(c, n, q)[0] for c in CASES for n in ROWS)
        print(
            f"min_rows={q.min_rows} growth={q.growth:g}: worst false-drop rate {worst:.4f}, limit {LIMIT:.4f}: "
            f"{'pass' if worst <= LIMIT else 'FAIL'}",
            flush=True,
        )


def spending(steps: list[list[dict]], policies: list[RaceParams]) -> None:
    """Alpha spent unevenly over the looks (``look_weights``): the replayed cost on these rows and the
    worst false-drop rate of the simulation (:func:`population`: normal, t2, t3, near-tie; 8-128 rows)
    against its limit."""
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
            q = RaceParams(delta=DELTA, min_rows=p.min_rows, growth=p.growth)
            worst = max(1.0 - spent_race(population(c, n, 0), q, kind)[0][:, 0].mean() for c in CASES for n in ROWS)
            print(
                f"| {describe(p)} | {kind} | {used:.2f} of {total:.0f} | {used / total:.3f}x | "
                f"{'yes' if same else 'NO'} | {worst:.4f} (limit {LIMIT:.4f}) |",
                flush=True,
            )
