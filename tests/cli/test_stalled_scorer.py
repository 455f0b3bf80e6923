"""Issue 38: a scorer that stops answering (SIGSTOP: alive to Ray, so no RayActorError ever comes)
stalled the search for as long as it was stopped. Now the broker re-sends a request its scorer has
not answered within pool.stall_seconds to another scorer, says so in one line, and the search
finishes with the answer of an undisturbed run."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from tests.cli.test_faults import _config, _env, _wait_rows

CMD = [sys.executable, "-m", "ghostsearch"]
LIMIT = 5.0  # pool.stall_seconds of the test


@pytest.mark.slow
@pytest.mark.skip(
    reason="not yet reliable (stop 41): the stall line is missing when the stopped scorer holds no request "
    "after the stop; the test must stop a scorer with a request in flight (issue 38 stays open for it)"
)
def test_a_stopped_scorer_is_treated_as_dead_and_the_answer_is_unchanged(tiny_model_dir, tmp_path):
    def search(out: Path, stop: bool):
        cfg = _config(
            tmp_path / f"{out.name}.yaml",
            tiny_model_dir,
            out,
            k=2,
            searcher="greedy",
            pool={"actors": 2, "dashboard": False, "stall_seconds": LIMIT},
        )
        p = subprocess.Popen(
            [*CMD, "search", str(cfg), "--no-progress"],
            env=_env(),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )
        stopped = None
        try:
            if stop:
                _wait_rows(out, 2, p)
                scorers = [
                    q for q in psutil.Process(p.pid).children(recursive=True) if "ScorerActor" in " ".join(q.cmdline())
                ]
                assert len(scorers) == 2, [q.cmdline()[:2] for q in scorers]
                stopped = scorers[0]
                stopped.send_signal(signal.SIGSTOP)
                t0 = time.monotonic()
            out_, err = p.communicate(timeout=300)
            took = time.monotonic() - t0 if stop else None
        finally:
            if stopped is not None:
                try:
                    stopped.send_signal(signal.SIGCONT)
                except psutil.NoSuchProcess:  # the run ended and took its scorers with it
                    pass
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()
        assert p.returncode == 0, err[-2000:]
        return json.loads(out_.splitlines()[-1]), err, took

    reference, _, _ = search(tmp_path / "reference", stop=False)
    answer, err, took = search(tmp_path / "stopped", stop=True)
    assert (answer["removed"], answer["value"]) == (reference["removed"], reference["value"])
    assert "treated as stalled, its request re-sent to another scorer" in err, err[-2000:]
    assert took < 120  # the rest of the search (11 evaluations of a tiny model) plus one stall limit
