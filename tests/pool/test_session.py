"""One pool session (issue 39 item 3): connect, start, release, in one place (pool/session.py).

Without Ray: what the session asks of cluster.py and pool.py (the lifecycle) is recorded by stand-ins,
so the rules are checked fast: a pool it started is ended on release, a named or detached pool is
not, the Ray it started is shut down and a Ray it joined is not, however the block is left; while
it holds pools on a Ray it started, this process's thread pools run on the cores they leave (threads.py).
With Ray (slow): a real local Ray and a pool of stand-in scorers (no model), released for real."""

from __future__ import annotations

import os

import pytest

from ghostsearch.config import load_config
from ghostsearch.pool import cluster, threads
from ghostsearch.pool import pool as lifecycle
from ghostsearch.pool.session import PoolSession


def driver_pools() -> list[int]:
    """This process's thread counts: threadpoolctl's pools (both OpenBLAS libraries, OpenMP) and torch's."""
    import threadpoolctl
    import torch

    return [d["num_threads"] for d in threadpoolctl.threadpool_info()] + [torch.get_num_threads()]


class Fake:
    """Stand-ins for cluster.connect and the lifecycle, recording every call."""

    def __init__(self, monkeypatch, starts_ray: bool):
        import ray

        self.calls: list[tuple] = []
        self.up = False
        monkeypatch.setattr(cluster, "connect", self.connect)
        monkeypatch.setattr(lifecycle, "start_pool", self.start_pool)
        monkeypatch.setattr(lifecycle, "find_pool", lambda name: self.calls.append(("find", name)) or f"named:{name}")
        monkeypatch.setattr(lifecycle, "release_pool", lambda b: self.calls.append(("release", b)) or True)
        monkeypatch.setattr(lifecycle, "resources", lambda cfg: (cfg.pool.threads, 0))  # CPU scorers
        monkeypatch.setattr(threads, "cores", lambda: 2)  # one core left beside a pool of 1 scorer x 1 thread
        for v in threads.THREAD_VARS:  # the test runner's own settings (scripts/test.sh): the product's default
            monkeypatch.delenv(v, raising=False)
        monkeypatch.setattr(ray, "is_initialized", lambda: self.up)
        monkeypatch.setattr(ray, "shutdown", self.shutdown)
        self.starts_ray, self.n = starts_ray, 0

    def connect(self, address=None, dashboard=True, num_cpus=None):
        self.calls.append(("connect", address, dashboard, num_cpus))
        self.up = True
        return self.starts_ray

    def start_pool(self, cfg, name=None, detached=False, wait=True, actor_class=None, load_dtype=None):
        self.n += 1
        self.calls.append(("start", name, detached, load_dtype))
        return f"broker{self.n}"

    def shutdown(self):
        self.calls.append(("shutdown",))
        self.up = False


def test_a_session_ends_what_it_started_and_only_that(monkeypatch):
    fake = Fake(monkeypatch, starts_ray=True)
    cfg = load_config(None, ["pool.dashboard=false"])
    import scipy.linalg  # noqa: F401  (its OpenBLAS counted in ``before`` as in the session)
    import torch

    torch.set_num_threads(2)
    before = driver_pools()
    with PoolSession(cfg, num_cpus=3) as s:
        b1 = s.start(load_dtype="float32")
        assert driver_pools() == [1] * len(before)  # the driver's threads: the core the scorer leaves
        b2 = s.start(name="kept", detached=True)  # outlives the session
        assert (b1, b2, s.broker) == ("broker1", "broker2", "broker2") and s.started_ray
    assert driver_pools() == before  # as they were once the pool is released
    assert fake.calls == [
        ("connect", None, False, 3),  # start connects first; once
        ("start", None, False, "float32"),
        ("start", "kept", True, None),
        ("release", "broker1"),  # the detached pool is not released
        ("shutdown",),  # the Ray this session started
    ]
    s.release()  # idempotent
    assert fake.calls[-1] == ("shutdown",) and len(fake.calls) == 5


def test_a_named_pool_is_found_and_a_joined_ray_is_left_running_even_on_error(monkeypatch):
    fake = Fake(monkeypatch, starts_ray=False)
    cfg = load_config(None, ["pool.name=shared", "pool.address=10.0.0.1:6379"])
    before = driver_pools()
    with pytest.raises(RuntimeError, match="boom"):
        with PoolSession(cfg) as s:
            assert s.start() == "named:shared"
            assert driver_pools() == before  # a joined Ray's pool: the driver's threads left alone
            raise RuntimeError("boom")
    assert fake.calls == [("connect", "10.0.0.1:6379", True, None), ("find", "shared")]  # nothing ended


def test_release_pool_ends_one_pool_now_and_the_rest_at_release(monkeypatch):
    fake = Fake(monkeypatch, starts_ray=True)
    cfg = load_config(None, [])
    s = PoolSession(cfg, "1.2.3.4:6379", dashboard=False)
    a, b = s.start(), s.start()
    assert (a, b) == ("broker1", "broker2")
    s.release_pool(a)
    s.release_pool(a)  # ended already: nothing
    s.release_pool("not-ours")
    assert [c for c in fake.calls if c[0] == "release"] == [("release", "broker1")]
    s.release()
    assert fake.calls[-2:] == [("release", "broker2"), ("shutdown",)] and fake.calls[0][1] == "1.2.3.4:6379"


def test_the_driver_threads_are_the_cores_a_local_cpu_pool_leaves():
    assert [threads.driver_threads(cpus, 2, {}) for cpus in (2, 1, 4, 0)] == [1, 1, 1, None]  # 0: a GPU pool
    assert threads.driver_threads(2, 16, {}) == 14
    assert threads.driver_threads(2, 2, {"OPENBLAS_NUM_THREADS": "2"}) is None  # the user's setting wins


def test_a_session_without_a_config_only_joins_ray(monkeypatch):
    fake = Fake(monkeypatch, starts_ray=False)
    s = PoolSession(None, "h:6379").connect()
    assert fake.calls == [("connect", "h:6379", False, None)]
    with pytest.raises(ValueError, match="needs a config"):
        s.start()


def test_pool_modules_keep_one_concern_each():
    """pool.py is the lifecycle only: the Ray connection is cluster.py's, the client client.py's."""
    from ghostsearch.pool import client

    assert not hasattr(lifecycle, "PoolClient") and not hasattr(lifecycle, "connect")
    assert not hasattr(cluster, "start_pool") and not hasattr(client, "start_pool")
    assert hasattr(client, "PoolClient") and hasattr(cluster, "loopback_only")


@pytest.mark.slow
def test_a_real_session_releases_its_pool_and_its_ray(tmp_path):
    """A local Ray and a pool of no-model scorers: the pool answers; after the block, Ray is down."""
    import ray

    @ray.remote(max_restarts=-1, max_task_retries=0)
    class Noop:
        def __init__(self, cfg, threads, name):
            self.name = name

        def info(self) -> dict:
            return {"name": self.name, "node": ray.get_runtime_context().get_node_id(), "pid": os.getpid()}

    if ray.is_initialized():
        pytest.skip("this process already has a Ray (the session would join it)")
    cfg = load_config(None, ["pool.actors=1", "pool.threads=1", "pool.dashboard=false"])
    with PoolSession(cfg, num_cpus=1) as s:
        broker = s.start(actor_class=Noop)
        assert s.started_ray and ray.get(broker.pool_status.remote()).actors
    assert not ray.is_initialized()
