"""The run-directory lock (refusal names the live holder; a dead holder's lock is taken over) and
`ghostsearch ledger` (readable columns, node names, ISO times, CSV), without a model."""

from __future__ import annotations

import csv
import json
import logging
import subprocess
import sys
import time

import pytest

from ghostsearch.core.errors import GhostsearchError
from ghostsearch.rundir import lock
from ghostsearch.rundir.ledger import Ledger

HOLD = (
    "import sys, time; from ghostsearch.rundir import lock; lock.acquire(sys.argv[1]); "
    "print('held', flush=True); time.sleep(60)"
)


def test_a_live_holder_is_named_and_a_dead_ones_lock_is_taken_over(tmp_path, caplog):
    p = subprocess.Popen([sys.executable, "-c", HOLD, str(tmp_path)], stdout=subprocess.PIPE, text=True)
    try:
        assert p.stdout.readline().strip() == "held"
        with pytest.raises(GhostsearchError, match=f"in use by pid {p.pid} on .*choose another out=") as e:
            lock.acquire(tmp_path)
        assert "\n" not in str(e.value)
    finally:
        p.kill()  # SIGKILL: the holder never releases; the kernel drops its flock
        p.wait()
    assert json.loads((tmp_path / ".lock").read_text())["pid"] == p.pid  # its record is still there
    with caplog.at_level(logging.INFO, logger="ghostsearch.rundir"):
        lock.acquire(tmp_path)
    try:
        assert f"taking over the stale lock of pid {p.pid}" in caplog.text
        assert json.loads((tmp_path / ".lock").read_text())["pid"] != p.pid and lock.held(tmp_path)
    finally:
        lock.release(tmp_path)
    assert (tmp_path / ".lock").read_text() == "" and not lock.held(tmp_path)


def _row(i, node):
    return {
        "cell": "greedy-perplexity-k2-s0",
        "searcher": "greedy",
        "objective": "perplexity",
        "objective_key": "perplexity|c4",
        "removed": [i, i + 1],
        "k": 2,
        "fidelity": 1.0,
        "value": 10.0 + i,
        "tokens": 512,
        "seconds": 0.25,
        "cached": False,
        "actor": "a",
        "node": node,
        "seed": 0,
        "time": 1_700_000_000.0 + i,
    }


def test_ledger_command_csv(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    ledger = Ledger(run)
    nodes = ["f" * 56, "a" * 56, "f" * 56]
    for i, n in enumerate(nodes):
        ledger.append(_row(i, n))
    ledger.close()
    out = tmp_path / "l.csv"
    r = subprocess.run(
        [sys.executable, "-m", "ghostsearch", "ledger", str(run), "--csv", str(out)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 0, r.stderr
    rows = list(csv.DictReader(out.open()))
    assert [x["removed"] for x in rows] == ["0,1", "1,2", "2,3"]
    assert [x["node"] for x in rows] == ["node-1", "node-2", "node-1"]  # in order of first appearance
    assert rows[0]["time"] == time.strftime("%Y-%m-%dT%H:%M:%S+00:00", time.gmtime(1_700_000_000))
    assert list(rows[0])[:6] == ["time", "cell", "searcher", "objective", "k", "removed"]
    r = subprocess.run(
        [sys.executable, "-m", "ghostsearch", "ledger", str(tmp_path)], capture_output=True, text=True, timeout=120
    )
    assert r.returncode == 2 and "has no ledger/" in r.stderr and len(r.stderr.strip().splitlines()) == 1
