"""The scoring pool under real Ray: faults (actor killed by pid, node removed), resume after
SIGKILL of the driver, and de-duplication across searchers. Every test compares against a
fault-free run of the same config."""

from __future__ import annotations

import collections
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from ghostsearch.config import load_config
from ghostsearch.pool.actors import PoolStatus
from ghostsearch.rundir.ledger import read_ledger
from tests import processes

pytestmark = pytest.mark.slow


def _cfg(model_dir, out, **over):
    items = {
        "model": model_dir,
        "dtype": "fp32",
        "device": "cpu",
        "objective": "perplexity",
        "calibration.dataset": "lambada",
        "calibration.n_seq": 8,
        "calibration.seq_len": 64,
        "k": 3,
        "searcher": "greedy",
        "seed": 0,
        "out": str(out),
        "pool.actors": 2,
        "pool.threads": 1,
        "pool.dashboard": False,
        **over,
    }
    return load_config(None, [f"{k}={v}" for k, v in items.items()])


def _summary(run_dir):
    t = read_ledger(run_dir).to_pylist()
    computed = collections.Counter((tuple(r["removed"]), r["fidelity"]) for r in t if not r["cached"])
    values = {(tuple(r["removed"]), r["fidelity"]): r["value"] for r in t}
    return computed, values


def _wait_rows(run_dir, n, timeout=300):
    t0 = time.time()
    while time.time() - t0 < timeout:
        if len(read_ledger(run_dir)) >= n:
            return
        time.sleep(0.05)
    raise TimeoutError(f"fewer than {n} ledger rows after {timeout}s")


def _search_in_thread(cfg):
    from ghostsearch.run.runner import search

    box = {}

    def target():
        try:
            box["result"] = search(cfg, progress=False)
        except BaseException as e:  # noqa: BLE001
            box["error"] = e

    th = threading.Thread(target=target)
    th.start()
    return th, box


def _check_same(run_dir, ref_dir, ref_result, result):
    computed, values = _summary(run_dir)
    ref_computed, ref_values = _summary(ref_dir)
    assert set(computed) == set(ref_computed)
    assert all(n == 1 for n in computed.values()), "a candidate was computed twice"
    assert values == ref_values  # scoring is deterministic: identical values
    (cell,) = result["cells"]
    assert result["cells"][cell]["removed"] == ref_result["cells"][cell]["removed"]
    assert result["cells"][cell]["value"] == ref_result["cells"][cell]["value"]


@pytest.fixture(scope="module")
def module_ray():
    """One local Ray for the in-process tests of this module, each starting its own pool on it and
    ending it (``_pool``): a Ray start and shutdown per test cost 11-23 s at load 10-18. The node-removal
    test, last in the file, needs a Ray of its own and shuts this one down first."""
    import ray

    from ghostsearch.pool.cluster import connect

    connect(None, dashboard=False, num_cpus=4)
    yield ray
    ray.shutdown()


@pytest.fixture
def pools():
    """start_pool for a test, every pool it started ended afterwards (the module's Ray has 4 CPUs)."""
    from ghostsearch.pool.pool import release_pool, start_pool

    started: list = []

    def start(cfg, **kw):
        started.append(start_pool(cfg, **kw))
        return started[-1]

    yield start
    for broker in started:
        release_pool(broker)


@pytest.fixture(scope="module")
def reference(tiny_model_dir, tmp_path_factory, module_ray):
    """A fault-free run of the test config (on the module's Ray: search joins it and leaves it up)."""
    from ghostsearch.run.runner import search

    out = tmp_path_factory.mktemp("ref")
    return out, search(_cfg(tiny_model_dir, out), progress=False)


def _stalled(ray, broker, quiet: float = 2.0, timeout: float = 300) -> PoolStatus:
    """The broker's status once it has a request in flight and has answered none for ``quiet`` s."""
    t0, last, since = time.time(), None, time.time()
    while time.time() - t0 < timeout:
        st = ray.get(broker.pool_status.remote())
        answered = sum(s.computed + s.cached for s in st.searchers.values())
        if answered != last:
            last, since = answered, time.time()
        elif st.inflight >= 1 and time.time() - since >= quiet:
            return st
        time.sleep(0.1)
    raise TimeoutError(f"the search did not stall on the stopped scorer within {timeout}s")


def _ready(ray, broker, timeout: float = 120) -> list[dict]:
    """Every scorer's info, once a restarted one answers again."""
    t0 = time.time()
    while True:
        try:
            return ray.get(broker.ready.remote())
        except ray.exceptions.RayActorError:
            if time.time() - t0 > timeout:
                raise
            time.sleep(0.5)


def test_actor_killed_by_pid_mid_search(tiny_model_dir, tmp_path, reference, module_ray, pools):
    """A scorer killed while it holds a request: the broker gives the request to another scorer
    (a retry), Ray restarts the dead one, and the search ends with the fault-free run's values.
    The victim is frozen (SIGSTOP) once the search runs, so the search stalls on the request it
    holds; only then is it killed, so the kill lands mid-request every time, however fast or
    loaded the machine."""

    cfg = _cfg(tiny_model_dir, tmp_path / "run", **{"pool.name": "killtest"})
    broker = pools(cfg, name="killtest")
    victim = module_ray.get(broker.ready.remote())[1]
    th, box = _search_in_thread(cfg)
    try:
        _wait_rows(cfg.out, 1)  # past the identity check (which asks every scorer)
        os.kill(victim["pid"], signal.SIGSTOP)
        before = _stalled(module_ray, broker)
        assert th.is_alive() and before.retries == 0
    finally:
        os.kill(victim["pid"], signal.SIGKILL)
    th.join(600)
    assert "error" not in box, box.get("error")
    assert module_ray.get(broker.pool_status.remote()).retries >= 1  # the held request was given to another scorer
    after = _ready(module_ray, broker)  # the killed scorer was restarted (a new process), not lost
    assert len(after) == 2 and victim["pid"] not in {a["pid"] for a in after}
    assert after[1]["name"] == victim["name"]
    _check_same(cfg.out, reference[0], reference[1], box["result"])


def test_resume_after_sigkill(tiny_model_dir, tmp_path, reference):
    out = tmp_path / "run"
    cfg_file = tmp_path / "c.yaml"
    cfg_file.write_text(
        f"model: {tiny_model_dir}\ndtype: fp32\ndevice: cpu\ncalibration: {{dataset: lambada, "
        f"n_seq: 8, seq_len: 64}}\nk: 3\nsearcher: greedy\nout: {out}\n"
        "pool: {actors: 2, threads: 1, dashboard: false}\n"
    )
    cmd = [*processes.CMD, "search", str(cfg_file), "--no-progress"]
    env = processes.env()
    with processes.search_process(cfg_file, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL):
        _wait_rows(out, 5)  # then the driver and the local Ray it started are killed (SIGKILL, its group)
    n_before = len(read_ledger(out))
    assert not (out / "result.json").exists()
    # ... then a compaction killed -9 between its new part and the unlinks, a 0-byte part (power
    # loss before fsync) and a valid-JSON row of the wrong type: all quarantined and recomputed
    crash = (
        "import os, signal, sys; from ghostsearch.rundir.ledger import write_compacted; "
        "write_compacted(sys.argv[1]); os.kill(os.getpid(), signal.SIGKILL)"
    )
    assert subprocess.run([sys.executable, "-c", crash, str(out)], env=env).returncode == -9
    (out / "ledger" / "part-00000000000000000001-x.parquet").write_bytes(b"")
    journal = next((out / "ledger" / "_journal").glob("journal-*.jsonl"))
    bad = dict(read_ledger(out).to_pylist()[0], eval_id="wrong-type", value="NaN please")
    with open(journal, "a") as f:
        f.write(json.dumps(bad) + "\n")
    r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-2000:]
    assert (out / "ledger" / "_quarantine" / "part-00000000000000000001-x.parquet").exists()
    assert "wrong-type" in "".join(f.read_text() for f in (out / "ledger" / "_quarantine").glob("rows-*"))
    computed, values = _summary(out)
    assert all(n == 1 for n in computed.values()), "a ledgered candidate was scored again"
    assert len(read_ledger(out)) > n_before
    _check_same(out, reference[0], reference[1], json.loads((out / "result.json").read_text()))


def test_two_drivers_on_one_run_dir(tiny_model_dir, tmp_path, reference):
    """The second driver is refused with a line naming the first; the first finishes unharmed."""
    from ghostsearch.core.errors import GhostsearchError
    from ghostsearch.run.runner import search

    out = tmp_path / "run"
    cfg_file = tmp_path / "c.yaml"
    cfg_file.write_text(
        f"model: {tiny_model_dir}\ndtype: fp32\ndevice: cpu\ncalibration: {{dataset: lambada, "
        f"n_seq: 8, seq_len: 64}}\nk: 3\nsearcher: greedy\nout: {out}\n"
        "pool: {actors: 2, threads: 1, dashboard: false}\n"
    )
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[2]))
    first = subprocess.Popen(
        [sys.executable, "-m", "ghostsearch", "search", str(cfg_file), "--no-progress"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    _wait_rows(out, 3)
    with pytest.raises(GhostsearchError, match=f"in use by pid {first.pid} on"):
        search(_cfg(tiny_model_dir, out), progress=False)
    assert first.wait(600) == 0, first.stderr.read()[-2000:]
    _check_same(out, reference[0], reference[1], json.loads((out / "result.json").read_text()))


def test_two_searchers_share_computation(tiny_model_dir, tmp_path, module_ray, pools):
    from ghostsearch.pool.client import PoolClient
    from ghostsearch.rundir.ledger import Ledger
    from ghostsearch.search.base import Candidate

    cfg = _cfg(tiny_model_dir, tmp_path / "run")
    broker = pools(cfg)
    ledger = Ledger(tmp_path / "run")
    a = [Candidate((i, j)) for i in range(5) for j in range(i + 1, 6)]
    b = [Candidate((i, j)) for i in range(3) for j in range(i + 1, 6)]
    results = {}

    def go(name, cands):
        c = PoolClient(broker, cfg.objective_spec(), ledger, name, 0, cfg.model, cfg.dtype)
        results[name] = c.evaluate(cands, name)

    ts = [threading.Thread(target=go, args=(n, c)) for n, c in (("A", a), ("B", b))]
    [t.start() for t in ts]
    [t.join() for t in ts]
    st = module_ray.get(broker.pool_status.remote())
    unique = {c.removed for c in a + b}
    assert sum(s.computed for s in st.searchers.values()) == len(unique)
    assert st.searchers["A"].requested == len(a) and st.searchers["B"].requested == len(b)
    va = dict(zip([c.removed for c in a], results["A"]))
    assert all(va[c.removed] == v for c, v in zip(b, results["B"]))
    rows = read_ledger(tmp_path / "run").to_pylist()
    assert sum(not r["cached"] for r in rows) == len(unique)
    # the shared cache's best k-sets, best first: what warm_start hands a model-based searcher
    client = PoolClient(broker, cfg.objective_spec(), ledger, "C", 0, cfg.model, cfg.dtype, k=2)
    want = sorted((v, list(s)) for s, v in va.items())[:3]
    assert client.best_known(3) == [(s, v) for v, s in want]
    assert PoolClient(broker, cfg.objective_spec(), ledger, "C", 0, cfg.model, cfg.dtype, k=3).best_known(3) == []


def test_a_resumed_cells_values_serve_another_run_directory_on_the_pool(tiny_model_dir, tmp_path, module_ray, pools):
    """Before: a cell resumed from its own ledger answered itself from it, but the pool's shared cache
    never saw those values, so another run directory on the same pool computed them all again
    (ga+endgame k8 s2 at 12-05: 2,762 s). Run A computes on one pool; on a fresh pool A resumes
    (load_known + share_known) and run B, its own ledger, asks the same sets: nothing is computed,
    and B gets A's values exactly."""
    from ghostsearch.pool.client import PoolClient
    from ghostsearch.pool.pool import release_pool
    from ghostsearch.rundir.ledger import Ledger
    from ghostsearch.search.base import Candidate

    cfg = _cfg(tiny_model_dir, tmp_path / "a", **{"pool.actors": 1})
    cands = [Candidate((i, j)) for i in range(3) for j in range(i + 1, 5)]
    first = pools(cfg)
    ledger_a = Ledger(tmp_path / "a")
    values = PoolClient(first, cfg.objective_spec(), ledger_a, "A", 0, cfg.model, cfg.dtype).evaluate(cands, "A")
    ledger_a.close()
    release_pool(first)

    broker = pools(cfg)  # a fresh pool: an empty shared cache
    resumed = PoolClient(broker, cfg.objective_spec(), Ledger(tmp_path / "a"), "A", 0, cfg.model, cfg.dtype)
    assert resumed.load_known(tmp_path / "a") == len(cands)
    assert resumed.share_known() == len(cands)
    assert resumed.share_known() == 0  # already there: nothing replaced
    ledger_b = Ledger(tmp_path / "b")
    other = PoolClient(broker, cfg.objective_spec(), ledger_b, "B", 0, cfg.model, cfg.dtype)
    assert other.evaluate(cands, "B") == values
    ledger_b.close()
    st = module_ray.get(broker.pool_status.remote())
    assert st.searchers["B"].computed == 0 and st.searchers["B"].cached == len(cands)
    assert other.cache_hits == len(cands)
    release_pool(broker)


def test_warm_start_begins_with_the_cache_and_is_replayed(tiny_model_dir, tmp_path, module_ray, pools):
    """bo with warm_start after greedy on one pool: its first k-sets are greedy's best ones (asked
    and charged), recorded in RUN_DIR/warm/<cell>.json; a rerun of the cell, with more in the cache,
    starts from the recorded sets and ends identically. Without warm_start nothing is read."""
    from ghostsearch.run.runner import run_cell
    from ghostsearch.rundir.ledger import Ledger

    cfg = _cfg(
        tiny_model_dir,
        tmp_path / "run",
        k=2,
        **{
            "search.params": json.dumps(
                {"bo": {"warm_start": True, "warm_n": 2, "budget": 12, "sampler": "tpe", "race": False, "batch": 1}}
            )
        },
    )
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    broker = pools(cfg)
    n = module_ray.get(broker.ready.remote())[0]["n_blocks"]
    greedy = run_cell(
        cfg, broker, run_dir, searcher="greedy", objective="perplexity", k=2, seed=0, n_blocks=n, progress=False
    )
    Ledger(run_dir).compact()
    bo = run_cell(cfg, broker, run_dir, searcher="bo", objective="perplexity", k=2, seed=0, n_blocks=n, progress=False)
    warm = json.loads((run_dir / "warm" / "bo-perplexity-k2-s0.json").read_text())
    assert warm[0]["removed"] == list(greedy.removed) and len(warm) == 2
    assert bo.warm_start == tuple(tuple(w["removed"]) for w in warm)
    rows = [r for r in read_ledger(run_dir).to_pylist() if r["cell"] == bo.cell and r["k"] == 2]
    assert [r["removed"] for r in rows[:2]] == [w["removed"] for w in warm]  # asked first, each charged once
    assert bo.value <= greedy.value
    again = run_cell(
        cfg, broker, run_dir, searcher="bo", objective="perplexity", k=2, seed=1, n_blocks=n, progress=False
    )  # another cell: reads the cache now (bo's sets too)
    assert again.warm_start[0] == bo.removed  # the cache's best k-set is bo's answer now
    replay = run_cell(
        cfg, broker, run_dir, searcher="bo", objective="perplexity", k=2, seed=0, n_blocks=n, progress=False
    )
    assert replay.warm_start == bo.warm_start and replay.removed == bo.removed
    cold = _cfg(
        tiny_model_dir,
        tmp_path / "run",
        k=2,
        **{"search.params": json.dumps({"bo": {"budget": 12, "sampler": "tpe", "race": False, "batch": 1}})},
    )
    assert (
        run_cell(
            cold, broker, run_dir, searcher="bo", objective="perplexity", k=2, seed=2, n_blocks=n, progress=False
        ).warm_start
        == ()
    )


def test_worker_node_removed_mid_search(tiny_model_dir, tmp_path, reference):
    import ray
    from ray.cluster_utils import Cluster

    from ghostsearch.pool.pool import start_pool

    if ray.is_initialized():  # the module's Ray (module_ray): this test needs a cluster of its own
        ray.shutdown()
    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 2})
    worker = cluster.add_node(num_cpus=2)
    try:
        ray.init(address=cluster.address, namespace="ghostsearch")
        cfg = _cfg(tiny_model_dir, tmp_path / "run", **{"pool.name": "nodetest", "pool.spread": True})
        broker = start_pool(cfg, name="nodetest")
        nodes = {a["node"] for a in ray.get(broker.ready.remote())}
        assert len(nodes) == 2, "SPREAD should place one scorer on each node"
        th, box = _search_in_thread(cfg)
        _wait_rows(cfg.out, 4)
        cluster.remove_node(worker)
        th.join(600)
        assert "error" not in box, box.get("error")
        _check_same(cfg.out, reference[0], reference[1], box["result"])
        assert len({r["node"] for r in read_ledger(cfg.out).to_pylist() if not r["cached"]}) >= 1
    finally:
        ray.shutdown()
        cluster.shutdown()
