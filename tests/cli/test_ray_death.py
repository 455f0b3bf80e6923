"""A Ray control-plane or pool-process death mid-run (issue 48: a starved GCS ended the broker and the run
with a 50-line ActorDiedError traceback, exit 1) is one line, exit 3, saying the work is kept and the exact
command that resumes; the local Ray's busy-machine waits are set where the user has not set them."""

from __future__ import annotations

import os

import pytest
import ray.exceptions

from ghostsearch.cli import ledger
from ghostsearch.cli.main import main
from ghostsearch.pool import cluster


@pytest.mark.parametrize(
    "error",
    [
        ray.exceptions.ActorDiedError(),  # what PoolClient's ray.get raises when the broker's process is gone
        ray.exceptions.RaySystemError("Failed to connect to GCS within 60 seconds.\n" + "  frame\n" * 50),
    ],
    ids=["ActorDiedError", "RaySystemError"],
)
def test_a_ray_death_mid_run_is_one_line_exit_3_with_the_resume_command(error, monkeypatch, capsys):
    def died(args):
        raise error

    monkeypatch.setattr(ledger, "run", died)
    assert main(["ledger", "runs/my run"]) == 3
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err, err
    assert "is kept in the run's ledger: rerun `ghostsearch ledger 'runs/my run'` to resume" in err, err


def test_busy_machine_waits_are_set_unless_the_user_set_them(monkeypatch):
    for k in cluster.BUSY_MACHINE:
        monkeypatch.delenv(k, raising=False)
    monkeypatch.setenv("RAY_health_check_timeout_ms", "1234")
    added = cluster.busy_machine_settings()
    assert os.environ["RAY_health_check_timeout_ms"] == "1234" and "RAY_health_check_timeout_ms" not in added
    assert os.environ["RAY_gcs_rpc_server_reconnect_timeout_s"] == "600"
