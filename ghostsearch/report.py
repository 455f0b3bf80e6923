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


def correlations(rows: list[dict], acc_key: str = "mean_acc") -> list[dict]:
    """Spearman between calibration value and downstream accuracy, per objective and k.
    Lower calibration value is better, so a NEGATIVE rho means the calibration ranking agrees with accuracy."""
    groups = defaultdict(list)
    for r in rows:
        if r.get(acc_key) is not None and not math.isnan(r[acc_key]):
            groups[(r["objective"], r["k"])].append(r)
    out = []
    for (obj, k), g in sorted(groups.items()):
        out.append({"objective": obj, "k": k, "n": len(g),
                    "rho": spearman([r["calib_value"] for r in g], [r[acc_key] for r in g])})
    return out


def spread(rows: list[dict], acc_key: str = "mean_acc") -> dict:
    """Range of downstream accuracy across searchers within each objective (per k, averaged), and the
    range between the objectives' mean accuracies (per k, averaged)."""
    by = defaultdict(list)
    for r in rows:
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


def summary(rows: list[dict]) -> list[str]:
    """A few plain sentences on what the comparison shows."""
    if not rows:
        return ["No finished cells."]
    lines = []
    sp = spread(rows)
    if sp["mean_by_objective"]:
        best_obj = max(sp["mean_by_objective"], key=sp["mean_by_objective"].get)
        lines.append("Mean downstream accuracy by calibration objective: " + ", ".join(
            f"{o} {v:.3f}" for o, v in sorted(sp["mean_by_objective"].items())) + f"; {best_obj} is highest.")
        if not math.isnan(sp["between"]):
            w = float(np.mean(list(sp["within"].values())))
            verdict = ("the objective matters more than the search" if sp["between"] > w
                       else "the search matters as much as or more than the objective")
            lines.append(f"Accuracy range between objectives {sp['between']:.3f} vs. across searchers within an "
                         f"objective {w:.3f}: {verdict} here.")
    for c in correlations(rows):
        if math.isnan(c["rho"]):
            continue
        if abs(c["rho"]) < WEAK_RHO:
            verdict = "no clear relation between the calibration ranking and the downstream ranking"
        else:
            verdict = "the calibration ranking " + ("agrees with" if c["rho"] < 0 else "runs opposite to") + \
                " the downstream ranking"
        lines.append(f"{c['objective']}, k={c['k']}: Spearman rho(calibration value, accuracy) = {c['rho']:+.2f} "
                     f"over {c['n']} cells: {verdict}.")
    n_items = [sum(v for key, v in r.items() if key.endswith("_n") and isinstance(v, (int, float)))
               for r in rows if r.get("mean_acc") is not None]
    if n_items and min(n_items) > 0:
        p, n = float(np.mean([r["mean_acc"] for r in rows if r.get("mean_acc") is not None])), min(n_items)
        lines.append(f"Each cell's mean accuracy rests on {n:.0f} task items (standard error about "
                     f"{math.sqrt(p * (1 - p) / n):.3f}): differences between cells below about twice that are noise.")
    best = max((r for r in rows if r.get("mean_acc") is not None), key=lambda r: r["mean_acc"], default=None)
    if best:
        lines.append(f"Best downstream: {best['cell']} removing {best['removed']} (mean acc {best['mean_acc']:.3f}).")
    return lines


# ---------------------------------------------------------------- table
def comparison_table(cfg, results: list[dict], evals: dict[str, dict]) -> pa.Table:
    rows = []
    for r in results:
        e = evals.get(r["cell"], {})
        row = {"cell": r["cell"], "searcher": r["searcher"], "objective": r["objective"], "k": r["k"],
               "seed": r["seed"], "removed": r["removed"], "calib_value": r["value"],
               "evaluations": r["evaluations"], "budget_used": r["budget_used"], "wall_seconds": r["wall_seconds"],
               "cache_hits": r["cache_hits"], "recovery": e.get("recovery", cfg.recovery.method)}
        for key, v in sorted(e.items()):
            if isinstance(v, (int, float)) and not isinstance(v, bool):
                row[key] = float(v)
        rows.append(row)
    return pa.Table.from_pylist(rows)


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
            used += r["fidelity"]
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
        ax.set_xticks(range(len(cs)), [f"{c['objective']}\nk={c['k']}" for c in cs], fontsize=8)
    ax.axhline(0, color="k", lw=0.8)
    ax.set_ylim(-1, 1)
    ax.set_ylabel("Spearman rho (value, accuracy)")
    ax.set_title("negative = calibration agrees with accuracy")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


# ---------------------------------------------------------------- report
def write_report(run_dir: Path, table: pa.Table, stats: dict, cfg) -> Path:
    run_dir = Path(run_dir)
    plots = run_dir / "plots"
    plots.mkdir(exist_ok=True)
    rows = table.to_pylist()
    n_blocks = len(stats["similarity"])
    plot_patterns(rows, n_blocks, plots / "patterns.png")
    plot_convergence(run_dir, rows, plots / "convergence.png")
    view = plot_similarity(stats["similarity"], plots / "similarity.png", seed=cfg.seed)
    plot_accuracy(rows, plots / "accuracy.png")
    plot_correlations(rows, plots / "spearman.png")
    cols = [c for c in ("cell", "removed", "calib_value", "mean_acc", "ppl_wikitext2", "lambada_acc", "evaluations",
                        "cache_hits", "wall_seconds") if c in table.column_names]
    lines = [f"# ghostsearch comparison: {cfg.model}", "", "## Summary", ""]
    lines += [f"- {s}" for s in summary(rows)]
    lines += ["", "## Cells", "", "| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    for r in rows:
        lines.append("| " + " | ".join(_fmt(r.get(c)) for c in cols) + " |")
    lines += ["", "## Spearman (calibration value vs mean accuracy)", "", "| objective | k | n | rho |", "|---|---|---|---|"]
    lines += [f"| {c['objective']} | {c['k']} | {c['n']} | {_fmt(c['rho'])} |" for c in correlations(rows)]
    lines += ["", f"LoRP view of the dense model: RLS = {view['rls']:.3f}, clusters = {view['labels']}", ""]
    for name, title in (("patterns", "Pruning patterns"), ("convergence", "Best so far"),
                        ("similarity", "Block similarity and LoRP clusters"), ("accuracy", "Downstream accuracy"),
                        ("spearman", "Calibration vs accuracy")):
        lines += [f"## {title}", "", f"![{title}](plots/{name}.png)", ""]
    md = "\n".join(lines)
    write_text_atomic(run_dir / "report.md", md)
    write_text_atomic(run_dir / "report.html", _html(md))
    write_text_atomic(run_dir / "summary.json", json.dumps({"summary": summary(rows), "spread": spread(rows),
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
