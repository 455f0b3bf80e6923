"""The scoring pool's lifecycle: start, find, check and end it.

``start_pool`` creates the scorer actors (optionally in a SPREAD placement group) and their
``Broker``; with a name and ``detached=True`` the pool outlives the job (``ghostsearch pool up``),
and later jobs find it with ``find_pool``. ``release_pool`` ends a pool this driver started,
``stop_pool`` a named one. ``pool_identity`` is what the pool's values depend on. Joining Ray is
cluster.py, the client a searcher evaluates through is client.py, and a driver uses them together
through ``session.PoolSession``.
"""

from __future__ import annotations

import dataclasses
import uuid
from typing import Any

import ray

from ghostsearch.config import Config
from ghostsearch.core.errors import GhostsearchError
from ghostsearch.objectives import ObjectiveSpec
from ghostsearch.pool.actors import NAMESPACE, Broker, ScorerActor


def resources(cfg: Config) -> tuple[float, float]:
    gpus = cfg.pool.gpus_per_actor
    if gpus is None:
        gpus = 1.0 if ray.cluster_resources().get("GPU", 0) >= 1 else 0.0
    cpus = 0 if gpus else cfg.pool.threads
    return cpus, gpus


def check_capacity(cfg: Config) -> None:
    cpus, gpus = resources(cfg)
    have = ray.cluster_resources()
    for res, per in (("CPU", cpus), ("GPU", gpus)):
        need = per * cfg.pool.actors
        if need > have.get(res, 0) + 1e-9:
            raise GhostsearchError(
                f"pool of {cfg.pool.actors} scorers needs {need:g} {res} but the cluster has {have.get(res, 0):g}; "
                "lower pool.actors / pool.threads or add nodes"
            )


def start_pool(
    cfg: Config,
    name: str | None = None,
    detached: bool = False,
    wait: bool = True,
    actor_class=ScorerActor,
    load_dtype: str | None = None,
):
    """Create scorer actors (``actor_class``: the real scorer; benchmarks pass a stand-in) and
    their broker. Returns the broker handle. ``load_dtype``: the scorers load the model in this
    dtype instead of resolving ``dtype: auto`` on their machine (a resumed run keeps the dtype its
    values were computed in); the broker's keys still carry the config's dtype."""
    check_capacity(cfg)
    actor_cfg = cfg if load_dtype is None else dataclasses.replace(cfg, dtype=load_dtype)
    cpus, gpus = resources(cfg)
    prefix = name or f"ghostsearch-{uuid.uuid4().hex[:6]}"
    lifetime = "detached" if detached else None
    opts: Any = {}
    pg = None
    if cfg.pool.spread:
        from ray.util.placement_group import placement_group
        from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

        bundle = {"CPU": cpus} if cpus else {}
        if gpus:
            bundle["GPU"] = gpus
        pg = placement_group([bundle] * cfg.pool.actors, strategy="SPREAD", lifetime=lifetime, name=f"{prefix}-pg")
        ray.get(pg.ready(), timeout=600)
        opts = lambda i: {"scheduling_strategy": PlacementGroupSchedulingStrategy(pg, placement_group_bundle_index=i)}  # noqa: E731
    names = [
        f"{prefix}-scorer-{i}" if name else f"ghostsearch-scorer-{i}-{prefix[-6:]}" for i in range(cfg.pool.actors)
    ]
    scorers = []
    for i, n in enumerate(names):
        extra = opts(i) if callable(opts) else {}
        scorers.append(
            actor_class.options(
                name=n, namespace=NAMESPACE, lifetime=lifetime, num_cpus=cpus, num_gpus=gpus, **extra
            ).remote(actor_cfg, cfg.pool.threads, n)
        )
    # the broker lives on this (head/driver) node: it must survive the loss of any worker node
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    here = ray.get_runtime_context().get_node_id()
    broker = Broker.options(  # type: ignore[attr-defined]  # a Ray actor class
        name=f"{prefix}-broker" if name else None,
        namespace=NAMESPACE,
        lifetime=lifetime,
        num_cpus=0,
        max_concurrency=10000,
        scheduling_strategy=NodeAffinitySchedulingStrategy(here, soft=False),
    ).remote(cfg, names, scorers)
    _KEEP.append((broker, scorers, pg))
    if wait:
        ray.get(broker.ready.remote())
    return broker


_KEEP: list = []  # the driver owns local pools: keep handles alive for the driver's lifetime


def release_pool(broker) -> bool:
    """End a pool this driver started (scorers, broker, placement group) so that its CPUs/GPUs
    are free for what comes next (downstream evaluation). False if the pool is not ours (named)."""
    for entry in list(_KEEP):
        if entry[0] == broker:
            b, scorers, pg = entry
            for a in scorers:
                ray.kill(a, no_restart=True)
            ray.kill(b, no_restart=True)
            if pg is not None:
                from ray.util.placement_group import remove_placement_group

                remove_placement_group(pg)
            _KEEP.remove(entry)
            return True
    return False


def pool_identity(broker, cfg: Config, specs: list[ObjectiveSpec]) -> dict:
    """What the pool's values depend on (model content, resolved dtype and device, calibration token
    ids of ``specs``). A job using a named pool whose model or precision differs from its own
    config is refused: its ledger would record the pool's values under its own model's name."""
    try:
        ident = ray.get(broker.identity.remote(list(specs)))
    except ray.exceptions.RayTaskError as e:
        cause: BaseException = e  # the broker's error, or a scorer's it passed on: the innermost one says why
        while getattr(cause, "cause", None) is not None:
            cause = cause.cause  # type: ignore[attr-defined]
        raise GhostsearchError(str(cause).splitlines()[0]) from None
    if cfg.pool.name:
        from ghostsearch.model.models import DTYPES

        want = str(DTYPES[cfg.dtype]).replace("torch.", "") if cfg.dtype != "auto" else ident["dtype"]
        device = cfg.device.split(":")[0] if cfg.device != "auto" else ident["device"]
        for key, mine in (("model", cfg.model), ("dtype", want), ("device", device)):
            if mine != ident[key]:
                raise GhostsearchError(
                    f"pool {cfg.pool.name!r} serves {key} {ident[key]!r} but this job asks for "
                    f"{mine!r}; use a pool started with this config, or set {key}={ident[key]}"
                )
    return ident


def pool_exists(name: str) -> bool:
    try:
        ray.get_actor(f"{name}-broker", namespace=NAMESPACE)
        return True
    except ValueError:
        return False


def find_pool(name: str):
    try:
        return ray.get_actor(f"{name}-broker", namespace=NAMESPACE)
    except ValueError:
        raise GhostsearchError(
            f"no pool named {name!r} on this cluster; start it with `ghostsearch pool up CONFIG pool.name={name}`"
        ) from None


def stop_pool(name: str) -> list[str]:
    broker = find_pool(name)
    names = ray.get(broker.pool_status.remote()).actors
    killed = []
    for n in names:
        try:
            ray.kill(ray.get_actor(n, namespace=NAMESPACE), no_restart=True)
            killed.append(n)
        except ValueError:
            pass
    ray.kill(broker, no_restart=True)
    try:
        from ray.util.placement_group import get_placement_group, remove_placement_group

        remove_placement_group(get_placement_group(f"{name}-pg"))
    except Exception:  # noqa: BLE001  (no placement group)
        pass
    return killed + [f"{name}-broker"]
