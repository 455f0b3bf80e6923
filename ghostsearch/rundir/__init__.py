"""Run directories (layout.py), their lock (lock.py) and the ledger of every evaluation (ledger.py)."""
from ghostsearch.rundir.layout import (
                                       cell_name,
                                       cells,
                                       check_run_dir,
                                       close_run_dir,
                                       finalists,
                                       open_run_dir,
                                       run_config,
                                       write_env,
)
from ghostsearch.rundir.ledger import Ledger, read_ledger

__all__ = ["Ledger", "cell_name", "cells", "check_run_dir", "close_run_dir", "finalists", "open_run_dir",
           "read_ledger", "run_config", "write_env"]
