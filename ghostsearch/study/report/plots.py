"""The report's plots (PNG): pruning patterns, best so far, block similarity with LoRP's clusters,
accuracy with paired interval bars, and Spearman with its interval. Every point carries its
(searcher, recovery) label and every title fits its figure."""

from __future__ import annotations

import math
import textwrap
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ghostsearch.core.comparison_row import ComparisonRow
from ghostsearch.core.records import Record
from ghostsearch.study.report.summary import PairedAccuracy, best_so_far, correlations


def _plt():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _panels(rows):
    """(objective, k) panels, each with its cells ordered searcher (grid order), then seed."""
    objs = sorted({r.objective for r in rows})
    ks = sorted({r.k for r in rows})
    order = {s: i for i, s in enumerate(dict.fromkeys(r.searcher for r in rows))}
    cells = {
        (o, k): sorted((r for r in rows if r.objective == o and r.k == k), key=lambda r: (order[r.searcher], r.seed))
        for o in objs
        for k in ks
    }
    return objs, ks, order, cells


def plot_patterns(rows, n_blocks, path):
    """One panel per (objective, k): a row per searcher x seed, black = removed block."""
    plt = _plt()
    objs, ks, _, cells = _panels(rows)
    n_rows = max(len(v) for v in cells.values())
    fig, axes = plt.subplots(
        len(objs), len(ks), figsize=(max(5, n_blocks * 0.2) * len(ks), (0.28 * n_rows + 1.3) * len(objs)), squeeze=False
    )
    for i, obj in enumerate(objs):
        for j, k in enumerate(ks):
            ax, sub = axes[i][j], cells[(obj, k)]
            m = np.zeros((max(len(sub), 1), n_blocks))
            for row, r in enumerate(sub):
                m[row, list(r.removed)] = 1
            ax.imshow(m, aspect="auto", cmap="Greys", vmin=0, vmax=1, interpolation="nearest")
            ax.set_yticks(range(len(sub)), [f"{r.searcher} s{r.seed}" for r in sub], fontsize=7)
            ax.set_xticks(range(n_blocks), range(n_blocks), fontsize=5)
            ax.set_xlabel("block")
            ax.set_title(f"{obj}, k={k}", fontsize=10)
    fig.suptitle("removed blocks (black) per searcher and seed")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


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
            c = curves.get(r.cell)
            if not c or not c.best:
                continue
            finals.append(c.best[-1])
            kw = dict(
                where="post",
                color=f"C{order[r.searcher] % 10}",
                ls=styles[r.seed % len(styles)],
                label=r.searcher if r.seed == min(x.seed for x in cells[(obj, k)]) else None,
            )
            for ax, x in zip(axes[i], (c.evaluations, c.seconds)):
                ax.step(x, c.best, **kw)
                ax.plot(x[-1:], c.best[-1:], marker="o", ms=4, color=kw["color"])  # one-shot cells: a dot
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
        if axes[i][0].get_legend_handles_labels()[1]:
            axes[i][0].legend(fontsize=6, ncol=2, title="line style = seed", title_fontsize=6)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


@dataclass(frozen=True)
class LorpView(Record):
    """The dense model's blocks as LoRP sees them (summary.json's ``lorp``): the redundancy score
    RLS of the block-input similarity, the number of clusters it implies, each block's cluster."""

    rls: float
    n_clusters: int
    labels: list[int]


def lorp_view(similarity: np.ndarray, seed: int = 0) -> LorpView:
    from ghostsearch.search.lorp import cluster, n_clusters_for, rls

    S = np.asarray(similarity)
    r = rls(S)
    n = n_clusters_for(r)
    return LorpView(r, n, [int(x) for x in cluster(S, n, seed)])


def plot_similarity(similarity, path, seed=0) -> LorpView:
    plt = _plt()
    view = lorp_view(similarity, seed)
    S = np.asarray(similarity)
    fig, ax = plt.subplots(figsize=(6.5, 5.5))
    im = ax.imshow(S, cmap="viridis")
    fig.colorbar(im, ax=ax, label="mean cosine of block inputs")
    labels = view.labels
    for i in range(1, len(labels)):
        if labels[i] != labels[i - 1]:
            ax.axvline(i - 0.5, color="w", lw=0.8)
            ax.axhline(i - 0.5, color="w", lw=0.8)
    _title(ax, f"block-input similarity; LoRP: RLS={view.rls:.3f}, {view.n_clusters} clusters")
    ax.set_xlabel("block")
    ax.set_ylabel("block")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return view


def _title(ax, text: str, width: int = 60, **kw):
    """A title wrapped onto lines of at most ``width`` characters, so it is never cut off."""
    ax.set_title("\n".join(textwrap.wrap(text, width)), **kw)


def _or(v: float | None, default: float) -> float:
    return default if v is None else v


@dataclass(frozen=True)
class _Point:
    """A model on the accuracy plot without per-item data (its label's parts)."""

    objective: str | None
    k: int
    searcher: str
    recovery: str


def plot_accuracy(rows: list[ComparisonRow], path, paired: list[PairedAccuracy] | None = None):
    """Left: each distinct evaluated model's mean accuracy minus the dense model's with its paired
    bootstrap 95% interval (``paired``: summary.paired_accuracy), or, without per-item data, its
    mean accuracy with the binomial interval of comparison.parquet; one point per model, labelled
    (searcher, recovery). Right: calibration value against accuracy, every point labelled."""
    plt = _plt()
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.8))
    ax = axes[0]
    if paired:
        by = sorted(paired, key=lambda p: (p.objective or "", p.k, p.delta))
        pts: Sequence[PairedAccuracy | _Point] = by
        y, lo, hi = [p.delta for p in by], [p.delta_lo for p in by], [p.delta_hi for p in by]
        ax.axhline(0, color="k", lw=0.8)
        ax.set_ylabel("mean accuracy minus dense (paired 95% CI)")
        _title(ax, "accuracy change against the dense model, paired bootstrap intervals over items")
    else:
        accs = sorted(
            ((r, acc) for r in rows if (acc := r.metric("mean_acc")) is not None),
            key=lambda ra: (ra[0].objective or "", ra[0].k, ra[1]),
        )
        pts = [_Point(r.objective, r.k, r.searcher, r.rec) for r, _ in accs]
        y = [acc for _, acc in accs]
        lo = [_or(r.metric("mean_acc_lo"), acc) for r, acc in accs]
        hi = [_or(r.metric("mean_acc_hi"), acc) for r, acc in accs]
        ax.set_ylabel("mean zero-shot accuracy (binomial 95% CI)")
        _title(ax, "mean accuracy per model (no per-item data: unpaired binomial intervals)")
    objs = sorted({p.objective for p in pts if p.objective})
    for i, p in enumerate(pts):
        color = f"C{objs.index(p.objective) % 10}" if p.objective in objs else "k"
        ax.errorbar(
            [i],
            [y[i]],
            yerr=[[max(0.0, y[i] - lo[i])], [max(0.0, hi[i] - y[i])]],
            fmt="o",
            color=color,
            capsize=3,
            label=p.objective if p.objective not in [q.objective for q in pts[:i]] else None,
        )
    ax.set_xticks(
        range(len(pts)),
        [f"{p.searcher}, {p.recovery or 'none'}\nk={p.k}" for p in pts],
        rotation=60,
        ha="right",
        fontsize=7,
    )
    if objs:
        ax.legend(fontsize=7, title="objective", title_fontsize=7)
    ax2 = axes[1]
    sub = [
        (r, r.calib_value, acc) for r in rows if (acc := r.metric("mean_acc")) is not None and r.calib_value is not None
    ]
    at: dict[tuple, list[str]] = {}  # points that coincide share one label, not overprinted ones
    for r, calib, acc in sub:
        color = f"C{objs.index(r.objective) % 10}" if r.objective in objs else "k"
        ax2.scatter([calib], [acc], color=color)
        label = f"{r.searcher}, {r.rec}"
        names = at.setdefault((round(calib, 6), round(acc, 6)), [])
        if label not in names:
            names.append(label)
    prev_y, flip = None, False
    for (x, y), names in sorted(at.items(), key=lambda kv: (kv[0][1], kv[0][0])):
        flip = (not flip) if y == prev_y else False  # neighbours on one accuracy level: labels above, below
        prev_y = y
        ax2.annotate("\n".join(names), (x, y), fontsize=6, xytext=(3, -10 if flip else 3), textcoords="offset points")
    ax2.set_xlabel("calibration value (lower is better; per objective scale)")
    ax2.set_ylabel("mean zero-shot accuracy")
    ax2.set_xscale("symlog")
    _title(ax2, "calibration value against downstream accuracy")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def plot_correlations(rows, path):
    """Spearman rho(calibration value, accuracy) per (objective, k, recovery) over distinct models,
    with its bootstrap 95% interval; conditions with fewer than 3 models are named, not drawn."""
    plt = _plt()
    cs = [c for c in correlations(rows) if not math.isnan(c.rho) and c.n >= 3]
    fig, ax = plt.subplots(figsize=(max(7.0, 0.85 * len(cs)), 4.2))  # room for every condition's label
    if cs:
        ax.bar(range(len(cs)), [c.rho for c in cs], color=["C0" if c.rho < 0 else "C3" for c in cs])
        ax.errorbar(
            range(len(cs)),
            [c.rho for c in cs],
            fmt="none",
            ecolor="k",
            capsize=3,
            yerr=[
                [max(0.0, c.rho - c.rho_lo) if not math.isnan(c.rho_lo) else 0 for c in cs],
                [max(0.0, c.rho_hi - c.rho) if not math.isnan(c.rho_hi) else 0 for c in cs],
            ],
        )
        ax.set_xticks(range(len(cs)), [f"{c.objective}\nk={c.k}\n{c.recovery}\nn={c.n}" for c in cs], fontsize=7)
    else:
        ax.text(
            0.5, 0.5, "no condition with 3 or more distinct models", ha="center", va="center", transform=ax.transAxes
        )
    ax.axhline(0, color="k", lw=0.8)
    ax.set_ylim(-1.05, 1.05)
    ax.set_ylabel("Spearman rho (value, accuracy)")
    _title(
        ax,
        "Spearman rho of calibration value and accuracy (negative: calibration agrees with accuracy; "
        "bars: bootstrap 95% interval)",
        width=70,
        fontsize=9,
    )
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def plot_pareto(model_rows, path, n_blocks: int) -> str:
    """Quality against speed-up, one point per distinct model (report.models.ModelRow), labelled
    (k, repair, removed set), with its paired 95% interval as a vertical bar: mean accuracy minus the
    dense model's when the run has accuracies, else the first perplexity's ratio to dense. The x axis
    is the measured speed-up (prefill, largest batch, with its min..max bar: ``ghostsearch speed
    RUN_DIR``) where measured, else the ideal L / (L - k), said in the axis label. Returns what was
    plotted, in words (the report's caption)."""
    plt = _plt()
    pts = [r for r in model_rows if r.removed or r.recovery != "none"]
    dense = next((r for r in model_rows if not r.removed and r.recovery == "none"), None)
    use_acc = any(r.acc_vs_dense is not None for r in pts)
    ppl_set = next((s for r in pts for s in r.ppl_vs_dense), None)
    measured = bool(pts) and all(r.speed and r.speed.get("prefill") for r in pts)
    fig, ax = plt.subplots(figsize=(8, 5.2))
    for i, r in enumerate(pts):
        d = r.acc_vs_dense if use_acc else r.ppl_vs_dense.get(ppl_set) if ppl_set else None
        if d is None:
            continue
        if measured and r.speed:
            x = float(r.speed["prefill"])
            lo, hi = r.speed.get("prefill_lo"), r.speed.get("prefill_hi")
            xerr = None if lo is None or hi is None else [[max(0.0, x - lo)], [max(0.0, hi - x)]]
        else:
            x, xerr = n_blocks / (n_blocks - len(r.removed)), None
        y = d.estimate
        yerr = None if d.lo is None or d.hi is None else [[max(0.0, y - d.lo)], [max(0.0, d.hi - y)]]
        ax.errorbar([x], [y], xerr=xerr, yerr=yerr, fmt="o", color=f"C{i % 10}", capsize=3)
        ax.annotate(
            f"k={len(r.removed)} {r.recovery}\n{' '.join(map(str, r.removed))}",
            (x, y),
            textcoords="offset points",
            xytext=(5, 4),
            fontsize=7,
        )
    ax.axhline(0.0 if use_acc else 1.0, color="k", lw=0.8)
    if dense is not None:
        ax.plot([1.0], [0.0 if use_acc else 1.0], "k*", ms=10, label="dense")
        ax.legend(loc="best", fontsize=8)
    ax.set_xlabel(
        "measured prefill speed-up over dense (largest batch; bar: min..max over rounds)"
        if measured
        else "ideal speed-up L / (L - k) (speed not measured: ghostsearch speed RUN_DIR)"
    )
    what = (
        "mean accuracy minus dense (paired 95% CI over items)"
        if use_acc
        else f"perplexity ratio to dense on {ppl_set} (paired 95% CI over windows)"
        if ppl_set
        else "no quality numbers"
    )
    ax.set_ylabel(what)
    _title(ax, "quality against speed-up, one point per model (removed set x repair)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return f"{what} against {'measured prefill' if measured else 'ideal'} speed-up"
