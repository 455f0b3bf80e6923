"""Run directories (layout.py), their lock (lock.py), the ledger of every evaluation (ledger.py) and a
cell's spec, name and result (cell.py)."""

from ghostsearch.rundir.cell import cell_name
from ghostsearch.rundir.layout import (
    cells,
    check_run_dir,
    close_run_dir,
    finalists,
    open_run_dir,
    run_config,
    scoring_settings,
    write_env,
)
from ghostsearch.rundir.ledger import Ledger, read_ledger

__all__ = [
    "Ledger",
    "cell_name",
    "cells",
    "check_run_dir",
    "close_run_dir",
    "finalists",
    "open_run_dir",
    "read_ledger",
    "run_config",
    "scoring_settings",
    "write_env",
]
