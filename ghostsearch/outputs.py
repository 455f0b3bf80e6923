"""Where a run's results go: RUN_DIR (staged locally when ``out=`` is an s3:// or gs:// URI,
rundir/remote.py) and the configured trackers (tracking.py). ``search`` and ``compare`` open one
``RunOutputs``, report each finished cell and finalist to it, and close it at the end (also after
an error, so what was ledgered reaches the URI)."""
from __future__ import annotations

from pathlib import Path

from ghostsearch.config import Config
from ghostsearch.rundir import open_run_dir
from ghostsearch.rundir.remote import stage
from ghostsearch.tracking import Tracker, check_trackers


class RunOutputs:
    def __init__(self, cfg: Config, kind: str):
        check_trackers(cfg.tracking)
        self.staged = stage(cfg.out)
        self.dir: Path = open_run_dir(cfg, kind, self.staged.local)
        self.tracker = Tracker(cfg.tracking, self.dir, f"{Path(self.staged.uri).name}-{kind}", cfg.to_dict())

    def cell(self, res: dict) -> None:
        """A finished cell: to the trackers, and RUN_DIR to the URI."""
        self.tracker.cell(res)
        self.staged.push()

    def finalist(self, cell: str, recovery: str, numbers: dict) -> None:
        self.tracker.finalist(cell, recovery, numbers)

    def close(self, ok: bool = True) -> None:
        try:
            self.tracker.close(ok)
        finally:
            self.staged.push()
