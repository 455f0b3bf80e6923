"""A pool that outlives one job: `ghostsearch pool up` on a running Ray head, a search that uses
it by name (and a second one answered from its cache), `pool status`, `pool down`. The head is
started with `ray start` in its own temp dir and stopped by pid.

A job whose model is not the pool's is refused in one line (exit 2, no run directory) before any
work, on the same head (issue 48's "a search against a pool of another model"): a search naming
another model directory, and a ``target`` naming it (before its search, repairs or looks)."""

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent


# scorer 0 of the pool 'svc' killed by Ray and restarted (max_restarts): back when its process id has changed
RESTART = """
import os, time
import ray
ray.init()
a = ray.get_actor("svc-scorer-0", namespace="ghostsearch")
pid = lambda: ray.get(a.__ray_call__.remote(lambda self: os.getpid()), timeout=30)
before = pid()
ray.kill(a, no_restart=False)
for _ in range(600):
    try:
        if pid() != before:
            break
    except Exception:
        pass
    time.sleep(0.2)
else:
    raise SystemExit("scorer 0 did not come back")
"""


def _gs(args, env, timeout=300):
    r = subprocess.run(
        [str(BIN / "ghostsearch"), *args], env=env, capture_output=True, text=True, timeout=timeout, cwd=ROOT
    )
    assert r.returncode == 0, r.stderr[-2000:]
    return [json.loads(line) for line in r.stdout.splitlines() if line.startswith("{")]


def _refused(argv, message, out, env):
    """A job on the pool 'svc' ends in one line naming ``message``, exit 2, no traceback, no run directory."""
    r = subprocess.run(
        [str(BIN / "ghostsearch"), *argv, "pool.name=svc", f"out={out}", "--no-progress"],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        cwd=ROOT,
    )
    errors = [line for line in r.stderr.splitlines() if line.startswith("ghostsearch: error:")]
    assert r.returncode == 2 and len(errors) == 1 and message in errors[0], r.stderr
    assert "Traceback" not in r.stderr and not out.exists()


def test_pool_up_search_status_down(tiny_model_dir, tmp_path):
    temp = tempfile.mkdtemp(prefix="gs-pool-", dir="/tmp")
    # a loaded machine's raylet may take more than Ray's 30 s to register (issue 48): `ray start` waits 180 s
    env = dict(os.environ, RAY_AUTH_MODE="disabled", RAY_raylet_start_wait_time_s="180")
    port = 6400 + os.getpid() % 500
    subprocess.run(
        [
            str(BIN / "ray"),
            "start",
            "--head",
            f"--temp-dir={temp}",
            "--num-cpus=2",
            f"--port={port}",
            "--include-dashboard=false",
            "--disable-usage-stats",
        ],
        env=env,
        check=True,
        capture_output=True,
        timeout=120,
    )
    env["RAY_ADDRESS"] = f"127.0.0.1:{port}"
    served = tmp_path / "served"  # the pool's model directory, a copy: its weights are rewritten below
    shutil.copytree(tiny_model_dir, served)
    over = [
        f"model={served}",
        "dtype=fp32",
        "device=cpu",
        "calibration.dataset=lambada",
        "calibration.n_seq=4",
        "calibration.seq_len=64",
        "k=2",
        "searcher=oneshot",
        "pool.actors=1",
    ]
    try:
        # two scorers: one restarted by Ray after the files change must not answer for both (below)
        up = _gs(
            ["pool", "up", str(ROOT / "configs" / "smollm2-quick.yaml"), *over, "pool.actors=2", "pool.name=svc"], env
        )
        assert up[0]["actors"][0]["name"] == "svc-scorer-0"
        _gs(
            [
                "search",
                str(ROOT / "configs" / "smollm2-quick.yaml"),
                *over,
                "pool.name=svc",
                f"out={tmp_path / 'a'}",
                "--no-progress",
            ],
            env,
        )
        _gs(
            [
                "search",
                str(ROOT / "configs" / "smollm2-quick.yaml"),
                *over,
                "pool.name=svc",
                f"out={tmp_path / 'b'}",
                "--no-progress",
            ],
            env,
        )
        other = tmp_path / "other-model"  # same shape, other weights: the pool must not score it as this one
        from tests.conftest import tiny_model

        tiny_model("llama", 6, seed=1).save_pretrained(other, safe_serialization=True)
        from transformers import AutoTokenizer

        AutoTokenizer.from_pretrained(tiny_model_dir).save_pretrained(other)  # the pool model's tokenizer
        quick = str(ROOT / "configs" / "smollm2-quick.yaml")
        refused = [
            ["search", quick, *over, f"model={other}"],  # another model directory
            # target against the pool of another model: refused before its search, repair or looks
            ["target", str(ROOT / "configs" / "target-quick.yaml"), *over, f"model={other}", "target.ks=[1,2]"]
            + ["target.looks=[16,32]", "recovery.n_seq=8", "recovery.seq_len=64", "eval.ppl_seq_len=64"],
        ]
        for i, argv in enumerate(refused):
            _refused(argv, "pool 'svc' serves model", tmp_path / f"r{i}", env)
        # the pool's own model directory rewritten with other weights while the pool holds the old ones: a
        # job naming it is refused (before, the pool reported the new files' digest and scored the old weights)
        shutil.copy(other / "model.safetensors", served / "model.safetensors")
        _refused(["search", quick, *over], "changed after this pool loaded them", tmp_path / "r9", env)
        # scorer 0 restarted by Ray (killed, max_restarts): it loads the new files and vouches for them, while
        # scorer 1 still holds the old weights. Every scorer is asked now (before: scorer 0 only, and the job ran)
        subprocess.run([sys.executable, "-c", RESTART], env=env, check=True, capture_output=True, timeout=300)
        _refused(["search", quick, *over], "changed after this pool loaded them", tmp_path / "r10", env)
        st = _gs(["pool", "status", "--name", "svc"], env)[0]
        assert st["actors"] == ["svc-scorer-0", "svc-scorer-1"]
        s = st["searchers"]["oneshot"]
        assert s["computed"] > 0 and s["cached"] == s["computed"]  # the second job computed nothing
        assert st["hit_rate"] == pytest.approx(0.5)
        (cell,) = st["cells"].values()  # per cell: the best of its k-sets only
        assert cell["k"] == 2 and len(cell["best_removed"]) == 2
        down = _gs(["pool", "down", "--name", "svc"], env)[0]
        assert "svc-broker" in down["removed"]
    finally:
        out = subprocess.run(["pgrep", "-f", temp], capture_output=True, text=True).stdout.split()
        for pid in out:
            try:
                os.kill(int(pid), signal.SIGTERM)
            except (ProcessLookupError, ValueError):
                pass
        time.sleep(2)
        for pid in subprocess.run(["pgrep", "-f", temp], capture_output=True, text=True).stdout.split():
            try:
                os.kill(int(pid), signal.SIGKILL)
            except (ProcessLookupError, ValueError):
                pass
        subprocess.run(["rm", "-rf", temp])
