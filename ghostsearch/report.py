"""The comparison table, its statistics and the report (Markdown + HTML with PNG plots).

Plots: pruning-pattern heatmap per objective; best-so-far against evaluations and wall seconds;
block-input similarity with LoRP's clusters and RLS; downstream accuracy within and between
objectives; Spearman correlation of calibration value and downstream accuracy per objective and k.
"""
from __future__ import annotations

import html
import json
import math
from collections import defaultdict
from pathlib import Path

import numpy as np
import pyarrow as pa

from ghostsearch.io import write_text_atomic
from ghostsearch.rundir.ledger import read_ledger


# ---------------------------------------------------------------- statistics
def rank(x) -> np.ndarray:
    """Ranks 1..n with ties given their average rank."""
    x = np.asarray(x, dtype=float)
    order = np.argsort(x, kind="mergesort")
    ranks = np.empty(len(x))
    i = 0
    while i < len(x):
        j = i
        while j + 1 < len(x) and x[order[j + 1]] == x[order[i]]:
            j += 1
        ranks[order[i:j + 1]] = (i + j) / 2 + 1
        i = j + 1
    return ranks


def spearman(x, y) -> float:
    """Spearman's rho (Pearson correlation of average ranks); NaN when undefined (n < 2 or a constant)."""
    if len(x) < 2:
        return math.nan
    rx, ry = rank(x), rank(y)
    sx, sy = rx.std(), ry.std()
    if sx == 0 or sy == 0:
        return math.nan
    return float(((rx - rx.mean()) * (ry - ry.mean())).mean() / (sx * sy))


def spearman_ci(x, y, seed: int = 0, n_boot: int = 2000, level: float = 0.95) -> tuple[float, float]:
    """A percentile bootstrap interval of Spearman's rho (rows resampled with replacement, seeded;
    resamples where rho is undefined are skipped). NaN when fewer than 3 rows."""
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    if len(x) < 3:
        return math.nan, math.nan
    rng = np.random.default_rng(seed)
    rhos = [spearman(x[i], y[i]) for i in rng.integers(0, len(x), size=(n_boot, len(x)))]
    rhos = np.array([r for r in rhos if not math.isnan(r)])
    if len(rhos) == 0:
        return math.nan, math.nan
    return float(np.quantile(rhos, (1 - level) / 2)), float(np.quantile(rhos, 1 - (1 - level) / 2))


def _finalists(rows: list[dict]) -> list[dict]:
    return [r for r in rows if r.get("searcher") != "dense"]


def distinct(rows: list[dict]) -> list[dict]:
    """One row per (objective, k, recovery, searcher, removed set): cells that differ only in their
    seed and found the same set (a deterministic searcher on the same calibration sample) are one
    observation, not two; counting them twice would pair a set with its own copy (Jaccard 1) and
    halve a Spearman interval's width for nothing."""
    seen: dict[tuple, dict] = {}
    for r in rows:
        seen.setdefault((r["objective"], r["k"], r.get("recovery") or "none", r.get("searcher"), tuple(r["removed"])), r)
    return list(seen.values())


def correlations(rows: list[dict], acc_key: str = "mean_acc", seed: int = 0) -> list[dict]:
    """Spearman between calibration value and downstream accuracy, per objective, k and recovery,
    over the :func:`distinct` cells, with a seeded bootstrap 95% interval. Lower calibration value is
    better, so a NEGATIVE rho means the calibration ranking agrees with accuracy."""
    groups = defaultdict(list)
    for r in distinct(_finalists(rows)):
        if r.get(acc_key) is not None and not math.isnan(r[acc_key]):
            groups[(r["objective"], r["k"], r.get("recovery") or "none")].append(r)
    out = []
    for (obj, k, rec), g in sorted(groups.items()):
        x, y = [r["calib_value"] for r in g], [r[acc_key] for r in g]
        lo, hi = spearman_ci(x, y, seed)
        out.append({"objective": obj, "k": k, "recovery": rec, "n": len(g), "rho": spearman(x, y),
                    "rho_lo": lo, "rho_hi": hi})
    return out


def spread(rows: list[dict], acc_key: str = "mean_acc") -> dict:
    """Range of downstream accuracy across searchers within each objective (per k, averaged), and the
    range between the objectives' mean accuracies (per k, averaged)."""
    by = defaultdict(list)
    for r in _finalists(rows):
        if r.get(acc_key) is not None and not math.isnan(r[acc_key]):
            by[(r["objective"], r["k"])].append(r[acc_key])
    within = defaultdict(list)
    means = defaultdict(dict)
    for (obj, k), v in by.items():
        within[obj].append(max(v) - min(v))
        means[k][obj] = float(np.mean(v))
    between = [max(m.values()) - min(m.values()) for m in means.values() if len(m) > 1]
    return {"within": {o: float(np.mean(v)) for o, v in within.items()},
            "between": float(np.mean(between)) if between else math.nan,
            "mean_by_objective": {o: float(np.mean([means[k][o] for k in means if o in means[k]]))
                                  for o in {o for m in means.values() for o in m}}}


WEAK_RHO = 0.3  # |Spearman rho| below this is reported as no clear relation
Z95 = 1.96


def interval(r: dict, key: str = "mean_acc") -> tuple[float, float] | None:
    """A row's 95% interval of ``key`` (from its ``<key>_stderr``), or None without one."""
    se = r.get(f"{key}_stderr")
    if se is None or r.get(key) is None or math.isnan(se):
        return None
    return r[key] - Z95 * se, r[key] + Z95 * se


def overlap(a: tuple[float, float] | None, b: tuple[float, float] | None) -> bool:
    """Two 95% intervals overlap: the difference is 'within noise' (the report's stated rule)."""
    return a is not None and b is not None and a[0] <= b[1] and b[0] <= a[1]


def group_mean(rs: list[dict], key: str = "mean_acc") -> tuple[float, tuple[float, float] | None]:
    """The mean of ``key`` over rows and its 95% interval (rows' standard errors, independent)."""
    m = float(np.mean([r[key] for r in rs]))
    ses = [r.get(f"{key}_stderr") for r in rs]
    if any(se is None or math.isnan(se) for se in ses):
        return m, None
    se = math.sqrt(sum(se ** 2 for se in ses)) / len(rs)
    return m, (m - Z95 * se, m + Z95 * se)


def _within(a, b) -> str:
    return " (within noise: the 95% intervals overlap)" if overlap(a, b) else ""


def _summary_one(rows: list[dict], tag: str) -> list[str]:
    lines = []
    sp = spread(rows)
    if sp["mean_by_objective"]:
        by_obj = {o: group_mean([r for r in rows if r["objective"] == o and r.get("mean_acc") is not None])
                  for o in sp["mean_by_objective"]}
        ranked = sorted(by_obj, key=lambda o: -by_obj[o][0])
        best_obj = ranked[0]
        lines.append(f"{tag}Mean downstream accuracy by calibration objective: " + ", ".join(
            f"{o} {by_obj[o][0]:.3f}" + (f" [{by_obj[o][1][0]:.3f}, {by_obj[o][1][1]:.3f}]" if by_obj[o][1] else "")
            for o in sorted(by_obj)) + f"; {best_obj} is highest"
            + (_within(by_obj[ranked[0]][1], by_obj[ranked[1]][1]) if len(ranked) > 1 else "") + ".")
        if not math.isnan(sp["between"]):
            w = float(np.mean(list(sp["within"].values())))
            verdict = ("the objective matters more than the search" if sp["between"] > w
                       else "the search matters as much as or more than the objective")
            lines.append(f"{tag}Accuracy range between objectives {sp['between']:.3f} vs. across searchers within an "
                         f"objective {w:.3f}: {verdict} here.")
    for c in correlations(rows):
        if math.isnan(c["rho"]):
            continue
        ci = f" (95% CI [{c['rho_lo']:+.2f}, {c['rho_hi']:+.2f}])" if not math.isnan(c["rho_lo"]) else ""
        if abs(c["rho"]) < WEAK_RHO:
            verdict = "no clear relation between the calibration ranking and the downstream ranking"
        elif not math.isnan(c["rho_lo"]) and c["rho_lo"] <= 0 <= c["rho_hi"]:
            verdict = "within noise: the interval includes 0"
        else:
            verdict = "the calibration ranking " + ("agrees with" if c["rho"] < 0 else "runs opposite to") + \
                " the downstream ranking"
        lines.append(f"{tag}{c['objective']}, k={c['k']}: Spearman rho(calibration value, accuracy) = {c['rho']:+.2f}"
                     f"{ci} over {c['n']} cells: {verdict}.")
    n_items = [sum(v for key, v in r.items() if key.endswith("_n") and isinstance(v, (int, float)))
               for r in rows if r.get("mean_acc") is not None]
    if n_items and min(n_items) > 0:
        p, n = float(np.mean([r["mean_acc"] for r in rows if r.get("mean_acc") is not None])), min(n_items)
        lines.append(f"{tag}Each cell's mean accuracy rests on {n:.0f} task items (standard error about "
                     f"{math.sqrt(p * (1 - p) / n):.3f}): differences between cells below about twice that are noise.")
    ranked = sorted((r for r in rows if r.get("mean_acc") is not None), key=lambda r: -r["mean_acc"])
    if ranked:
        best = ranked[0]
        noise = ""
        if len(ranked) > 1 and overlap(interval(best), interval(ranked[1])):
            noise = f", within noise of {ranked[1]['cell']} ({ranked[1]['mean_acc']:.3f})"
        lines.append(f"{tag}Best downstream: {best['cell']} removing {best['removed']} (mean acc {best['mean_acc']:.3f}"
                     f"{noise}).")
    return lines


def ranking_changes(rows: list[dict]) -> list[str]:
    """Where repair changes which searcher is best downstream, per (objective, k, seed)."""
    best = defaultdict(dict)
    for r in _finalists(rows):
        if r.get("mean_acc") is None:
            continue
        key = (r["objective"], r["k"], r.get("seed"))
        cur = best[key].get(r.get("recovery") or "none")
        if cur is None or r["mean_acc"] > cur["mean_acc"]:
            best[key][r.get("recovery") or "none"] = r
    out = []
    for (obj, k, seed), by_rec in sorted(best.items(), key=lambda x: str(x[0])):
        if len({b["searcher"] for b in by_rec.values()}) > 1:
            out.append(f"{obj}, k={k}, seed {seed}: the best searcher downstream changes with repair: " + ", ".join(
                f"{rec}: {b['searcher']} ({b['mean_acc']:.3f})" for rec, b in sorted(by_rec.items())) + ".")
    return out


def summary(rows: list[dict]) -> list[str]:
    """Plain sentences on what the comparison shows, per recovery; every "within noise" comes from
    95% intervals overlapping (or a rho interval containing 0), never by hand."""
    rows = _finalists(rows)
    if not rows:
        return ["No finished cells."]
    recs = sorted({r.get("recovery") or "none" for r in rows})
    lines = []
    for rec in recs:
        tag = f"[{rec}] " if len(recs) > 1 else ""
        lines += _summary_one([r for r in rows if (r.get("recovery") or "none") == rec], tag)
    if len(recs) > 1:
        lines += ranking_changes(rows) or ["The best searcher downstream is the same with and without repair in "
                                           "every (objective, k, seed)."]
    return lines


def best_at_budget(run_dir, rows: list[dict], greedy_costs: dict[int, float],
                   fractions=(0.25, 0.5, 1.0)) -> list[dict]:
    """Per cell: the best value of a k-set found within B = fraction x greedy's cost at its k, from
    the ledger's histories (None: nothing found yet at that budget)."""
    curves = best_so_far(run_dir)
    out, seen = [], set()
    for r in _finalists(rows):
        if r["cell"] in seen or r["cell"] not in curves:
            continue
        seen.add(r["cell"])
        c, g = curves[r["cell"]], greedy_costs[r["k"]]
        row = {"cell": r["cell"], "searcher": r["searcher"], "objective": r["objective"], "k": r["k"],
               "budget_used": r.get("budget_used")}
        for f in fractions:
            vals = [v for e, v in zip(c["evaluations"], c["best"]) if e <= f * g + 1e-9]
            row[f"best_at_{f:g}x"] = vals[-1] if vals else None
        out.append(row)
    return out


# ---------------------------------------------------------------- table
ACC_KEYS = ("mean_acc", "ppl_wikitext2", "ppl_c4", "ppl_lambada")


def comparison_table(cfg, results: list[dict], evals: dict, dense: dict | None = None,
                     data_plan: dict | None = None) -> pa.Table:
    """One row for the dense model (first), then one per (cell, recovery): the cell's search result,
    its downstream numbers, and the change against the dense model (``delta_<metric>``)."""
    calib = {r["role"].split(":", 1)[1]: r["used"] for r in (data_plan or {}).get("calibration", [])}
    held_out = ",".join((data_plan or {}).get("held_out", []))
    rows = []

    def metrics(row, e):
        row["eval_key"] = e.get("eval_key")  # joins RUN_DIR/eval_items.parquet (column key)
        for key, v in sorted(e.items()):
            if isinstance(v, (int, float)) and not isinstance(v, bool):
                row[key] = float(v)
        for key in ACC_KEYS:
            if dense and key in e and key in dense:
                row[f"delta_{key}"] = float(e[key]) - float(dense[key])
        return row

    if dense is not None:
        rows.append(metrics({"cell": "dense", "searcher": "dense", "objective": None, "k": 0, "seed": None,
                             "removed": [], "calib_value": None, "recovery": "none", "calibration_data": None,
                             "held_out": held_out}, dense))
    for r in results:
        for rec in cfg.compare.recovery:
            e = evals.get((r["cell"], rec), {})
            row = {"cell": r["cell"], "searcher": r["searcher"], "objective": r["objective"], "k": r["k"],
                   "seed": r["seed"], "removed": r["removed"], "calib_value": r["value"],
                   "dense_calib_value": r.get("dense_value"), "calib_change": r.get("relative_change"),
                   "evaluations": r["evaluations"], "budget_used": r["budget_used"],
                   "budget_mode": r.get("budget_mode"), "wall_seconds": r["wall_seconds"],
                   "cache_hits": r["cache_hits"], "recovery": rec, "calibration_data": calib.get(r["objective"]),
                   "held_out": held_out}
            rows.append(metrics(row, e))
    names = list(dict.fromkeys(k for r in rows for k in r))  # every column, whichever row has it first
    return pa.Table.from_pylist([{k: r.get(k) for k in names} for r in rows])


# ---------------------------------------------------------------- plots
def _plt():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _panels(rows):
    """(objective, k) panels, each with its cells ordered searcher (grid order), then seed."""
    objs = sorted({r["objective"] for r in rows})
    ks = sorted({r["k"] for r in rows})
    order = {s: i for i, s in enumerate(dict.fromkeys(r["searcher"] for r in rows))}
    cells = {(o, k): sorted((r for r in rows if r["objective"] == o and r["k"] == k),
                            key=lambda r: (order[r["searcher"]], r["seed"])) for o in objs for k in ks}
    return objs, ks, order, cells


def plot_patterns(rows, n_blocks, path):
    """One panel per (objective, k): a row per searcher x seed, black = removed block."""
    plt = _plt()
    objs, ks, _, cells = _panels(rows)
    n_rows = max(len(v) for v in cells.values())
    fig, axes = plt.subplots(len(objs), len(ks), figsize=(max(5, n_blocks * 0.2) * len(ks), (0.28 * n_rows + 1.3) * len(objs)),
                             squeeze=False)
    for i, obj in enumerate(objs):
        for j, k in enumerate(ks):
            ax, sub = axes[i][j], cells[(obj, k)]
            m = np.zeros((max(len(sub), 1), n_blocks))
            for row, r in enumerate(sub):
                m[row, r["removed"]] = 1
            ax.imshow(m, aspect="auto", cmap="Greys", vmin=0, vmax=1, interpolation="nearest")
            ax.set_yticks(range(len(sub)), [f"{r['searcher']} s{r['seed']}" for r in sub], fontsize=7)
            ax.set_xticks(range(n_blocks), range(n_blocks), fontsize=5)
            ax.set_xlabel("block")
            ax.set_title(f"{obj}, k={k}", fontsize=10)
    fig.suptitle("removed blocks (black) per searcher and seed")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def best_so_far(run_dir) -> dict[str, dict[str, list]]:
    """Per cell: best full-fidelity value against evaluations (budget used) and against wall seconds."""
    rows = read_ledger(run_dir).to_pylist()
    by = defaultdict(list)
    for r in rows:
        by[r["cell"]].append(r)
    out = {}
    for cell, rs in by.items():
        rs.sort(key=lambda r: r["time"])
        k = max(len(r["removed"]) for r in rs)  # the cell's k (greedy/beam also score partial sets)
        t0, used, best = rs[0]["time"], 0.0, math.inf
        ev, sec, val = [], [], []
        for r in rs:
            used += r.get("cost") or r["fidelity"]  # a race block (racing) costs its own rows
            if r["fidelity"] >= 1.0 and len(r["removed"]) == k and r["value"] < best:
                best = r["value"]
            if best < math.inf:
                ev.append(used)
                sec.append(r["time"] - t0)
                val.append(best)
        out[cell] = {"evaluations": ev, "seconds": sec, "best": val}
    return out


def plot_convergence(run_dir, rows, path):
    """Best-so-far against evaluations and wall seconds: a row per (objective, k), a colour per
    searcher, a line style per seed; y clipped to the finals' range so the end game is visible."""
    plt = _plt()
    curves = best_so_far(run_dir)
    objs, ks, order, cells = _panels(rows)
    styles = ["-", "--", ":", "-."]
    panels = [(o, k) for o in objs for k in ks]
    fig, axes = plt.subplots(len(panels), 2, figsize=(11, 3.0 * len(panels)), squeeze=False)
    for i, (obj, k) in enumerate(panels):
        finals = []
        for r in cells[(obj, k)]:
            c = curves.get(r["cell"])
            if not c or not c["best"]:
                continue
            finals.append(c["best"][-1])
            kw = dict(where="post", color=f"C{order[r['searcher']] % 10}", ls=styles[r["seed"] % len(styles)],
                      label=r["searcher"] if r["seed"] == min(x["seed"] for x in cells[(obj, k)]) else None)
            for ax, x in zip(axes[i], (c["evaluations"], c["seconds"])):
                ax.step(x, c["best"], **kw)
                ax.plot(x[-1:], c["best"][-1:], marker="o", ms=4, color=kw["color"])  # one-shot cells: a dot
        clipped = False
        if finals:
            lo, hi = min(finals), float(np.quantile(finals, 0.75))
            span = (hi - lo) or abs(lo) * 0.05 or 1.0
            top = hi + 0.8 * span
            clipped = max(finals) > top
            for ax in axes[i]:
                ax.set_ylim(lo - 0.15 * span, top)
        for j, xl in enumerate(("evaluations (full-fidelity equivalents)", "wall seconds")):
            axes[i][j].set_xlabel(xl, fontsize=8)
            axes[i][j].set_ylabel(f"best {obj}", fontsize=8)
            axes[i][j].set_title(f"{obj}, k={k}" + (" (worst finals above the frame)" if clipped else ""), fontsize=9)
        axes[i][0].legend(fontsize=6, ncol=2, title="line style = seed", title_fontsize=6)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def lorp_view(similarity: np.ndarray, seed: int = 0) -> dict:
    from ghostsearch.search.lorp import cluster, n_clusters_for, rls

    S = np.asarray(similarity)
    r = rls(S)
    n = n_clusters_for(r)
    return {"rls": r, "n_clusters": n, "labels": [int(x) for x in cluster(S, n, seed)]}


def plot_similarity(similarity, path, seed=0):
    plt = _plt()
    view = lorp_view(similarity, seed)
    S = np.asarray(similarity)
    fig, ax = plt.subplots(figsize=(6.5, 5.5))
    im = ax.imshow(S, cmap="viridis")
    fig.colorbar(im, ax=ax, label="mean cosine of block inputs")
    labels = view["labels"]
    for i in range(1, len(labels)):
        if labels[i] != labels[i - 1]:
            ax.axvline(i - 0.5, color="w", lw=0.8)
            ax.axhline(i - 0.5, color="w", lw=0.8)
    ax.set_title(f"block-input similarity; LoRP: RLS={view['rls']:.3f}, {view['n_clusters']} clusters")
    ax.set_xlabel("block")
    ax.set_ylabel("block")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return view


def plot_accuracy(rows, path):
    plt = _plt()
    objs = sorted({r["objective"] for r in rows})
    ks = sorted({r["k"] for r in rows})
    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    for oi, obj in enumerate(objs):
        for ki, k in enumerate(ks):
            v = [r["mean_acc"] for r in rows if r["objective"] == obj and r["k"] == k and r.get("mean_acc") is not None]
            x = ki + (oi - (len(objs) - 1) / 2) * 0.25
            axes[0].scatter([x] * len(v), v, label=obj if ki == 0 else None, color=f"C{oi}", alpha=0.8)
    axes[0].set_xticks(range(len(ks)), [f"k={k}" for k in ks])
    axes[0].set_ylabel("mean zero-shot accuracy")
    axes[0].set_title("accuracy across searchers, per objective")
    axes[0].legend()
    for oi, obj in enumerate(objs):
        sub = [r for r in rows if r["objective"] == obj and r.get("mean_acc") is not None]
        axes[1].scatter([r["calib_value"] for r in sub], [r["mean_acc"] for r in sub], color=f"C{oi}", label=obj)
    axes[1].set_xlabel("calibration value (lower is better; per objective scale)")
    axes[1].set_ylabel("mean zero-shot accuracy")
    axes[1].set_xscale("symlog")
    axes[1].set_title("calibration value vs downstream accuracy")
    axes[1].legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def plot_correlations(rows, path):
    plt = _plt()
    cs = [c for c in correlations(rows) if not math.isnan(c["rho"])]
    fig, ax = plt.subplots(figsize=(6, 3.5))
    if cs:
        ax.bar(range(len(cs)), [c["rho"] for c in cs], color=["C0" if c["rho"] < 0 else "C3" for c in cs])
        ax.errorbar(range(len(cs)), [c["rho"] for c in cs], fmt="none", ecolor="k", capsize=3,
                    yerr=[[max(0.0, c["rho"] - c["rho_lo"]) if not math.isnan(c["rho_lo"]) else 0 for c in cs],
                          [max(0.0, c["rho_hi"] - c["rho"]) if not math.isnan(c["rho_hi"]) else 0 for c in cs]])
        ax.set_xticks(range(len(cs)), [f"{c['objective']}\nk={c['k']}\n{c['recovery']}" for c in cs], fontsize=7)
    ax.axhline(0, color="k", lw=0.8)
    ax.set_ylim(-1, 1)
    ax.set_ylabel("Spearman rho (value, accuracy)")
    ax.set_title("negative = calibration agrees with accuracy (bars: bootstrap 95% CI)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


# ---------------------------------------------------------------- report
def write_report(run_dir: Path, table: pa.Table, stats: dict, cfg, data_plan: dict | None = None) -> Path:
    from ghostsearch.config import protected_blocks
    from ghostsearch.search import Space
    from ghostsearch.search.common import greedy_cost

    run_dir = Path(run_dir)
    plots = run_dir / "plots"
    plots.mkdir(exist_ok=True)
    all_rows = table.to_pylist()
    rows = _finalists(all_rows)
    n_blocks = len(stats["similarity"])
    first = sorted({r.get("recovery") or "none" for r in rows})[0] if rows else "none"
    one = [r for r in rows if (r.get("recovery") or "none") == first]  # search plots: one row per cell
    plot_patterns(one, n_blocks, plots / "patterns.png")
    plot_convergence(run_dir, one, plots / "convergence.png")
    view = plot_similarity(stats["similarity"], plots / "similarity.png", seed=cfg.seed)
    plot_accuracy(rows, plots / "accuracy.png")
    plot_correlations(rows, plots / "spearman.png")
    cols = [c for c in ("cell", "recovery", "removed", "calib_value", "calib_change", "mean_acc", "mean_acc_lo",
                        "mean_acc_hi", "delta_mean_acc", "ppl_wikitext2", "delta_ppl_wikitext2", "lambada_acc",
                        "budget_used", "wall_seconds") if c in table.column_names]
    lines = [f"# ghostsearch comparison: {cfg.model}", "", "## Summary", ""]
    lines += [f"- {s}" for s in summary(all_rows)]
    lines += ["", "Rule: two numbers are *within noise* when their 95% intervals overlap (accuracy: binomial standard "
              "errors per task, as lm-eval's acc_stderr; Spearman rho: seeded percentile bootstrap).", ""]
    if data_plan:
        lines += ["## Data", "", "| role | asked | used | part | documents/items |", "|---|---|---|---|---|"]
        lines += [f"| {r['role']} | {r['asked']} | {r['used']}{' (fallback)' if r['fallback'] else ''} | {r['part']} | "
                  f"{r['documents_or_items']} |" for r in data_plan["calibration"]]
        lines += [f"| evaluation | | {e['set']} | {e['part']} | {e['documents_or_items']} |"
                  for e in data_plan.get("evaluation", [])]
        lines += [""]
    lines += ["## Cells (the dense model first; delta_* = finalist minus dense)", "",
              "| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    for r in all_rows:
        lines.append("| " + " | ".join(_fmt(r.get(c)) for c in cols) + " |")
    lines += ["", "## Spearman (calibration value vs mean accuracy)", "",
              "| objective | k | recovery | n | rho | 95% CI |", "|---|---|---|---|---|---|"]
    lines += [f"| {c['objective']} | {c['k']} | {c['recovery']} | {c['n']} | {_fmt(c['rho'])} | "
              f"[{_fmt(c['rho_lo'])}, {_fmt(c['rho_hi'])}] |" for c in correlations(rows)]
    ks = sorted({r["k"] for r in one})
    if ks:
        costs = {k: float(greedy_cost(Space(n_blocks, k, protected_blocks(cfg, n_blocks)))) for k in ks}
        lines += ["", "## Best value at budget B (B in greedy's cost at that k: " +
                  ", ".join(f"k={k}: {c:g}" for k, c in costs.items()) + ")", "",
                  "| cell | budget used | B = 1/4 | B = 1/2 | B = 1 |", "|---|---|---|---|---|"]
        lines += [f"| {b['cell']} | {_fmt(b['budget_used'])} | {_fmt(b['best_at_0.25x'])} | {_fmt(b['best_at_0.5x'])} | "
                  f"{_fmt(b['best_at_1x'])} |" for b in best_at_budget(run_dir, one, costs)]
    lines += ["", f"LoRP view of the dense model: RLS = {view['rls']:.3f}, clusters = {view['labels']}", ""]
    for name, title in (("patterns", "Pruning patterns"), ("convergence", "Best so far"),
                        ("similarity", "Block similarity and LoRP clusters"), ("accuracy", "Downstream accuracy"),
                        ("spearman", "Calibration vs accuracy")):
        lines += [f"## {title}", "", f"![{title}](plots/{name}.png)", ""]
    md = "\n".join(lines)
    write_text_atomic(run_dir / "report.md", md)
    write_text_atomic(run_dir / "report.html", _html(md))
    write_text_atomic(run_dir / "summary.json", json.dumps({"summary": summary(all_rows), "spread": spread(rows),
                                                            "correlations": correlations(rows), "lorp": view},
                                                           indent=2, default=_json_default))
    return run_dir / "report.md"


def _json_default(o):
    if isinstance(o, np.ndarray):
        return o.tolist()
    if isinstance(o, (np.integer, np.floating)):
        return o.item()
    return str(o)


def _fmt(v) -> str:
    if isinstance(v, float):
        return "nan" if math.isnan(v) else f"{v:.4g}"
    return str(v)


def _html(md: str) -> str:
    body = []
    for line in md.splitlines():
        if line.startswith("# "):
            body.append(f"<h1>{html.escape(line[2:])}</h1>")
        elif line.startswith("## "):
            body.append(f"<h2>{html.escape(line[3:])}</h2>")
        elif line.startswith("![") and "](" in line:
            src = line.split("](", 1)[1].rstrip(")")
            body.append(f'<img src="{html.escape(src)}" style="max-width:100%">')
        elif line.startswith("|") and not line.startswith("|---"):
            cells = [html.escape(c.strip()) for c in line.strip("|").split("|")]
            body.append("<tr>" + "".join(f"<td>{c}</td>" for c in cells) + "</tr>")
        elif line.startswith("- "):
            body.append(f"<li>{html.escape(line[2:])}</li>")
        elif line:
            body.append(f"<p>{html.escape(line)}</p>")
    out = "\n".join(body).replace("</h2>\n<tr>", "</h2>\n<table border=1 cellspacing=0><tr>")
    out = out.replace("</tr>\n<h2>", "</tr></table>\n<h2>").replace("</tr>\n<p>", "</tr></table>\n<p>")
    return f"<!doctype html><meta charset=utf-8><title>ghostsearch report</title><body style='font-family:sans-serif'>{out}</body>"
