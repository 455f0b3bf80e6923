"""Where a run's results go: RUN_DIR (staged locally when ``out=`` is an s3:// or gs:// URI,
rundir/remote.py) and the configured trackers (tracking.py). ``search`` and ``compare`` open one
``RunOutputs``, report each finished cell and finalist to it, and close it at the end (also after
an error, so what was ledgered reaches the URI). When a tracker cannot start, what the trackers
began to write is removed, RUN_DIR is released (and removed when this run created it and ledgered
nothing), and the error goes on."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from ghostsearch.config import Config
from ghostsearch.core.eval_numbers import FinalistNumbers
from ghostsearch.core.tracking import Tracker, check_trackers
from ghostsearch.rundir import close_run_dir, open_run_dir
from ghostsearch.rundir.remote import stage


class RunOutputs:
    def __init__(self, cfg: Config, kind: str):
        check_trackers(cfg.tracking)
        self.staged = stage(cfg.out)
        self.dir: Path = open_run_dir(cfg, kind, self.staged.local)
        before = _paths(self.dir)
        try:
            self.tracker = Tracker(cfg.tracking, self.dir, f"{Path(self.staged.uri).name}-{kind}", cfg.to_dict())
        except BaseException:
            _remove_new(self.dir, before)  # what the trackers began to write in RUN_DIR, nothing else
            close_run_dir(self.dir, ok=False)  # unlocked; removed when this run created it (nothing ledgered)
            raise

    def cell(self, res: dict) -> None:
        """A finished cell: to the trackers, and RUN_DIR to the URI."""
        self.tracker.cell(res)
        self.staged.push()

    def finalist(self, cell: str, recovery: str, numbers: FinalistNumbers) -> None:
        self.tracker.finalist(cell, recovery, numbers)

    def close(self, ok: bool = True) -> None:
        try:
            self.tracker.close(ok)
        finally:
            self.staged.push()


def _paths(root: Path) -> set[str]:
    """Every file and directory under ``root`` (symbolic links not followed), relative to it."""
    out: set[str] = set()
    for d, dirs, files in os.walk(root):
        rel = os.path.relpath(d, root)
        out.update(os.path.normpath(os.path.join(rel, n)) for n in dirs + files)
    return out


def _remove_new(root: Path, before: set[str]) -> None:
    """Remove what appeared under ``root`` since ``before`` (``_paths``): each new top-most entry."""
    new = _paths(root) - before
    for rel in sorted(new):
        if os.path.dirname(rel) in new:
            continue  # inside a new directory, removed with it
        path = root / rel
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path, ignore_errors=True)
        else:
            path.unlink(missing_ok=True)


def recovered_methods(run_dir: Path) -> list[tuple[tuple[int, ...], str]]:
    """(removed, method) of every repair ``recover`` fitted in a run (RUN_DIR/recovery.parquet)."""
    path = Path(run_dir) / "recovery.parquet"
    if not path.exists():
        return []
    import pyarrow.parquet as pq

    out = []
    for r in pq.read_table(path, columns=["removed", "method"]).to_pylist():
        key = (tuple(sorted(int(i) for i in r["removed"])), str(r["method"]))
        if key[1] != "none" and key not in out:
            out.append(key)
    return out
