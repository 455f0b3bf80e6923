"""run, above the pool: one search cell on the pool (runner.py: `Run`, `search`) and `ghostsearch
recover` over a run directory (recover.py)."""
