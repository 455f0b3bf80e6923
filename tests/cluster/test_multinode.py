"""A REAL multi-node Ray cluster on one machine: job submission, spread actors,
dashboard/state/metrics APIs, token auth, and loss of a node during a job.

Two separate ``ray start --block`` process trees (head on 127.0.0.2, worker on
127.0.0.3, dashboard/job server on 127.0.0.1), token auth on; the search is
submitted with the real ``ray job submit`` CLI.  See localcluster.py.
Cost: ~2 GB RAM, ~1-2 minutes for the module.  Run: pytest -m multinode tests/cluster
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import cluster_checks as manifests
import pytest
import yaml
from localcluster import (
    HEAD_NODE_IP,
    WORKER_IP,
    LocalCluster,
    loopback_alias_works,
    make_cluster,
)

pytestmark = [
    pytest.mark.multinode,
    pytest.mark.skipif(not sys.platform.startswith("linux"), reason="needs Linux /proc"),
    pytest.mark.skipif(not loopback_alias_works(), reason="127.0.0.0/8 not routed to lo"),
]

HERE = Path(__file__).resolve().parent
REPO_ROOT = HERE.parents[1]

# What the multi-node tests submit: actors `ghostsearch-scorer-<i>` in namespace `ghostsearch`
# spread over the nodes, metric `ghostsearch_evaluations`, RUN_DIR/ledger written as it goes,
# RUN_DIR/result.json. A budget small enough for ~1 min on 2 CPUs, two scorer actors with SPREAD
# placement, restartable.
GHOSTSEARCH_SEARCH_ARGV = [
    "ghostsearch",
    "search",
    "configs/smollm2-quick.yaml",
    "--no-progress",
    "out={run_dir}",
    "pool.actors=2",
    "pool.threads=1",
    "pool.spread=true",
    "pool.dashboard=false",
    "searcher=oneshot",
    "calibration.n_seq=4",
    "calibration.seq_len=64",
]
RUNTIME_ENV_FILE = REPO_ROOT / "cluster" / "runtime_env.yaml"  # what users submit with
GRAFANA_FILE = REPO_ROOT / "cluster" / "grafana" / "ghostsearch-dashboard.json"
JOB_TIMEOUT_S = 240
SCORER_NAME = re.compile(r"^ghostsearch-scorer-\d+(-[0-9a-f]+)?$")
NAMESPACE = "ghostsearch"
METRIC = "ray_ghostsearch_evaluations"


def runtime_env_for_tests() -> dict:
    """cluster/runtime_env.yaml, without its `pip` step unless GHOSTSEARCH_TEST_RUNTIME_ENV_PIP=1:
    this cluster runs Ray from a virtualenv, which Ray clones whole (per node) for a pip
    runtime env: ~80 s to build and ~90 s to delete here. The pins are checked instead
    (equal to the image's in test_manifests, to this environment's below)."""
    renv = yaml.safe_load(RUNTIME_ENV_FILE.read_text())
    if os.environ.get("GHOSTSEARCH_TEST_RUNTIME_ENV_PIP") != "1":
        renv.pop("pip", None)
    return renv


def search_command(run_dir: Path) -> tuple[list[str], Path, dict | None]:
    """(entrypoint argv, working dir that `ray job submit --working-dir` uploads, runtime_env)."""
    argv = [a.format(run_dir=run_dir) for a in GHOSTSEARCH_SEARCH_ARGV]
    return argv, REPO_ROOT, runtime_env_for_tests()


# ---------------------------------------------------------------------------
# reading a run directory
# ---------------------------------------------------------------------------
def ledger_parts(run_dir: Path) -> list[Path]:
    """RUN_DIR/ledger/**/*.parquet, or a single RUN_DIR/*.parquet ledger file."""
    return sorted((run_dir / "ledger").rglob("*.parquet")) or sorted(run_dir.glob("*.parquet"))


def evaluations_flowing(run_dir: Path) -> bool:
    """A ledger part or a non-empty journal (rows of a running search) exists. The journals live in
    ledger/_journal/ (rglob: a plain glob of ledger/ saw only the parts, written every 10 s, so a
    search shorter than that showed no rows until it ended)."""
    journals = (run_dir / "ledger").rglob("journal-*.jsonl") if (run_dir / "ledger").is_dir() else []
    return bool(ledger_parts(run_dir)) or any(j.stat().st_size > 0 for j in journals)


def read_ledger(run_dir: Path) -> list[dict]:
    import pyarrow.parquet as pq

    parts = ledger_parts(run_dir)
    assert parts, f"no ledger under {run_dir}"
    rows = []
    for p in parts:
        rows += pq.read_table(p).to_pylist()
    return rows


def scored(rows: list[dict]) -> set[tuple[tuple[int, ...], float]]:
    """(removed, value) of every computed (non-cached) evaluation."""
    return {(tuple(r["removed"]), r["value"]) for r in rows if not r.get("cached", False)}


def comparable_result(run_dir: Path) -> dict:
    """result.json without timings."""
    res = json.loads((run_dir / "result.json").read_text())

    def strip(x):
        if isinstance(x, dict):
            return {k: strip(v) for k, v in x.items() if not re.search(r"seconds|wall|time|rate", k)}
        if isinstance(x, list):  # e.g. history: [{budget_used, seconds, best_value}, ...]
            return [strip(v) for v in x]
        return x

    return strip(res)


# ---------------------------------------------------------------------------
# fixtures
# ---------------------------------------------------------------------------
@pytest.fixture(scope="module")
def cluster():
    c = make_cluster()
    try:
        c.start(num_cpus=2)
        yield c
    finally:
        c.stop()
    assert not c.root.exists()


def node_ids(c: LocalCluster) -> dict[str, str]:
    """node ip -> node id, over alive nodes."""
    return {n["node_ip"]: n["node_id"] for n in c.alive_nodes()}


class Observer:
    """Collects what the APIs show while a job runs (actors, metric presence)."""

    def __init__(self, c: LocalCluster):
        self.c = c
        self.actor_nodes: dict[str, set[str]] = {}
        self.series: set[str] = set()  # ray_ghostsearch_* series seen on any metrics endpoint

    def __call__(self, info=None):
        for a in self.c.list_actors(NAMESPACE):
            if SCORER_NAME.match(a.get("name") or "") and a.get("node_id"):
                self.actor_nodes.setdefault(a["name"], set()).add(a["node_id"])
        self.series |= set(re.findall(r"(?m)^(ray_ghostsearch_\w+)", self.c.metrics_text()))

    @property
    def metric_seen(self) -> bool:
        return any(n.startswith(METRIC) for n in self.series)


@pytest.fixture(scope="module")
def reference_run(cluster):
    """One fault-free submitted search: (submission id, run dir, job info, observer, seconds)."""
    run_dir = cluster.root / "run-reference"
    argv, wd, renv = search_command(run_dir)
    t0 = time.monotonic()
    sid = cluster.submit(argv, wd, renv)
    obs = Observer(cluster)
    info = cluster.wait_job(sid, JOB_TIMEOUT_S, on_poll=obs)
    seconds = time.monotonic() - t0
    obs()
    want = manifests.exported_names(json.loads(GRAFANA_FILE.read_text()))
    deadline = time.monotonic() + 15  # metrics are exported on an interval
    while not (obs.metric_seen and want <= obs.series) and time.monotonic() < deadline:
        time.sleep(0.5)
        obs()
    print(f"\nreference job: {info['status']} in {seconds:.1f}s")
    if info["status"] != "SUCCEEDED":
        print(cluster.job_logs(sid)[-4000:])
    return sid, run_dir, info, obs, seconds


# ---------------------------------------------------------------------------
# tests
# ---------------------------------------------------------------------------
def test_two_separate_nodes_with_token_auth(cluster):
    ids = node_ids(cluster)
    assert set(ids) == {HEAD_NODE_IP, WORKER_IP} and len(set(ids.values())) == 2
    # two distinct process trees, each with its own raylet
    assert cluster.nodes[0].raylet_pid() != cluster.nodes[1].raylet_pid()
    url = f"{cluster.dashboard_url}/api/jobs/"
    assert cluster.http_status(url, None) == 401
    assert cluster.http_status(url, "0" * 64) == 403
    assert cluster.http_status(url, cluster.token()) == 200
    # the job CLI without the token is refused
    bad = cluster.root / "wrong_token"
    bad.write_text("f" * 64)
    env = dict(cluster.env(), RAY_AUTH_TOKEN_PATH=str(bad))
    r = subprocess.run(
        cluster.ray_cli() + ["job", "list", f"--address={cluster.dashboard_url}"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode != 0, r.stdout
    # ... and so is a client with the right token file but without RAY_AUTH_MODE=token
    # (Ray's clients only send the token when the mode is set in their own environment)
    env = dict(cluster.env())
    env.pop("RAY_AUTH_MODE")
    r = subprocess.run(
        cluster.ray_cli() + ["job", "list", f"--address={cluster.dashboard_url}"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode != 0, r.stdout


def test_image_healthcheck_script(cluster):
    """docker/healthcheck.sh: healthy against a live node; falls back to an import check."""
    script = REPO_ROOT / "docker" / "healthcheck.sh"
    env = dict(cluster.env(), RAY_TMPDIR=str(cluster.nodes[0].temp_dir))
    r = subprocess.run(["bash", str(script)], env=env, capture_output=True, text=True, timeout=30)
    assert r.returncode == 0, r.stdout + r.stderr
    bad = cluster.root / "wrong_token"
    bad.write_text("f" * 64)
    r = subprocess.run(
        ["bash", str(script)], env=dict(env, RAY_AUTH_TOKEN_PATH=str(bad)), capture_output=True, text=True, timeout=30
    )
    assert r.returncode != 0, "healthcheck passed with a wrong token"
    empty = cluster.root / "no-node"
    empty.mkdir()
    env["RAY_TMPDIR"] = str(empty)
    env["PYTHONPATH"] = str(REPO_ROOT)
    r = subprocess.run(["bash", str(script)], env=env, capture_output=True, text=True, timeout=30)
    assert r.returncode == 0, r.stdout + r.stderr


def test_runtime_env_file_provides_project_deps(cluster):
    """A job submitted the documented way (--working-dir . --runtime-env cluster/runtime_env.yaml)
    imports every project dependency, sees the env vars, and runs from the uploaded checkout.
    (Ray's pip step: see runtime_env_for_tests.)"""
    from importlib.metadata import version

    pinned = manifests.pins(manifests.pip_packages(yaml.safe_load(RUNTIME_ENV_FILE.read_text()).get("pip")))
    wrong = {n: (v, version(n)) for n, v in pinned.items() if version(n).split("+")[0] != v}
    assert not wrong, f"runtime_env pins differ from this environment: {wrong}"
    renv = runtime_env_for_tests()
    mods = {"scikit-learn": "sklearn", "pyyaml": "yaml", "lm-eval": "lm_eval", "markdown-it-py": "markdown_it"}
    deps = [mods.get(n, n.replace("-", "_")) for n in manifests.project_deps(REPO_ROOT)]
    code = (
        "import importlib, os, sys; "
        f"[importlib.import_module(m) for m in {deps!r}]; "
        "assert os.environ['HF_HUB_OFFLINE'] == '1'; "
        "assert os.path.isfile('cluster/runtime_env.yaml'); "
        "assert not os.path.exists('.venv'), 'excluded dirs uploaded'; "
        "print('deps ok', sys.executable)"
    )
    t0 = time.monotonic()
    sid = cluster.submit(["python", "-c", code], REPO_ROOT, renv)
    info = cluster.wait_job(sid, 400)
    print(f"\nruntime_env job: {info['status']} in {time.monotonic() - t0:.1f}s")
    assert info["status"] == "SUCCEEDED", f"{info.get('message')}\n{cluster.job_logs(sid)[-4000:]}"
    assert "deps ok" in cluster.job_logs(sid)


def test_submitted_search_spreads_over_both_nodes(cluster, reference_run):
    sid, run_dir, info, obs, _ = reference_run
    logs = cluster.job_logs(sid)
    assert info["status"] == "SUCCEEDED", f"{info.get('message')}\n{logs[-4000:]}"
    ids = node_ids(cluster)
    assert info.get("driver_node_id") == ids[HEAD_NODE_IP]  # the driver runs on the head

    # dashboard REST API lists the job
    jobs = {j.get("submission_id"): j for j in cluster.list_jobs()}
    assert jobs[sid]["status"] == "SUCCEEDED"

    # state API lists the named scorer actors, on both nodes
    assert len(obs.actor_nodes) >= 2, obs.actor_nodes
    placed = set().union(*obs.actor_nodes.values())
    assert placed == set(ids.values()), (placed, ids)

    # the ledger names both nodes
    rows = read_ledger(run_dir)
    assert len({r["node"] for r in rows}) >= 2, {r["node"] for r in rows}
    assert (run_dir / "result.json").exists()

    # the custom metrics reach a metrics export endpoint (as ray_<name>[_total|_bucket...]),
    # under exactly the names the Grafana dashboard queries
    assert obs.metric_seen, f"{METRIC} not exported"
    want = manifests.exported_names(json.loads(GRAFANA_FILE.read_text()))
    assert want <= obs.series, f"dashboard queries series never exported: {want - obs.series}"


def test_worker_node_loss_during_job(cluster, reference_run):
    """Kill the worker node's raylet (SIGKILL, by pid) mid-job: the job succeeds with
    the same evaluations and result as the fault-free run."""
    _, ref_dir, ref_info, _, _ = reference_run
    assert ref_info["status"] == "SUCCEEDED"
    ids = node_ids(cluster)
    worker_id, head_id = ids[WORKER_IP], ids[HEAD_NODE_IP]
    worker = cluster.nodes[1]

    run_dir = cluster.root / "run-fault"
    argv, wd, renv = search_command(run_dir)
    sid = cluster.submit(argv, wd, renv)
    fault: dict = {}

    def inject(info):
        if fault or info.get("status") != "RUNNING":
            return
        if not evaluations_flowing(run_dir):
            return  # wait until evaluations are flowing
        on_worker = [
            a
            for a in cluster.list_actors(NAMESPACE)
            if SCORER_NAME.match(a.get("name") or "") and a.get("state") == "ALIVE" and a.get("node_id") == worker_id
        ]
        if not on_worker:
            return
        pid = worker.raylet_pid()
        os.kill(pid, signal.SIGKILL)
        fault.update(pid=pid, t=time.monotonic(), actors=[a["name"] for a in on_worker])

    t0 = time.monotonic()
    info = cluster.wait_job(sid, JOB_TIMEOUT_S, on_poll=inject, poll_s=0.2)
    print(
        f"\nfault job: {info['status']} in {time.monotonic() - t0:.1f}s; "
        f"raylet {fault.get('pid')} killed at {fault.get('t', t0) - t0:.1f}s"
    )
    assert fault, "the job finished before a scorer on the worker node was seen running"
    assert info["status"] == "SUCCEEDED", f"{info.get('message')}\n{cluster.job_logs(sid)[-4000:]}"

    # the worker node is gone; its scorer actors were restarted on the head
    deadline = time.monotonic() + 30
    while worker_id in node_ids(cluster).values() and time.monotonic() < deadline:
        time.sleep(0.5)
    assert worker_id not in node_ids(cluster).values()
    now = {
        a["name"]: a
        for a in cluster.list_actors(NAMESPACE)
        if SCORER_NAME.match(a.get("name") or "") and a.get("job_id") == info.get("job_id")
    }
    for name in fault["actors"]:  # restarted on the head, unless the job ended before Ray restarted it (seen once
        # on a loaded machine: the head's scorers finished the work first and the record stayed DEAD on the worker)
        assert now[name]["node_id"] == head_id or now[name]["state"] == "DEAD", now[name]

    # same evaluations, same result as the fault-free run
    assert scored(read_ledger(run_dir)) == scored(read_ledger(ref_dir))
    assert comparable_result(run_dir) == comparable_result(ref_dir)
