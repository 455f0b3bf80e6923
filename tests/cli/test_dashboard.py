"""Issue 38: the dashboard a run starts can be opened from what the run prints. Ray 2.60 turns token
auth on for a local Ray (the page asks for a token nobody mentioned; `/api/version` answered
"Unauthorized: Missing authentication token"), no URL was printed, and a second concurrent run
also took port 8265. Now the run prints the URL and how to get in (the token from `ray
get-auth-token`), and takes the next free port when another run holds 8265."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CONNECT = """
import logging, sys, time
from ghostsearch.core.logs import setup_logging
from ghostsearch.pool.cluster import connect
setup_logging(0)
connect(None, dashboard=True, num_cpus=1)
print("READY", flush=True)
sys.stdin.read()  # lives until the test closes stdin
"""


def _start():
    env = dict(os.environ, PYTHONPATH=str(ROOT), RAY_USAGE_STATS_ENABLED="0")
    env.pop("RAY_ADDRESS", None)
    p = subprocess.Popen(
        [sys.executable, "-c", CONNECT],
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert p.stdout.readline().strip() == "READY", p.stderr.read()[-2000:]
    return p


def _get(url, token=None):
    req = urllib.request.Request(url, headers={"Authorization": f"Bearer {token}"} if token else {})
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status
    except urllib.error.HTTPError as e:
        return e.code


def _line(p) -> str:
    """The run's dashboard line (stderr is read up to it)."""
    for _ in range(400):
        line = p.stderr.readline()
        if "Ray dashboard:" in line:
            return line
    raise AssertionError("no dashboard line")


@pytest.mark.slow
def test_the_run_prints_its_dashboard_url_and_how_to_open_it_and_two_runs_do_not_share_a_port():
    a = _start()
    try:
        line = _line(a)
        url = re.search(r"(http://127\.0\.0\.1:\d+)", line).group(1)
        assert "ray get-auth-token" in line and "ssh -L" in line, line
        assert _get(url + "/api/version") == 401  # Ray 2.60's token auth, on by default
        token = (Path.home() / ".ray" / "auth_token").read_text().strip()
        assert _get(url + "/api/version", token) == 200  # what the line says opens it
        b = _start()
        try:
            other = re.search(r"(http://127\.0\.0\.1:\d+)", _line(b)).group(1)
            assert other != url and _get(other + "/api/version", token) == 200
        finally:
            b.stdin.close()
            b.wait(timeout=120)
    finally:
        a.stdin.close()
        a.wait(timeout=120)
