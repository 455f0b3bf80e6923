"""Print the study's tables and verdicts from a compare run directory (Markdown, for docs/results.md).

  python bench/study_table.py runs/study-smollm2-mini             # after the compare finished
  python bench/study_table.py runs/study-smollm2-mini --partial   # finished cells so far

The verdicts come from ghostsearch.study.claims (computed, never written by hand): every tested row printed
here (the claims and the LoRP comparisons) is ONE family, Holm-adjusted at 0.05 (claims.family);
without RUN_DIR/eval_items.parquet (older runs) the per-item claims read "not computed". The tables
and the report are ``ghostsearch.study.report.study_table``.
"""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from ghostsearch.study.report.study_table import partial_report, study_report  # noqa: E402


def main(run_dir: str) -> None:
    print(study_report(run_dir))


def partial(run_dir: str) -> None:
    print(partial_report(run_dir))


if __name__ == "__main__":
    if len(sys.argv) > 2 and sys.argv[2] == "--partial":
        partial(sys.argv[1])
    elif len(sys.argv) == 2:
        main(sys.argv[1])
    else:
        sys.exit(__doc__)
