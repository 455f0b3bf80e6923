"""``ghostsearch recover RUN_DIR --method M [--top N]``: repair the best finalists of a run;
writes RUN_DIR/recovery.parquet and prints one JSON line per finalist."""

from __future__ import annotations

from ghostsearch.cli.common import positive_int, print_json
from ghostsearch.recovery import RECOVERY


def add(sub) -> None:
    sp = sub.add_parser("recover", help="repair the top-N finalists of a run; writes RUN_DIR/recovery.parquet")
    sp.add_argument("run_dir", help="a run directory (config.yaml + result.json)")
    sp.add_argument("--method", choices=RECOVERY.names(), default=None, help="default: the run's recovery.method")
    sp.add_argument("--top", type=positive_int, default=None, help="finalists to repair (default: recovery.top)")
    sp.add_argument(
        "--threads",
        type=positive_int,
        default=None,
        help="torch threads (default: the search's scorers' count, so value_before is the search's value)",
    )


def run(args) -> None:
    from ghostsearch.core.io import check_writable
    from ghostsearch.run.recover import recover

    # recovery.parquet is written after all the work: a read-only or full run directory first
    check_writable(args.run_dir, "run directory", "make it writable (or copy the run directory elsewhere) and rerun")
    recover(args.run_dir, args.method, args.top, args.threads, on_row=print_json)
