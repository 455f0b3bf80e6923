"""Experiment tracking: a search with tracking=[mlflow, tensorboard, wandb] on a tiny model, read
back by each tracker's own reader (MlflowClient on the run's sqlite store, TensorBoard's
EventAccumulator, W&B's offline run log); the curves equal result.json's labelled history."""

from __future__ import annotations

import json
import time

import pytest

from ghostsearch.config import load_config
from ghostsearch.core.errors import GhostsearchError


def test_unknown_tracker_is_one_line_before_work():
    with pytest.raises(GhostsearchError, match="tracking has 'neptune'; use any of: mlflow, tensorboard, wandb"):
        load_config(None, ["tracking=[neptune]"])


@pytest.mark.slow
def test_search_tracked_by_mlflow_tensorboard_wandb(tiny_model_dir, tmp_path, ray_local, monkeypatch):
    pytest.importorskip("mlflow")
    pytest.importorskip("tensorboard")
    pytest.importorskip("wandb")
    from mlflow.tracking import MlflowClient
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    from ghostsearch.run.runner import search

    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_SILENT", "true")
    out = tmp_path / "run"
    items = {
        "model": tiny_model_dir,
        "dtype": "fp32",
        "device": "cpu",
        "calibration.dataset": "lambada",
        "calibration.n_seq": 4,
        "calibration.seq_len": 32,
        "k": 2,
        "searcher": "greedy",
        "out": str(out),
        "pool.actors": 1,
        "pool.dashboard": False,
        "tracking": "[mlflow,tensorboard,wandb]",
    }
    search(load_config(None, [f"{k}={v}" for k, v in items.items()]), progress=False)
    ((cell, res),) = json.loads((out / "result.json").read_text())["cells"].items()
    hist = res["history"]
    assert hist and set(hist[0]) == {"budget_used", "seconds", "best_value"}
    assert hist[-1]["best_value"] == res["value"] and hist[-1]["budget_used"] == res["budget_used"]
    # each entry's seconds is when its own evaluation finished (a step's candidates finish in the scorer's
    # order, not the history's, so they need not increase): within the cell's time, and not one stamp for all
    assert all(0 <= h["seconds"] <= res["wall_seconds"] + 1e-6 for h in hist)
    assert len(hist) == 1 or len({h["seconds"] for h in hist}) > 1
    curve = [h["best_value"] for h in hist if h["best_value"] is not None]

    client = MlflowClient(f"sqlite:///{out / 'mlflow.db'}")
    (run,) = client.search_runs([client.get_experiment_by_name("ghostsearch").experiment_id])
    assert run.info.status == "FINISHED"
    assert run.data.params["k"] == "2" and run.data.params["calibration.n_seq"] == "4"
    logged = sorted(client.get_metric_history(run.info.run_id, f"{cell}/best_value"), key=lambda m: m.step)
    assert [m.value for m in logged] == pytest.approx(curve)
    assert run.data.metrics[f"{cell}/value"] == pytest.approx(res["value"])
    assert run.data.tags[f"{cell}/removed"] == ",".join(map(str, res["removed"]))

    (tb_dir,) = (out / "tensorboard").iterdir()
    acc = EventAccumulator(str(tb_dir))
    acc.Reload()
    assert [e.value for e in acc.Scalars(f"{cell}/best_value")] == pytest.approx(curve, rel=1e-6)
    assert [e.value for e in acc.Scalars(f"{cell}/budget_used")] == pytest.approx(
        [h["budget_used"] for h in hist if h["best_value"] is not None]
    )

    # W&B offline: its run log (protobuf records; this wandb ships no Python reader for it) holds
    # the cell's series and the removed set, ready for `wandb sync`
    (log,) = (out / "wandb").glob("offline-run-*/run-*.wandb")
    blob = log.read_bytes()
    deadline = time.monotonic() + 60  # wandb's writer process may still be flushing after finish()
    while f"{cell}/best_value".encode() not in blob and time.monotonic() < deadline:
        time.sleep(1)
        blob = log.read_bytes()
    assert f"{cell}/best_value".encode() in blob and f"{cell}/step".encode() in blob
    assert json.dumps(",".join(map(str, res["removed"]))).encode() in blob
