"""Experiment tracking: ``tracking: [mlflow, tensorboard, wandb]`` (default: none).

One tracking run per ``search``/``compare`` invocation, named after the run directory:
* the run config as parameters (dotted keys);
* per cell, ``<cell>/best_value``, ``<cell>/budget_used`` and ``<cell>/seconds`` at step i = the
  i-th evaluation told to the searcher (plot best_value against either), stamped with their wall
  time; then ``<cell>/value`` and the removed set;
* per evaluated finalist, its downstream numbers as ``<cell>/<recovery>/<metric>``.

MLflow: ``$MLFLOW_TRACKING_URI``, else ``sqlite:///RUN_DIR/mlflow.db`` (offline; experiment
``$MLFLOW_EXPERIMENT_NAME`` or ghostsearch). TensorBoard: event files in RUN_DIR/tensorboard.
W&B: ``$WANDB_MODE``, else offline unless ``WANDB_API_KEY`` is set; files under RUN_DIR/wandb.
The ledger stays the record of values; trackers get copies.
"""

from __future__ import annotations

import contextlib
import importlib.util
import logging
import math
import os
import time
from pathlib import Path
from typing import Literal

from ghostsearch.core.errors import GhostsearchError
from ghostsearch.core.eval_numbers import FinalistNumbers

TRACKERS = {"mlflow": "mlflow", "tensorboard": "tensorboard", "wandb": "wandb"}  # name -> package it needs
log = logging.getLogger(__name__)


def check_trackers(names) -> None:
    """Every name known and its package installed; one-line errors, before any work."""
    for n in names:
        if n not in TRACKERS:
            raise GhostsearchError(f"tracking has {n!r}; use any of: {', '.join(TRACKERS)} (or leave tracking out)")
        if importlib.util.find_spec(TRACKERS[n]) is None:
            raise GhostsearchError(
                f"tracking: {n} needs the {TRACKERS[n]} package; pip install {TRACKERS[n]}, or drop {n} from tracking"
            )


def flat(d: dict, prefix: str = "") -> dict[str, str]:
    """{'a': {'b': 1}} -> {'a.b': '1'}."""
    out = {}
    for k, v in d.items():
        if isinstance(v, dict) and v:
            out.update(flat(v, f"{prefix}{k}."))
        else:
            out[f"{prefix}{k}"] = str(v)
    return out


class _MLflow:
    def __init__(self, run_dir: Path, name: str, params: dict):
        from mlflow.entities import Param
        from mlflow.tracking import MlflowClient

        for quiet in ("mlflow", "alembic"):
            logging.getLogger(quiet).setLevel(logging.WARNING)
        uri = os.environ.get("MLFLOW_TRACKING_URI") or f"sqlite:///{(run_dir / 'mlflow.db').resolve()}"
        self.client = MlflowClient(uri)
        exp_name = os.environ.get("MLFLOW_EXPERIMENT_NAME", "ghostsearch")
        exp = self.client.get_experiment_by_name(exp_name)
        exp_id = exp.experiment_id if exp else self.client.create_experiment(exp_name)
        self.run = self.client.create_run(exp_id, run_name=name).info.run_id
        items = [Param(k, v[:6000]) for k, v in params.items()]
        for i in range(0, len(items), 100):
            self.client.log_batch(self.run, params=items[i : i + 100])

    def metrics(self, rows: list[tuple[int, float, dict]]) -> None:
        from mlflow.entities import Metric

        items = [Metric(k, v, int(wall * 1000), step) for step, wall, ms in rows for k, v in ms.items()]
        for i in range(0, len(items), 1000):
            self.client.log_batch(self.run, metrics=items[i : i + 1000])

    def text(self, key: str, value: str) -> None:
        self.client.set_tag(self.run, key, value)

    def close(self, ok: bool) -> None:
        self.client.set_terminated(self.run, "FINISHED" if ok else "FAILED")


class _TensorBoard:
    def __init__(self, run_dir: Path, name: str, params: dict):
        from torch.utils.tensorboard import SummaryWriter

        self.w = SummaryWriter(log_dir=str(run_dir / "tensorboard" / name))
        self.w.add_text("config", "\n".join(f"    {k}: {v}" for k, v in params.items()))

    def metrics(self, rows: list[tuple[int, float, dict]]) -> None:
        for step, wall, ms in rows:
            for k, v in ms.items():
                self.w.add_scalar(k, v, step, walltime=wall)

    def text(self, key: str, value: str) -> None:
        self.w.add_text(key, value)

    def close(self, ok: bool) -> None:
        self.w.close()


WandBMode = Literal["online", "offline", "disabled", "shared"]
WANDB_MODES: dict[str, WandBMode] = {
    "online": "online",
    "offline": "offline",
    "disabled": "disabled",
    "shared": "shared",
}


class _WandB:
    def __init__(self, run_dir: Path, name: str, params: dict):
        import wandb

        asked = os.environ.get("WANDB_MODE") or ("online" if os.environ.get("WANDB_API_KEY") else "offline")
        mode = WANDB_MODES.get(asked)
        if mode is None:
            raise GhostsearchError(f"WANDB_MODE={asked!r} is not a W&B mode; use one of {', '.join(WANDB_MODES)}")
        (run_dir / "wandb").mkdir(exist_ok=True)
        self.run = wandb.init(
            project=os.environ.get("WANDB_PROJECT", "ghostsearch"),
            name=name,
            dir=str(run_dir),
            config=params,
            mode=mode,
            reinit="create_new",
        )
        self.defined: set[str] = set()

    def metrics(self, rows: list[tuple[int, float, dict]]) -> None:
        for step, _, ms in rows:  # W&B's own step must only grow: each cell gets its step metric
            prefix = next(iter(ms)).rsplit("/", 1)[0]
            if prefix not in self.defined:
                self.run.define_metric(f"{prefix}/step")
                self.run.define_metric(f"{prefix}/*", step_metric=f"{prefix}/step")
                self.defined.add(prefix)
            self.run.log({f"{prefix}/step": step, **ms})

    def text(self, key: str, value: str) -> None:
        self.run.summary[key] = value

    def close(self, ok: bool) -> None:
        self.run.finish(exit_code=0 if ok else 1)


BACKENDS = {"mlflow": _MLflow, "tensorboard": _TensorBoard, "wandb": _WandB}


class Tracker:
    """The configured trackers of one run; does nothing when ``names`` is empty."""

    def __init__(self, names, run_dir: Path, name: str, config: dict):
        check_trackers(names)
        params = flat(config)
        self.backends: list = []
        try:
            for n in names:
                self.backends.append(BACKENDS[n](Path(run_dir), name, params))
        except BaseException:  # one cannot start: the ones started end, as failed
            for b in self.backends:
                with contextlib.suppress(Exception):
                    b.close(False)
            self.backends = []
            raise
        if self.backends:
            log.info("tracking to %s", ", ".join(names))

    def _each(self, method: str, *args) -> None:
        for b in self.backends:
            getattr(b, method)(*args)

    def cell(self, res: dict) -> None:
        """One finished cell (runner.run_cell's result): its history, final value and removed set."""
        if not self.backends:
            return
        c, start = res["cell"], time.time() - res.get("wall_seconds", 0.0)
        rows = [
            (
                i,
                start + h["seconds"],
                {
                    f"{c}/best_value": h["best_value"],
                    f"{c}/budget_used": h["budget_used"],
                    f"{c}/seconds": h["seconds"],
                },
            )
            for i, h in enumerate(res.get("history") or [], 1)
            if h["best_value"] is not None
        ]
        rows.append(
            (
                len(res.get("history") or []) or 1,
                time.time(),
                {f"{c}/value": res["value"], f"{c}/evaluations": res["evaluations"]},
            )
        )
        self._each("metrics", rows)
        self._each("text", f"{c}/removed", ",".join(map(str, res["removed"])))

    def finalist(self, cell: str, recovery: str, numbers: FinalistNumbers) -> None:
        """A finalist's downstream numbers (perplexities, accuracies: the numeric keys of its flat form)."""
        ms = {
            f"{cell}/{recovery}/{k}": float(v)
            for k, v in numbers.to_dict().items()
            if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)
        }
        if ms:
            self._each("metrics", [(0, time.time(), ms)])

    def close(self, ok: bool = True) -> None:
        self._each("close", ok)
        self.backends = []
