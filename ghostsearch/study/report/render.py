"""The report: RUN_DIR/report.md (Markdown), report.html (the same Markdown rendered by
markdown-it-py with its table rule), summary.json and plots/*.png. Its order: the models first (one
row per removed set x repair: every perplexity, mean accuracy, each against the dense model with a
paired interval, parameters, measured speed; ``report.models``) and quality against speed-up (a
plot), then the pre-registered contrasts, the summary (restating computed verdicts), the decided
verdicts (one Holm family per run; the rows that cannot be decided here collapse into one line
saying what would decide them), the data, the cells, and the plots."""

from __future__ import annotations

import html
import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa

from ghostsearch.core.comparison_row import ComparisonRow, from_arrow
from ghostsearch.core.io import write_text_atomic
from ghostsearch.stats.bootstrap import ItemMatrix
from ghostsearch.stats.looks import ContrastRow
from ghostsearch.study.claims import base as claims_mod
from ghostsearch.study.claims.base import RULE, ClaimRow, contrast_claims, family, finalists
from ghostsearch.study.claims.search_paper import all_claims
from ghostsearch.study.report.answers import run_section as answers_section
from ghostsearch.study.report.models import ModelRow, comparison_entries, markdown_table, model_rows, read_speed
from ghostsearch.study.report.plots import (
    LorpView,
    plot_accuracy,
    plot_convergence,
    plot_correlations,
    plot_pareto,
    plot_patterns,
    plot_similarity,
)
from ghostsearch.study.report.summary import (
    Correlation,
    PairedAccuracy,
    Spread,
    best_at_budget,
    correlations,
    paired_accuracy,
    size_note,
    spread,
    summary,
)

if TYPE_CHECKING:
    from ghostsearch.data.dataplan import DataPlan


def sequential_rows(looks: list[ContrastRow]) -> list[ClaimRow]:
    """The contrasts of an adaptive run as decided by its looks (RUN_DIR/looks.json's ``contrasts``:
    stats.sequential_holm over the looks), not tested again: holds / does not hold by the sign of a
    rejected contrast's estimate, else within noise at the items of the last look run."""
    out = []
    for c in looks:
        decided, est = bool(c.decided), c.estimate
        at = c.decided_at_look
        note = (
            f"decided at look {at} ({c.look_items} items per model): |z| = {abs(c.z or 0):.2f} >= "
            f"{c.bound:.2f} at level {c.level:.4g}"
            if decided
            else f"undecided after {c.look_items} items per model (bound {c.bound:.2f} at level {c.level:.4g})"
        )
        within = c.verdict == "within margin"
        if within:
            lo, hi = c.rci or (math.nan, math.nan)
            note = (
                f"decided at look {at} ({c.look_items} items per model): within +-{c.margin}, "
                f"repeated interval [{lo:+.3f}, {hi:+.3f}] at level {c.rci_level:.4g}"
            )
        verdict = (
            "within margin"
            if within
            else ("holds" if (c.sign or (est or 0)) > 0 else "does not hold")
            if decided
            else "within noise"
        )
        out.append(
            ClaimRow(
                claim=c.contrast,
                condition=f"{c.left_key} - {c.right_key}",
                paper="pre-registered; sequential Holm over the looks",
                ours=est,
                lo=None,
                hi=None,
                rule="stats.sequential_holm",
                verdict=verdict,
                note=note,
            )
        )
    return out


def verdict_rows(
    rows: list[ComparisonRow],
    matrix: ItemMatrix | None,
    contrasts=(),
    n_boot: int = 2000,
    seed: int = 0,
    looks: list[ContrastRow] | None = None,
) -> list[ClaimRow]:
    """The run's verdict rows as ONE family (claims.family: Holm at 0.05): the pre-registered
    contrasts first, then every claim of claims.all_claims. With adaptive looks (``looks``: the
    contrast rows of RUN_DIR/looks.json) the contrasts were already decided by the sequential rule,
    which controls their own family-wise error at 0.05 over every look: they are listed as decided
    there (:func:`sequential_rows`), and the claims form a second family."""
    if looks:
        return sequential_rows(looks) + family(all_claims(rows, matrix, n_boot, seed))
    return family(contrast_claims(matrix, list(contrasts), n_boot, seed) + all_claims(rows, matrix, n_boot, seed))


def _looks(run_dir: Path) -> list[ContrastRow] | None:
    f = run_dir / "looks.json"
    if not f.exists():
        return None
    data = json.loads(f.read_text())
    rows = data.get("contrasts") if isinstance(data, dict) else None
    if not (rows and isinstance(rows, list) and isinstance(rows[0], dict)):
        return None
    return [ContrastRow.from_dict(r) for r in rows]


def _looks_table(run_dir: Path) -> list[str]:
    f = run_dir / "looks.json"
    if not f.exists():
        return []
    data = json.loads(f.read_text())
    rows = data.get("contrasts") if isinstance(data, dict) else data
    if not rows or not isinstance(rows, list) or not isinstance(rows[0], dict):
        return []
    cols = list(dict.fromkeys(k for r in rows for k in r))
    out = ["## Adaptive evaluation (looks)", "", "| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    out += ["| " + " | ".join(_cell(_fmt(r.get(c))) for c in cols) + " |" for r in rows]
    for key in ("items_per_model", "items_used", "items"):
        if isinstance(data, dict) and key in data:
            out += ["", f"Items per model ({key}): {_cell(json.dumps(data[key], default=str))}"]
            break
    return out + [""]


@dataclass(frozen=True)
class ReportSummary:
    """RUN_DIR/summary.json: the models' table, the pre-registered contrasts, the summary's sentences,
    every verdict row, the descriptive numbers (``spread``, ``correlations``, ``paired_accuracy``)
    and the dense model's LoRP view (``lorp``)."""

    models: list[ModelRow]
    contrasts: list
    summary: list[str]
    verdicts: list[ClaimRow]
    spread: Spread
    correlations: list[Correlation]
    paired_accuracy: list[PairedAccuracy]
    lorp: LorpView

    def to_dict(self) -> dict[str, Any]:
        return {
            "models": [m.to_dict() for m in self.models],
            "contrasts": [c.__dict__ if hasattr(c, "__dict__") else list(c) for c in self.contrasts],
            "summary": self.summary,
            "verdicts": [v.to_dict() for v in self.verdicts],
            "spread": self.spread.to_dict(),
            "correlations": [c.to_dict() for c in self.correlations],
            "paired_accuracy": [p.to_dict() for p in self.paired_accuracy],
            "lorp": self.lorp.to_dict(),
        }

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2, default=_json_default)


def write_report(
    run_dir: Path, table: pa.Table, stats: dict, cfg, data_plan: DataPlan | None = None, contrasts=()
) -> Path:
    """RUN_DIR/report.md, report.html, summary.json and plots/ from the comparison table, the pool's
    statistics (``similarity``) and, when present, RUN_DIR/eval_items.parquet (per-item correctness:
    the paired intervals and every tested verdict) and RUN_DIR/looks.json (adaptive evaluation).
    ``contrasts``: the run's resolved compare.contrasts (contrasts.ContrastPair), listed first."""
    run_dir = Path(run_dir)
    plots = run_dir / "plots"
    plots.mkdir(exist_ok=True)
    all_rows = from_arrow(table)
    rows = finalists(all_rows)
    matrix = ItemMatrix.read(run_dir / "eval_items.parquet")
    contrasts = list(contrasts or [])
    looks = _looks(run_dir)
    verdicts = verdict_rows(all_rows, matrix, contrasts, seed=cfg.seed, looks=looks)
    paired = paired_accuracy(matrix, all_rows, seed=cfg.seed)
    n_blocks = len(stats["similarity"])
    first = sorted({r.rec for r in rows})[0] if rows else "none"
    one = [r for r in rows if r.rec == first]  # search plots: one row per cell
    view = _search_plots(run_dir, rows, one, stats["similarity"], paired, n_blocks, cfg.seed)
    models = model_rows(
        comparison_entries(all_rows, run_dir, _params_of(cfg), read_speed(run_dir)), matrix, seed=cfg.seed
    )
    caption = plot_pareto(models, plots / "pareto.png", n_blocks)
    sentences = summary(all_rows, verdicts, matrix)
    cors = correlations(rows)
    lines = [f"# ghostsearch comparison: {cfg.model}", ""]
    lines += _models_section(models, caption, measured=(run_dir / "speed.json").exists())
    lines += _contrasts_section(contrasts)
    lines += ["## Summary", ""] + [f"- {s}" for s in sentences]
    lines += _verdicts_section(verdicts, matrix, contrasts, looks)
    lines += _looks_table(run_dir)
    lines += answers_section(run_dir, _model_labels(all_rows), looks)  # issue 47: floor, majority answers
    lines += _data_section(data_plan)
    lines += _cells_section(table.column_names, all_rows)
    lines += _paired_section(paired)
    lines += _spearman_section(cors)
    lines += _budget_section(run_dir, one, cfg, n_blocks)
    lines += ["", f"LoRP view of the dense model: RLS = {view.rls:.3f}, clusters = {view.labels}", ""]
    lines += _plots_section()
    md = "\n".join(lines)
    write_text_atomic(run_dir / "report.md", md)
    write_text_atomic(run_dir / "report.html", to_html(md))
    record = ReportSummary(models, contrasts, sentences, verdicts, spread(rows), cors, paired, view)
    write_text_atomic(run_dir / "summary.json", record.to_json())
    return run_dir / "report.md"


def _model_labels(all_rows) -> dict[str, str]:
    """eval_key -> the model's name in the report's sections ("dense", or searcher/objective/k/seed/repair)."""
    out = {}
    for r in all_rows:
        if r.eval_key and r.eval_key not in out:
            name = "dense" if not r.removed else f"{r.searcher}/{r.objective}/k={r.k}/s{r.seed}/{r.recovery or 'none'}"
            out[r.eval_key] = name
    return out


def _search_plots(run_dir: Path, rows, one, similarity, paired, n_blocks: int, seed: int) -> LorpView:
    """The search's plots under RUN_DIR/plots (patterns, best so far, similarity, accuracy, Spearman);
    returns the dense model's LoRP view (plots.plot_similarity)."""
    plots = run_dir / "plots"
    plot_patterns(one, n_blocks, plots / "patterns.png")
    plot_convergence(run_dir, one, plots / "convergence.png")
    view = plot_similarity(similarity, plots / "similarity.png", seed=seed)
    plot_accuracy(rows, plots / "accuracy.png", paired)
    plot_correlations(rows, plots / "spearman.png")
    return view


def _models_section(models: list[ModelRow], caption: str, measured: bool) -> list[str]:
    """The models' table, where their speed comes from, and the quality against speed-up plot."""
    return [
        "## Models (one per removed set x repair; the dense model first)",
        "",
        markdown_table(models),
        "",
        "Speed: "
        + (
            "measured by `ghostsearch speed RUN_DIR` (RUN_DIR/speed.json; prefill and decode at its largest batch)."
            if measured
            else "not measured; `ghostsearch speed RUN_DIR` measures every model here (prefill and decode tokens/s "
            "against the dense model) and the next report shows it."
        ),
        "",
        "## Quality against speed-up",
        "",
        "![Quality against speed-up](plots/pareto.png)",
        "",
        f"{caption[0].upper()}{caption[1:]}; one point per model, labelled with its k, repair and removed blocks.",
        "",
    ]


def _contrasts_section(contrasts: list) -> list[str]:
    """The pre-registered contrasts (compare.contrasts), when there are any."""
    if not contrasts:
        return []
    lines = [
        "## Pre-registered contrasts (compare.contrasts, fixed before evaluation)",
        "",
        "| contrast | left model | right model |",
        "|---|---|---|",
    ]
    lines += [
        f"| {_cell(c.name)} | {_cell(getattr(c, 'left', '') or c.left_key)} | "
        f"{_cell(getattr(c, 'right', '') or c.right_key)} |"
        for c in contrasts
    ]
    return lines + [""]


def _verdicts_section(
    verdicts: list[ClaimRow], matrix: ItemMatrix | None, contrasts: list, looks: list[ContrastRow] | None
) -> list[str]:
    """The decided verdict rows as a table; the pre-registered contrasts always keep their row, and
    the paper-claim rows this run cannot decide collapse into one line (:func:`undecided_line`)."""
    title = (
        "## Verdicts (the contrasts: sequential Holm over the looks; the claims: one family, Holm at 0.05)"
        if looks
        else "## Verdicts (one family: Holm at 0.05 over every tested row)"
    )
    own = {c.name for c in contrasts} | {c.contrast for c in (looks or [])}
    decided = [v for v in verdicts if v.verdict not in UNDECIDED or v.claim in own]
    undecided = [v for v in verdicts if v.verdict in UNDECIDED and v.claim not in own]
    lines = ["", title, ""]
    lines += [claims_mod.render(decided)] if decided else ["No claim row is decided by this run."]
    if undecided:
        lines += ["", undecided_line(undecided, matrix, len([v for v in verdicts if v.p is not None]))]
    return lines + ["", RULE, ""]


def _data_section(data_plan: DataPlan | None) -> list[str]:
    """Every dataset the run read (the data plan's calibration and evaluation rows)."""
    if not data_plan:
        return []
    lines = ["## Data", "", "| role | asked | used | part | documents/items |", "|---|---|---|---|---|"]
    lines += [
        f"| {r.role} | {r.asked} | {r.used}{' (fallback)' if r.fallback else ''} | {r.part} | {r.documents_or_items} |"
        for r in data_plan.calibration
    ]
    lines += [f"| evaluation | | {e.set} | {e.part} | {e.documents_or_items} |" for e in data_plan.evaluation or ()]
    return lines + [""]


CELL_COLUMNS = (
    "cell",
    "recovery",
    "removed",
    "calib_value",
    "calib_change",
    "mean_acc",
    "mean_acc_lo",
    "mean_acc_hi",
    "delta_mean_acc",
)  # then every perplexity with its delta, then CELL_COLUMNS_LAST; each where the table has it
CELL_COLUMNS_LAST = ("lambada_acc", "budget_used", "wall_seconds")


def _cells_section(names: list[str], all_rows: list[ComparisonRow]) -> list[str]:
    """Every row of comparison.parquet (the dense model first) in the columns it has."""
    ppl = [x for n in _ppl_columns(names) for x in (n, f"delta_{n}")]
    cols = [c for c in (*CELL_COLUMNS, *ppl, *CELL_COLUMNS_LAST) if c in names]
    lines = [
        "## Cells (the dense model first; delta_* = finalist minus dense; mean_acc_lo/hi: binomial, unpaired)",
        "",
        "| " + " | ".join(cols) + " |",
        "|" + "---|" * len(cols),
    ]
    return lines + ["| " + " | ".join(_cell(_fmt(r.column(c))) for c in cols) + " |" for r in all_rows]


def _paired_section(paired: list[PairedAccuracy]) -> list[str]:
    """Each model's accuracy and its paired difference from the dense model, when there are items."""
    if not paired:
        return []
    lines = [
        "",
        "## Accuracy against the dense model (paired bootstrap over items, 95%; descriptive)",
        "",
        "| model (searcher, objective, k, recovery) | removed | mean acc [95%] | minus dense [95%] |",
        "|---|---|---|---|",
    ]
    return lines + [
        f"| {p.searcher}, {p.objective}, k={p.k}, {p.recovery} | {p.removed} | "
        f"{p.acc:.3f} [{p.acc_lo:.3f}, {p.acc_hi:.3f}] | "
        f"{p.delta:+.3f} [{p.delta_lo:+.3f}, {p.delta_hi:+.3f}] |"
        for p in paired
    ]


def _spearman_section(cors: list[Correlation]) -> list[str]:
    """Spearman's rho between calibration value and accuracy, per condition."""
    lines = [
        "",
        "## Spearman (calibration value vs mean accuracy, distinct models; descriptive)",
        "",
        "| objective | k | recovery | n | rho | 95% bootstrap CI | exact permutation p (unadjusted) |",
        "|---|---|---|---|---|---|---|",
    ]
    return lines + [
        f"| {c.objective} | {c.k} | {c.recovery} | {c.n} | {_fmt(c.rho)} | "
        f"[{_fmt(c.rho_lo)}, {_fmt(c.rho_hi)}] | {_fmt(c.p)} |"
        for c in cors
    ]


def _budget_section(run_dir: Path, one: list[ComparisonRow], cfg, n_blocks: int) -> list[str]:
    """Each cell's best value within a quarter, a half and all of greedy's cost at its k."""
    from ghostsearch.config import protected_blocks
    from ghostsearch.search import Space
    from ghostsearch.search.common import greedy_cost

    ks = sorted({r.k for r in one})
    if not ks:
        return []
    costs = {k: float(greedy_cost(Space(n_blocks, k, protected_blocks(cfg, n_blocks)))) for k in ks}
    lines = [
        "",
        "## Best value at budget B (B in greedy's cost at that k: "
        + ", ".join(f"k={k}: {c:g}" for k, c in costs.items())
        + ")",
        "",
        "| cell | budget used | B = 1/4 | B = 1/2 | B = 1 |",
        "|---|---|---|---|---|",
    ]
    return lines + [
        f"| {b.cell} | {_fmt(b.budget_used)} | {_fmt(b.best_at[0.25])} | "
        f"{_fmt(b.best_at[0.5])} | {_fmt(b.best_at[1.0])} |"
        for b in best_at_budget(run_dir, one, costs)
    ]


PLOTS = (
    ("patterns", "Pruning patterns"),
    ("convergence", "Best so far"),
    ("similarity", "Block similarity and LoRP clusters"),
    ("accuracy", "Downstream accuracy"),
    ("spearman", "Calibration vs accuracy"),
)


def _plots_section() -> list[str]:
    lines: list[str] = []
    for name, title in PLOTS:
        lines += [f"## {title}", "", f"![{title}](plots/{name}.png)", ""]
    return lines


UNDECIDED = ("no verdict", "not computed", "within noise", "reported")


def undecided_line(rows: list[ClaimRow], matrix: ItemMatrix | None, n_tested: int) -> str:
    """The verdict rows this run cannot decide, as one line: how many of each kind, which claims,
    and what would decide them (the items a paired test would need; the models a rule needs).
    Every row stays in summary.json's ``verdicts``."""
    from collections import Counter

    kinds = Counter(v.verdict for v in rows)
    names = sorted({v.claim for v in rows})
    need = []
    if kinds.get("within noise") or kinds.get("no verdict"):
        need.append(size_note(matrix, max(n_tested, 1)).rstrip("."))
    if kinds.get("not computed"):
        need.append(
            "'not computed' rows need the models their rule compares (more searchers, seeds or ks in compare's "
            "grid, or the repair named in compare.recovery)"
        )
    if kinds.get("reported"):
        need.append("'reported' rows restate a number; no test decides them")
    counts = ", ".join(f"{n} {k}" for k, n in sorted(kinds.items()))
    return (
        f"**{len(rows)} more claim rows cannot be decided here** ({counts}: {', '.join(names)}). "
        f"What would decide them: {'; '.join(need)}. Every row, with its numbers: summary.json's `verdicts`."
    )


def _ppl_columns(names) -> list[str]:
    """The perplexity columns of comparison.parquet (ppl_<set>, LAMBADA's last word), not the per-window ones."""
    cols = [n for n in names if n.startswith("ppl_") and not n.endswith("_window_nll")]
    return cols + [n for n in ("lambada_lastword_ppl",) if n in names]


def _params_of(cfg):
    """(removed, recovery) -> the pruned model's parameter count (speed.pruned_params on a meta-device
    model: the config only, no weights); None when the model's config cannot be read here."""
    from ghostsearch.evaluation.speed import cost_operators, meta_model, pruned_params

    try:
        model = meta_model(cfg.model, cfg.trust_remote_code)
    except Exception:  # noqa: BLE001  (a report without parameter counts rather than none)
        return None
    from ghostsearch.model.stack import Stack

    n_blocks, hidden = Stack(model).n_blocks, int(model.config.hidden_size)

    def params(removed, recovery):
        return pruned_params(model, removed, cost_operators(recovery, removed, n_blocks, hidden))

    return params


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


def _cell(s) -> str:
    return str(s).replace("|", "\\|").replace("\n", " ")


def to_html(md: str, title: str = "ghostsearch report") -> str:
    """The Markdown as one HTML page (markdown-it-py, CommonMark with its table rule; raw HTML in
    the Markdown is escaped, not passed through)."""
    from markdown_it import MarkdownIt

    body = MarkdownIt("commonmark", {"html": False}).enable("table").render(md)
    return (
        f'<!doctype html>\n<html><head><meta charset="utf-8"><title>{html.escape(title)}</title>'
        "<style>body{font-family:sans-serif;max-width:1200px;margin:auto}table{border-collapse:collapse}"
        "td,th{border:1px solid #999;padding:2px 6px;font-size:90%}img{max-width:100%}</style></head>\n"
        f"<body>\n{body}</body></html>\n"
    )
