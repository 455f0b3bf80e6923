"""The comparison's table, numbers, plots and report, one module per idea: ``table`` (comparison.parquet),
``summary`` (Spearman, spreads, paired accuracy, the summary sentences, best value at a budget),
``plots`` (PNG), ``render`` (report.md / report.html / summary.json). The statistics themselves live
in :mod:`ghostsearch.stats.inference`, the verdicts in :mod:`ghostsearch.study.claims`."""

from ghostsearch.study.report.plots import (
    lorp_view,
    plot_accuracy,
    plot_convergence,
    plot_correlations,
    plot_patterns,
    plot_similarity,
)
from ghostsearch.study.report.render import to_html, verdict_rows, write_report
from ghostsearch.study.report.summary import (
    best_at_budget,
    best_so_far,
    correlations,
    paired_accuracy,
    size_note,
    spread,
    summary,
)
from ghostsearch.study.report.table import ACC_KEYS, comparison_table

__all__ = [
    "ACC_KEYS",
    "best_at_budget",
    "best_so_far",
    "comparison_table",
    "correlations",
    "lorp_view",
    "paired_accuracy",
    "plot_accuracy",
    "plot_convergence",
    "plot_correlations",
    "plot_patterns",
    "plot_similarity",
    "size_note",
    "spread",
    "summary",
    "to_html",
    "verdict_rows",
    "write_report",
]
