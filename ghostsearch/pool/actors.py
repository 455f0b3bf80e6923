"""Ray actors of the scoring pool.

``ScorerActor``: one model replica (one per GPU on a GPU cluster; ``pool.actors`` with
``pool.threads`` torch threads on CPU), its prepared objectives and prefix caches.

``Broker``: the one front door shared by every searcher of a run (and by many runs when the pool
is named and detached). It canonicalises requests, answers from the shared result cache,
de-duplicates in-flight requests, fans the rest out to idle scorers, retries a request whose
scorer or node died (scoring is deterministic, so a retry gives the same value), keeps
per-searcher accounting and exports metrics through ``ray.util.metrics``.
"""
from __future__ import annotations

import asyncio
import math
from collections import defaultdict

import ray

NAMESPACE = "ghostsearch"


@ray.remote(max_restarts=-1, max_task_retries=0)
class ScorerActor:
    def __init__(self, cfg_dict: dict, threads: int, name: str):
        import os

        os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
        import torch

        torch.set_num_threads(threads)  # Ray reuses workers: set it in every actor
        from ghostsearch.cli import _quiet_libraries
        from ghostsearch.config import _build, Config

        _quiet_libraries()
        self.cfg = _build(Config, cfg_dict)
        self.name = name
        self.node = ray.get_runtime_context().get_node_id()
        self.pid = os.getpid()
        if self.cfg.model == "__noop__":  # overhead benchmark: no model at all
            self.scorer = None
            return
        from ghostsearch.scoring import scorer_from_config

        self.scorer = scorer_from_config(self.cfg, threads=threads)

    def info(self) -> dict:
        return {"name": self.name, "node": self.node, "pid": self.pid,
                "n_blocks": self.scorer.stack.n_blocks if self.scorer else 0}

    def _key(self, obj: dict) -> str:
        from objectives import CalibrationSpec

        return self.scorer.prepare(obj["objective"], CalibrationSpec(**obj["spec"]), obj["params"])

    def score(self, obj: dict, removed: tuple, fidelity: float, prefix) -> dict:
        if self.scorer is None:
            return {"value": float(sum(removed)), "tokens": 0, "seconds": 0.0, "actor": self.name, "node": self.node}
        r = self.scorer.score(self._key(obj), tuple(removed), fidelity, tuple(prefix) if prefix else None)
        r.update(actor=self.name, node=self.node)
        return r

    def statistic(self, obj: dict, name: str):
        if self.scorer is None:
            raise ValueError("no-op scorer has no statistics")
        return self.scorer.statistic(self._key(obj), name)


def cache_key(model: str, dtype: str, obj: dict, removed: tuple, fidelity: float) -> str:
    return f"{model}|{dtype}|{obj['key']}|f={fidelity:.6g}|{','.join(map(str, removed))}"


@ray.remote(max_restarts=0)
class Broker:
    """Async actor; every method is a coroutine, so thousands of requests wait cheaply."""

    def __init__(self, cfg_dict: dict, actor_names: list[str], actors: list):
        self.cfg = cfg_dict
        self.names = actor_names
        self.actors = list(actors)  # handles (borrowed references keep non-detached scorers alive)
        self.idle: asyncio.Queue | None = None
        self.cache: dict[str, dict] = {}
        self.inflight: dict[str, asyncio.Future] = {}
        self.stats = defaultdict(lambda: {"requested": 0, "computed": 0, "cached": 0, "best": math.inf})
        self.queue_depth = 0
        self.retries = 0
        from ray.util import metrics

        self.m_evals = metrics.Counter("ghostsearch_evaluations", "evaluations served",
                                       tag_keys=("searcher", "objective", "cached"))
        self.m_seconds = metrics.Histogram("ghostsearch_scoring_seconds", "seconds per computed evaluation",
                                           boundaries=[0.01, 0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60],
                                           tag_keys=("objective",))
        self.m_queue = metrics.Gauge("ghostsearch_queue_depth", "requests waiting for a scorer")
        self.m_best = metrics.Gauge("ghostsearch_best_value", "best full-fidelity value", tag_keys=("searcher",))

    async def _idle(self) -> asyncio.Queue:
        if self.idle is None:
            self.idle = asyncio.Queue()
            for i in range(len(self.actors)):
                self.idle.put_nowait(i)
        return self.idle

    async def ready(self) -> list[dict]:
        return await asyncio.gather(*[a.info.remote() for a in self.actors])

    def seed_cache(self, rows: list[dict]) -> int:
        """Load finished evaluations (a resumed run's ledger) into the shared cache."""
        for r in rows:
            self.cache.setdefault(r["cache_key"], r)
        return len(self.cache)

    async def _compute(self, obj: dict, removed: tuple, fidelity: float, prefix) -> dict:
        idle = await self._idle()
        attempt = 0
        while True:
            self.queue_depth += 1
            self.m_queue.set(self.queue_depth)
            i = await idle.get()
            self.queue_depth -= 1
            self.m_queue.set(self.queue_depth)
            try:
                r = await self.actors[i].score.remote(obj, removed, fidelity, prefix)
                idle.put_nowait(i)
                return r
            except ray.exceptions.RayActorError:
                # the scorer (or its node) died mid-request: Ray restarts it (max_restarts=-1);
                # give the request to the next idle scorer, and the slot back once it answers again
                attempt += 1
                self.retries += 1
                asyncio.get_running_loop().create_task(self._return_when_alive(i))
                if attempt > 20:
                    raise
            except ray.exceptions.RayTaskError:
                idle.put_nowait(i)
                raise

    async def _return_when_alive(self, i: int) -> None:
        while True:
            try:
                await self.actors[i].info.remote()
                break
            except ray.exceptions.RayActorError:
                await asyncio.sleep(1.0)
        self.idle.put_nowait(i)

    async def evaluate(self, obj: dict, removed: list, fidelity: float, prefix, searcher: str) -> dict:
        removed = tuple(sorted({int(i) for i in removed}))
        key = cache_key(self.cfg["model"], self.cfg["dtype"], obj, removed, fidelity)
        st = self.stats[searcher]
        st["requested"] += 1
        cached = True
        if key in self.cache:
            r = self.cache[key]
        elif key in self.inflight:
            r = await asyncio.shield(self.inflight[key])
        else:
            cached = False
            fut = asyncio.get_running_loop().create_future()
            self.inflight[key] = fut
            try:
                r = await self._compute(obj, removed, fidelity, prefix)
                r["cache_key"] = key
                self.cache[key] = r
                fut.set_result(r)
            except BaseException as e:
                fut.set_exception(e)
                fut.exception()  # mark retrieved
                raise
            finally:
                self.inflight.pop(key, None)
            self.m_seconds.observe(r["seconds"], tags={"objective": obj["objective"]})
        st["cached" if cached else "computed"] += 1
        self.m_evals.inc(1, tags={"searcher": searcher, "objective": obj["objective"], "cached": str(cached)})
        if fidelity >= 1.0 and r["value"] < st["best"]:
            st["best"] = r["value"]
            self.m_best.set(r["value"], tags={"searcher": searcher})
        return dict(r, cached=cached)

    async def statistic(self, obj: dict, name: str):
        key = f"stat|{obj['key']}|{name}"
        if key not in self.cache:
            self.cache[key] = await self.actors[0].statistic.remote(obj, name)
        return self.cache[key]

    def status(self) -> dict:
        total = sum(s["requested"] for s in self.stats.values())
        hits = sum(s["cached"] for s in self.stats.values())
        return {"actors": self.names, "queue": self.queue_depth, "inflight": len(self.inflight),
                "cache_size": len(self.cache), "hit_rate": hits / total if total else 0.0,
                "retries": self.retries, "searchers": {k: dict(v) for k, v in self.stats.items()}}
