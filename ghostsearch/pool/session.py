"""One pool session: what every driver that scores on a pool does around its work, in one place.

``PoolSession(cfg, address)`` joins Ray (``connect``: the cluster at ``address`` / pool.address /
$RAY_ADDRESS, else a local Ray of its own, loopback only, token auth on, the dashboard when
pool.dashboard says so: cluster.py), gives the pool (``start``: the named pool, pool.name, found;
else one started, pool.py) and checks what the pool's values depend on (``identity``). ``release``
ends every pool this session started (a named pool outlives it, as does one started
``detached``) and shuts down the Ray this session started (a Ray it joined is left running).
While it holds pools it started on a local Ray of its own, this process's thread pools (BLAS, torch)
run on the cores those pools leave (threads.py); released with them.
As a context manager it releases on leaving, however the block is left; ``start`` connects first
when the session has not.

The runner's ``Run``, plan's measurement, ``ghostsearch pool`` and the bench scripts all use it.
"""

from __future__ import annotations

import os
from typing import Any

from ghostsearch.config import Config
from ghostsearch.objectives import ObjectiveSpec
from ghostsearch.pool import cluster, threads
from ghostsearch.pool import pool as lifecycle
from ghostsearch.pool.actors import ScorerActor


class PoolSession:
    """Connect, start, release: one driver's pool (see the module's docstring).

    ``dashboard`` overrides pool.dashboard; ``num_cpus`` caps a local Ray's CPUs (benchmarks). After
    ``start``, ``broker`` is the pool's broker (a Ray actor handle); ``started_ray`` says whether this
    session started the Ray it is on (and so shuts it down)."""

    def __init__(
        self,
        cfg: Config | None,
        address: str | None = None,
        *,
        dashboard: bool | None = None,
        num_cpus: int | None = None,
    ):
        self.cfg = cfg  # None: a session that only joins Ray (``ghostsearch pool down|status``)
        self.address = address or (cfg.pool.address if cfg is not None else None)
        self.dashboard = (cfg.pool.dashboard if cfg is not None else False) if dashboard is None else dashboard
        self.num_cpus = num_cpus
        self.connected = False
        self.started_ray = False
        self.broker: Any = None
        self._pools: list[Any] = []  # brokers this session started (ended on release)
        self._cpus: dict[int, float] = {}  # id(broker) -> the CPUs its scorers take (a local Ray's)
        self._limited: threads.Limited | None = None  # this process's thread pools while local pools score

    def connect(self) -> PoolSession:
        """Join Ray (cluster.connect); a second call does nothing."""
        if not self.connected:
            self.started_ray = cluster.connect(self.address, dashboard=self.dashboard, num_cpus=self.num_cpus)
            self.connected = True
        return self

    def start(
        self,
        cfg: Config | None = None,
        *,
        name: str | None = None,
        detached: bool = False,
        wait: bool = True,
        actor_class=ScorerActor,
        load_dtype: str | None = None,
    ):
        """The pool of ``cfg`` (default: the session's config): the named one (pool.name) when it
        names one and ``name`` is not given, else a new one (pool.start_pool, which takes the other
        arguments). A pool started here is ended by ``release`` unless ``detached``. Returns its
        broker, also kept as ``broker``."""
        cfg = cfg or self.cfg
        if cfg is None:
            raise ValueError("PoolSession.start needs a config (the session's or its own)")
        self.connect()
        if cfg.pool.name and name is None:
            broker = lifecycle.find_pool(cfg.pool.name)
        else:
            broker = lifecycle.start_pool(
                cfg, name=name, detached=detached, wait=wait, actor_class=actor_class, load_dtype=load_dtype
            )
            if not detached:
                self._pools.append(broker)
                if self.started_ray:
                    self._cpus[id(broker)] = cfg.pool.actors * lifecycle.resources(cfg)[0]
                    self._driver_threads()
        self.broker = broker
        return broker

    def identity(self, specs: list[ObjectiveSpec]) -> dict:
        """What the pool's values depend on (pool.pool_identity); a named pool serving another model,
        dtype or device than the config's is refused in one line."""
        assert self.cfg is not None, "a session without a config has no pool to check"
        return lifecycle.pool_identity(self.broker, self.cfg, specs)

    def release_pool(self, broker: Any = None) -> None:
        """End one pool this session started (default: the last), now: its CPUs/GPUs free for what
        comes next. A pool it did not start is left alone."""
        import ray

        broker = self.broker if broker is None else broker
        if broker is None or not any(b is broker for b in self._pools):
            return
        self._pools = [b for b in self._pools if b is not broker]
        self._cpus.pop(id(broker), None)
        try:
            if ray.is_initialized():
                lifecycle.release_pool(broker)
        finally:
            self._driver_threads()
        if self.broker is broker:
            self.broker = None

    def _driver_threads(self) -> None:
        """This process's thread pools at what the local pools it holds leave (threads.driver_threads), or
        as they were when it holds none."""
        n = threads.driver_threads(sum(self._cpus.values()), threads.cores(), os.environ)
        if self._limited is not None and self._limited.n != n:
            self._limited.restore()
            self._limited = None
        if n is not None and self._limited is None:
            self._limited = threads.Limited(n)

    def release(self) -> None:
        """End every pool this session started, then shut down the Ray it started. Idempotent."""
        import ray

        try:
            for b in list(self._pools):
                self.release_pool(b)
        finally:
            if self.started_ray and ray.is_initialized():
                cluster.shutdown()  # ray.shutdown, our SIGTERM handler again
            self._cpus.clear()
            self._driver_threads()  # as they were
            self.started_ray = False
            self.connected = False

    def __enter__(self) -> PoolSession:
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        self.release()
