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
import dataclasses
import sys
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Generic, TypeVar

import ray

from ghostsearch.core.records import Record
from ghostsearch.objectives import ObjectiveSpec
from ghostsearch.pool.keys import CacheKey
from ghostsearch.scoring import RowScore, Score
from ghostsearch.search.base import new_best

NAMESPACE = "ghostsearch"

S = TypeVar("S", Score, RowScore)


@dataclass(frozen=True)
class Served(Generic[S]):
    """A scorer's answer as the pool hands it out: the ``Score`` (or, racing, the ``RowScore``), the
    scorer and node that computed it, and whether this request was answered from the broker's
    shared cache (or an identical request in flight) instead of being computed for it."""

    score: S
    actor: str
    node: str
    cached: bool = False


@dataclass(frozen=True)
class SearcherCounts:
    """One searcher's requests to the broker: how many it made, and how many of those were computed
    for it or answered from the shared cache (or an identical request in flight)."""

    requested: int = 0
    computed: int = 0
    cached: int = 0

    def add(self, requested: int = 0, computed: int = 0, cached: int = 0) -> SearcherCounts:
        return SearcherCounts(self.requested + requested, self.computed + computed, self.cached + cached)


@dataclass(frozen=True)
class CellBest:
    """A cell as the broker saw it: its searcher, objective and k, and the best (lowest)
    full-fidelity value of a k-set served to it, with that set."""

    searcher: str
    objective: str
    k: int | None
    best: float | None = None
    best_removed: list[int] | None = None


@dataclass(frozen=True)
class PoolStatus(Record):
    """The broker's accounting (``Broker.pool_status``; ``to_dict`` is RUN_DIR/pool.json and what
    ``ghostsearch pool status`` prints): its scorers, the requests waiting and in flight, the shared
    cache's size and hit rate, retries and stalls, per searcher its counts, per cell its best."""

    actors: list[str]
    queue: int
    inflight: int
    cache_size: int
    hit_rate: float
    retries: int
    stalls: int
    searchers: dict[str, SearcherCounts]
    cells: dict[str, CellBest]

    def with_best(self, answers: Iterable[tuple[str, float | None, list[int]]]) -> PoolStatus:
        """Each (cell, value, removed) of ``answers`` as its cell's best where it is better than the
        broker's (a resumed cell's answer came from its ledger, not from the broker)."""
        cells = dict(self.cells)
        for cell, value, removed in answers:
            c = cells.get(cell)
            if c is not None and value is not None and (c.best is None or value < c.best):
                cells[cell] = dataclasses.replace(c, best=value, best_removed=list(removed))
        return dataclasses.replace(self, cells=cells)


@ray.remote(max_restarts=-1, max_task_retries=0)
class ScorerActor:
    def __init__(self, cfg, threads: int, name: str):
        import os

        import torch

        from ghostsearch.core.logs import quiet_libraries
        from ghostsearch.scoring import scorer_from_config

        torch.set_num_threads(threads)  # Ray reuses workers: set it in every actor
        quiet_libraries()
        self.cfg, self.name = cfg, name
        self.node = ray.get_runtime_context().get_node_id()
        self.pid = os.getpid()
        self.threads = threads
        self.scorer = scorer_from_config(cfg, threads=threads)
        from ray.util import metrics  # emitted here, so they carry this scorer's node (NodeAddress)

        self.m_scored = metrics.Counter(
            "ghostsearch_scorer_evaluations", "evaluations computed by this scorer", tag_keys=("objective", "actor")
        )
        self.m_busy = metrics.Counter(
            "ghostsearch_scorer_busy_seconds", "seconds this scorer spent scoring", tag_keys=("objective", "actor")
        )

    def _count(self, spec: ObjectiveSpec, r: S) -> Served[S]:
        tags = {"objective": spec.name, "actor": self.name}
        self.m_scored.inc(1, tags=tags)
        self.m_busy.inc(r.seconds, tags=tags)
        return Served(r, actor=self.name, node=self.node)

    def info(self) -> dict:
        return {
            "name": self.name,
            "node": self.node,
            "pid": self.pid,
            "n_blocks": self.scorer.stack.n_blocks,
            "model": self.cfg.model,
            "dtype": str(self.scorer.stack.dtype).replace("torch.", ""),
            "device": self.cfg.resolved_device().split(":")[0],
            "threads": self.threads,
        }

    def model_id(self) -> str:
        from ghostsearch.model.models import model_identity

        return model_identity(self.cfg.model)

    def data_digest(self, spec: ObjectiveSpec) -> str:
        """sha256 of the calibration token ids this scorer computes ``spec`` on."""
        import hashlib

        h = hashlib.sha256()
        for b in self.scorer.calibration(self._key(spec))[0]:
            h.update(str(tuple(b.input_ids.shape)).encode())
            h.update(b.input_ids.cpu().numpy().tobytes())
        return h.hexdigest()

    def _key(self, spec: ObjectiveSpec) -> str:
        from ghostsearch.recovery.aware import prepare

        return prepare(self.scorer, spec)

    def score(self, spec: ObjectiveSpec, removed: tuple, fidelity: float, prefix) -> Served[Score]:
        r = self.scorer.score(self._key(spec), tuple(removed), fidelity, tuple(prefix) if prefix else None)
        return self._count(spec, r)

    def rows(self, spec: ObjectiveSpec, removed: tuple, rows: tuple, prefix) -> Served[RowScore]:
        """Per-row loss sums and counts of calibration rows ``rows`` (racing)."""
        r = self.scorer.score_rows(self._key(spec), tuple(removed), rows, tuple(prefix) if prefix else None)
        return self._count(spec, r)

    def rows_many(self, spec: ObjectiveSpec, items: list, rows: tuple) -> list[Served[RowScore]]:
        """``rows`` for several (removed, prefix) at once: one look of a race (Scorer.score_rows_many)."""
        return [self._count(spec, r) for r in self.scorer.score_rows_many(self._key(spec), items, rows)]

    def statistic(self, spec: ObjectiveSpec, name: str):
        return self.scorer.statistic(self._key(spec), name)

    def with_model(self, fn, *args, **kwargs):
        """fn(model, tokenizer, *args, **kwargs) on this replica's (unpruned) model, e.g. compare's
        finalist evaluation (evaluate.evaluate_finalist_specs): one replica per actor serves search
        and evaluation alike."""
        return fn(self.scorer.stack.model, self.scorer.tokenizer, *args, **kwargs)


STALLED = object()  # _within_limit's answer for a scorer that did not answer in time


@ray.remote(max_restarts=0)
class Broker:
    """Async actor; every method is a coroutine, so thousands of requests wait cheaply."""

    def __init__(self, cfg, actor_names: list[str], actors: list):
        self.cfg = cfg
        self.names = actor_names
        self.actors = list(actors)  # handles (borrowed references keep non-detached scorers alive)
        self.idle: asyncio.Queue | None = None
        self.cache: dict[CacheKey, Served] = {}
        self.inflight: dict[CacheKey, asyncio.Future] = {}
        self.statistics: dict[tuple[str, str], object] = {}  # (objective key, name) -> a dense statistic
        self.stats: dict[str, SearcherCounts] = {}
        self.cells: dict[str, CellBest] = {}
        self.queue_depth = 0
        self.retries = 0
        self.stalls = 0  # requests re-sent because their scorer did not answer within pool.stall_seconds
        from ray.util import metrics

        self.m_evals = metrics.Counter(
            "ghostsearch_evaluations", "evaluations served", tag_keys=("searcher", "objective", "cached")
        )
        self.m_seconds = metrics.Histogram(
            "ghostsearch_scoring_seconds",
            "seconds per computed evaluation",
            boundaries=[0.01, 0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60],
            tag_keys=("objective",),
        )
        self.m_queue = metrics.Gauge("ghostsearch_queue_depth", "requests waiting for a scorer")
        self.m_best = metrics.Gauge(
            "ghostsearch_best_value",
            "best full-fidelity value of a cell's k-sets",
            tag_keys=("cell", "searcher", "objective", "k"),
        )

    async def _idle(self) -> asyncio.Queue:
        if self.idle is None:
            self.idle = asyncio.Queue()
            for i in range(len(self.actors)):
                self.idle.put_nowait(i)
        return self.idle

    async def ready(self) -> list[dict]:
        return await asyncio.gather(*[a.info.remote() for a in self.actors])

    async def _compute(
        self, spec: ObjectiveSpec, removed: tuple | None, fidelity: float, prefix, rows=None, items=None
    ):
        """One scorer call: score, rows, or (``items``: [(removed, prefix)]) rows_many, retried on a dead scorer."""
        idle = await self._idle()
        attempt = 0
        while True:
            self.queue_depth += 1
            self.m_queue.set(self.queue_depth)
            i = await idle.get()
            self.queue_depth -= 1
            self.m_queue.set(self.queue_depth)
            try:
                ref = (
                    self.actors[i].score.remote(spec, removed, fidelity, prefix)
                    if rows is None
                    else self.actors[i].rows.remote(spec, removed, rows, prefix)
                    if items is None
                    else self.actors[i].rows_many.remote(spec, items, rows)
                )
                r = await self._within_limit(i, ref)
                if r is STALLED:  # the request goes to another scorer (the next idle one)
                    attempt += 1
                    continue
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

    async def _within_limit(self, i: int, ref):
        """The scorer's answer, or STALLED when it has not answered within pool.stall_seconds (a
        stopped or hung process: alive to Ray, so no RayActorError ever comes). A stalled scorer
        gets no new request until its late answer arrives (which is dropped: the re-sent request
        answers), then takes work again; said in one line on the driver's stderr (Ray forwards the broker's)."""
        limit = getattr(self.cfg.pool, "stall_seconds", None)
        fut = asyncio.ensure_future(ref)  # type: ignore[arg-type]
        if not limit:
            return await fut
        try:
            return await asyncio.wait_for(asyncio.shield(fut), limit)
        except asyncio.TimeoutError:
            self.stalls += 1
            print(
                f"ghostsearch: scorer {self.names[i]} has not answered for {limit:g} s (pool.stall_seconds): "
                "treated as stalled, its request re-sent to another scorer",
                file=sys.stderr,  # the driver's stderr (Ray forwards it): its stdout is the JSON result
                flush=True,
            )
            asyncio.get_running_loop().create_task(self._return_when_answered(i, fut))
            return STALLED

    async def _return_when_answered(self, i: int, fut) -> None:
        try:
            await fut
        except ray.exceptions.RayActorError:
            await self._return_when_alive(i)
            return
        except Exception:  # noqa: BLE001,S110  (its late answer, whatever it is, is dropped)
            pass
        print(
            f"ghostsearch: scorer {self.names[i]} answers again; it takes requests again", file=sys.stderr, flush=True
        )
        (await self._idle()).put_nowait(i)

    async def _return_when_alive(self, i: int) -> None:
        while True:
            try:
                await self.actors[i].info.remote()
                break
            except ray.exceptions.RayActorError:
                await asyncio.sleep(1.0)
        (await self._idle()).put_nowait(i)

    async def identity(self, specs: list) -> dict:
        """What this pool's values depend on: model (name and content), resolved dtype and device
        (the same on every scorer, or an error), and the calibration token ids of ``specs``."""
        infos = await asyncio.gather(*[a.info.remote() for a in self.actors])
        seen = {(i["dtype"], i["device"]) for i in infos}
        if len(seen) > 1:
            raise ValueError(
                f"the pool's scorers resolve different precisions {sorted(seen)}; set dtype= and "
                "device= explicitly so every scorer computes the same values"
            )
        digests = await asyncio.gather(*[self.actors[0].data_digest.remote(s) for s in specs])
        ident = {
            "model": infos[0]["model"],
            "model_id": await self.actors[0].model_id.remote(),
            "dtype": infos[0]["dtype"],
            "device": infos[0]["device"],
            "calibration": {s.key(): d for s, d in zip(specs, digests)},
        }
        if ident["device"] == "cpu" and ident["dtype"] in ("bfloat16", "float16"):
            # a half-precision value on a CPU moves with the thread count (bench/dtype.py: up to 1.3%)
            ident["cpu_threads"] = infos[0]["threads"]
        return ident

    async def evaluate(
        self,
        spec: ObjectiveSpec,
        removed: list,
        fidelity: float,
        prefix,
        searcher: str,
        cell: str | None = None,
        k: int | None = None,
        rows: tuple | None = None,
    ) -> Served:
        """``rows``: per-row loss sums of those calibration rows instead of a value (racing; no best)."""
        blocks = tuple(sorted({int(i) for i in removed}))
        key = CacheKey.of(self.cfg.model, self.cfg.dtype, spec, blocks, fidelity, rows)
        if rows is not None:
            fidelity = 0.0
        self._tally(searcher, requested=1)
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
                r = await self._compute(spec, blocks, fidelity, prefix, rows)
                self.cache[key] = r
                fut.set_result(r)
            except BaseException as e:
                fut.set_exception(e)
                fut.exception()  # mark retrieved
                raise
            finally:
                self.inflight.pop(key, None)
            self.m_seconds.observe(r.score.seconds, tags={"objective": spec.name})
        self._tally(searcher, computed=int(not cached), cached=int(cached))
        self.m_evals.inc(1, tags={"searcher": searcher, "objective": spec.name, "cached": str(cached)})
        if cell is not None:
            c = self.cells.setdefault(cell, CellBest(searcher, spec.name, k))
            if k is not None and new_best(blocks, fidelity, r.score.value, k, c.best):
                # only sets of the cell's k
                self.cells[cell] = dataclasses.replace(c, best=r.score.value, best_removed=list(blocks))
                self.m_best.set(
                    r.score.value, tags={"cell": cell, "searcher": searcher, "objective": spec.name, "k": str(k)}
                )
        return dataclasses.replace(r, cached=cached)

    async def remember(self, spec: ObjectiveSpec, known: list[tuple]) -> int:
        """Put a resumed run's ledgered values into the shared cache: ``known`` holds (removed,
        fidelity, value, tokens, seconds, actor, node) of values computed earlier on the same model,
        dtype and calibration (the run directory's identity matched this pool's). Another run
        directory on this pool is then answered from them instead of computing them again. A key
        the cache holds keeps its value; nothing is counted as requested. Returns how many were added."""
        added = 0
        for removed, fidelity, value, tokens, seconds, actor, node in known:
            key = CacheKey.of(self.cfg.model, self.cfg.dtype, spec, removed, fidelity)
            if key not in self.cache and key not in self.inflight:
                score = Score(float(value), int(tokens or 0), float(seconds or 0.0), 0)
                self.cache[key] = Served(score, actor or "ledger", node or "")
                added += 1
        return added

    async def rows(self, spec: ObjectiveSpec, items: list, rows: tuple, searcher: str) -> list[Served[RowScore]]:
        """One look of a race in one call: per-row loss sums of ``rows`` for every (removed, prefix) of
        ``items``. Answered from the shared cache and in-flight requests where it can; the rest is
        split into one share per scorer, each scored in one rows_many call (blocks shared by the
        candidates of a share run once)."""
        keys = [CacheKey.of(self.cfg.model, self.cfg.dtype, spec, removed, 0.0, rows) for removed, _ in items]
        todo: list[int] = []
        futs: dict[CacheKey, asyncio.Future] = {}
        loop = asyncio.get_running_loop()
        for j, key in enumerate(keys):
            if key not in self.cache and key not in self.inflight and key not in futs:
                futs[key] = self.inflight[key] = loop.create_future()
                todo.append(j)
        shares = max(1, min(len(self.actors), len(todo)))
        parts = [todo[s::shares] for s in range(shares)] if todo else []

        async def share(part):
            try:
                rs = await self._compute(
                    spec, None, 0.0, None, rows, items=[(tuple(sorted(set(items[j][0]))), items[j][1]) for j in part]
                )
            except BaseException as e:
                for j in part:
                    futs[keys[j]].set_exception(e)
                    futs[keys[j]].exception()  # mark retrieved
                    self.inflight.pop(keys[j], None)
                raise
            for j, r in zip(part, rs):
                self.cache[keys[j]] = r
                futs[keys[j]].set_result(r)
                self.inflight.pop(keys[j], None)
                self.m_seconds.observe(r.score.seconds, tags={"objective": spec.name})

        await asyncio.gather(*[share(part) for part in parts])
        out = []
        for key in keys:
            cached = key not in futs
            r = self.cache[key] if key in self.cache else await asyncio.shield(self.inflight[key])
            futs.pop(key, None)
            self._tally(searcher, requested=1, computed=int(not cached), cached=int(cached))
            self.m_evals.inc(1, tags={"searcher": searcher, "objective": spec.name, "cached": str(cached)})
            out.append(dataclasses.replace(r, cached=cached))
        return out

    async def best_known(self, spec: ObjectiveSpec, k: int, n: int) -> list[tuple[list[int], float]]:
        """The n best (lowest) full-fidelity values of k-sets in the shared cache for ``spec``, best
        first, ties by set: what ``search.params.<s>.warm_start`` starts from."""
        found = []
        for key, r in self.cache.items():
            if (
                (key.model, key.dtype, key.objective) == (self.cfg.model, self.cfg.dtype, spec.key())
                and key.fidelity == 1.0
                and not key.is_block
                and key.removed
                and len(key.removed) == k
            ):
                found.append((float(r.score.value), list(key.removed)))
        return [(removed, v) for v, removed in sorted(found)[:n]]

    async def statistic(self, spec: ObjectiveSpec, name: str):
        key = (spec.key(), name)
        if key not in self.statistics:
            self.statistics[key] = await self.actors[0].statistic.remote(spec, name)
        return self.statistics[key]

    async def with_model(self, fn, *args, **kwargs):
        """fn(model, tokenizer, *args, **kwargs) on the next idle scorer (ScorerActor.with_model), in
        the same queue as scoring: e.g. compare's finalists, one share per actor. No retry."""
        idle = await self._idle()
        i = await idle.get()
        try:
            return await self.actors[i].with_model.remote(fn, *args, **kwargs)
        finally:
            idle.put_nowait(i)

    def _tally(self, searcher: str, requested: int = 0, computed: int = 0, cached: int = 0) -> None:
        self.stats[searcher] = self.stats.get(searcher, SearcherCounts()).add(requested, computed, cached)

    def pool_status(self) -> PoolStatus:
        total = sum(s.requested for s in self.stats.values())
        hits = sum(s.cached for s in self.stats.values())
        return PoolStatus(
            actors=list(self.names),
            queue=self.queue_depth,
            inflight=len(self.inflight),
            cache_size=len(self.cache) + len(self.statistics),
            hit_rate=hits / total if total else 0.0,
            retries=self.retries,
            stalls=self.stalls,
            searchers=dict(self.stats),
            cells=dict(self.cells),
        )
