"""A starved control plane (issue 48): the run's own GCS stopped (SIGSTOP) mid-search for longer than
Ray's 60 s wait for it, then continued (SIGCONT); the run's end compared with an undisturbed run's.

    python bench/gcs_stop.py [--stop 75] [--config CONFIG] [key=value ...]

Three runs of ``ghostsearch search CONFIG out=<fresh dir> --no-progress``, at the same time (so at the
same load): undisturbed; "ray": Ray's own waits (RAY_gcs_rpc_server_reconnect_timeout_s=60 and the
other waits ghostsearch raises set back to Ray 2.60's defaults, as before issue 48); "ghostsearch":
ghostsearch's (``pool.cluster.BUSY_MACHINE``). In the last two the GCS (its pid found under that
run's driver: its own Ray, never by name) is stopped when the ledger holds ``--at`` rows, for
``--stop`` s. gRPC keepalive is lowered to 1 s in both (Ray's is 5 min), so that the stop is noticed
within seconds as a starved machine's late answers are: without it a stopped GCS goes unnoticed
mid-search, whose calls go from driver to broker to scorers without it. Prints one JSON line a run
(exit code, last stderr line, answer, seconds, whether the GCS was still stopped when the run ended)
and whether each disturbed run gave the undisturbed answer. Default: greedy k=2 on a tiny random
24-block Llama (made in a temporary folder), calibration 16 x 64 tokens.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import benchenv  # noqa: F401
import psutil
import yaml

from ghostsearch.pool.cluster import BUSY_MACHINE

ROOT = Path(__file__).resolve().parents[1]
RAY_DEFAULTS = {  # Ray 2.60's values of the waits ghostsearch raises (src/ray/common/ray_config_def.h)
    "RAY_gcs_rpc_server_reconnect_timeout_s": "60",
    "RAY_health_check_timeout_ms": "10000",
    "RAY_health_check_failure_threshold": "5",
    "RAY_worker_register_timeout_seconds": "60",
    "RAY_gcs_server_request_timeout_seconds": "60",
}
NOTICED = {"RAY_grpc_client_keepalive_time_ms": "1000", "RAY_grpc_client_keepalive_timeout_ms": "1000"}


def rows(out: Path) -> int:
    """Ledger rows so far: the journal's lines and the parts' rows."""
    import pyarrow.parquet as pq

    n = 0
    for j in (out / "ledger" / "_journal").glob("*.jsonl"):
        n += sum(1 for line in j.read_text().splitlines() if line.strip())
    for part in (out / "ledger").glob("part-*.parquet"):
        try:
            n += pq.read_metadata(part).num_rows
        except Exception:  # noqa: BLE001  (a part being written)
            pass
    return n


def run(name: str, config: Path, over: list[str], out: Path, env: dict, stop: float, at: int) -> dict:
    t0 = time.monotonic()
    p = subprocess.Popen(
        [sys.executable, "-m", "ghostsearch", "search", str(config), f"out={out}", *over, "--no-progress"],
        env={**os.environ, "PYTHONPATH": str(ROOT), **env},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    rec: dict = {"run": name}
    gcs = None
    try:
        if stop:
            while rows(out) < at and p.poll() is None:
                time.sleep(0.05)
            found = [q for q in psutil.Process(p.pid).children(recursive=True) if q.name() == "gcs_server"]
            if p.poll() is None and len(found) == 1:
                gcs = found[0]
                gcs.send_signal(signal.SIGSTOP)
                rec["stopped_at_rows"], ts = rows(out), time.monotonic()
                while time.monotonic() - ts < stop and p.poll() is None:
                    time.sleep(0.2)
                rec["gcs_stopped_s"] = round(time.monotonic() - ts, 1)
                rec["ended_while_stopped"] = p.poll() is not None
                gcs.send_signal(signal.SIGCONT)
        o, e = p.communicate(timeout=1800)
    finally:
        if gcs is not None:
            try:
                gcs.send_signal(signal.SIGCONT)
            except psutil.Error:
                pass
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)
            o, e = p.communicate()
    lines = [x for x in e.splitlines() if x.strip()]
    try:
        res = json.loads(o.strip().splitlines()[-1])
        rec["answer"] = [sorted(res["removed"]), res["value"]]
    except (ValueError, IndexError, KeyError):
        rec["answer"] = None
    rec.update(code=p.returncode, seconds=round(time.monotonic() - t0, 1), last_line=(lines or [""])[-1][:300])
    rec["rows"] = rows(out)
    return rec


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--stop", type=float, default=75.0, help="seconds the GCS is stopped")
    ap.add_argument("--at", type=int, default=2, help="ledger rows before the stop")
    ap.add_argument("--config", type=Path, default=None)
    ap.add_argument("overrides", nargs="*")
    a = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="ghostsearch-gcs-stop-") as tmp:
        config = a.config
        if config is None:
            from transformers import AutoTokenizer

            from ghostsearch.model.models import model_path
            from tests.conftest import tiny_model

            model = Path(tmp) / "tiny-llama-24"
            tiny_model("llama", 24).save_pretrained(model, safe_serialization=True)
            AutoTokenizer.from_pretrained(model_path("smollm2-135m")[0]).save_pretrained(model)
            config = Path(tmp) / "c.yaml"
            cfg = {
                "model": str(model),
                "dtype": "fp32",
                "device": "cpu",
                "k": 2,
                "searcher": "greedy",
                "calibration": {"dataset": "lambada", "n_seq": 16, "seq_len": 64},
                "pool": {"actors": 1, "dashboard": False},
            }
            config.write_text(yaml.safe_dump(cfg))
        plans = [
            ("undisturbed", {}, 0.0),
            ("ray", {**RAY_DEFAULTS, **NOTICED}, a.stop),
            ("ghostsearch", {**NOTICED}, a.stop),
        ]
        for k in BUSY_MACHINE:
            os.environ.pop(k, None)  # "ghostsearch": its own values, not this shell's
        got: dict[str, dict] = {}
        threads = [
            threading.Thread(
                target=lambda n=n, e=e, s=s: got.__setitem__(n, run(n, config, a.overrides, Path(tmp) / n, e, s, a.at))
            )
            for n, e, s in plans
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    for n, _, _ in plans:
        r = got[n]
        r["same_answer"] = r["answer"] is not None and r["answer"] == got["undisturbed"]["answer"]
        print(json.dumps(r), flush=True)
    print(f"load average {os.getloadavg()[0]:.1f}; GCS stopped {a.stop:g} s at {a.at} ledger rows")


if __name__ == "__main__":
    main()
