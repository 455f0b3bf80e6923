"""RunOutputs when a tracker cannot start: RUN_DIR is not left created and locked, only what this
run created is removed (a resumed run directory and whatever else is in it stay), and the trackers
already started end as failed."""

from __future__ import annotations

import pytest

from ghostsearch.config import load_config
from ghostsearch.core import tracking
from ghostsearch.rundir import close_run_dir, lock, open_run_dir
from ghostsearch.rundir.outputs import RunOutputs


class Started:
    """A tracker backend that starts (writing into RUN_DIR, as TensorBoard and W&B do) and records its close."""

    closed: list = []

    def __init__(self, run_dir, name, params):
        for d in [d for d in run_dir.iterdir() if d.is_dir()]:
            (d / "started.tmp").write_text("x")  # also inside directories that were there
        (run_dir / "started").mkdir()
        (run_dir / "started" / "events").write_text("x")

    def close(self, ok):
        Started.closed.append(ok)


class Broken:
    def __init__(self, run_dir, name, params):
        (run_dir / "broken.db").write_text("half")
        raise RuntimeError("tracking server unreachable")


@pytest.fixture
def trackers(monkeypatch):
    Started.closed = []
    monkeypatch.setitem(tracking.BACKENDS, "tensorboard", Started)
    monkeypatch.setitem(tracking.BACKENDS, "mlflow", Broken)


def _cfg(out):
    return load_config(None, [f"out={out}", "tracking=[tensorboard,mlflow]"])


def test_a_tracker_that_cannot_start_leaves_no_new_run_directory(tmp_path, trackers):
    out = tmp_path / "run"
    with pytest.raises(RuntimeError, match="tracking server unreachable"):
        RunOutputs(_cfg(out), "search")
    assert not out.exists() and not lock.held(out)
    assert Started.closed == [False]  # the tracker that had started ended, as failed
    assert tmp_path.exists()  # the parent was there before: kept


def test_a_tracker_that_cannot_start_keeps_a_resumed_run_directory_and_unlocks_it(tmp_path, trackers):
    out = tmp_path / "run"
    cfg = _cfg(out)
    close_run_dir(open_run_dir(cfg, "search"))  # an earlier invocation of the same run
    (out / "notes").mkdir()
    (out / "notes" / "mine.txt").write_text("mine")  # not ghostsearch's
    before = sorted(p.relative_to(out) for p in out.rglob("*"))
    with pytest.raises(RuntimeError, match="tracking server unreachable"):
        RunOutputs(cfg, "search")
    assert sorted(p.relative_to(out) for p in out.rglob("*")) == before  # only what this run created is gone
    assert (out / "notes" / "mine.txt").read_text() == "mine" and (out / "config.yaml").exists()
    assert not lock.held(out) and (out / lock.LOCK_FILE).read_text() == ""  # released: no holder
    assert Started.closed == [False]
    close_run_dir(open_run_dir(cfg, "search"))  # the next invocation can take it
