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
import gc
import math
import sys
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Generic, TypeVar

import ray

from ghostsearch.core.records import Record
from ghostsearch.objectives import ObjectiveSpec
from ghostsearch.objectives.scores import RowScore, Score
from ghostsearch.pool.keys import CacheKey
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


def answers(actor: str, node: str, scores: list) -> tuple:
    """A scorer call's answers as they cross Ray: (kind, actor, node, each score's fields as a tuple), kind
    's' (``Score``) or 'r' (``RowScore``). Plain tuples pickle about 15x faster than the dataclasses (Ray's
    cloudpickle pays a Python call per object: ~10 us a ``Served`` here, ~0.7 us its tuple), and the scorer's
    name and node go once a call. ``served`` reads it back."""
    if scores and isinstance(scores[0], RowScore):
        return "r", actor, node, [(s.sums, s.counts, s.tokens, s.seconds, s.start) for s in scores]
    return "s", actor, node, [(s.value, s.tokens, s.seconds, s.start) for s in scores]


def served(got) -> list[Served]:
    """``answers`` as the ``Served`` it was made of; a list of ``Served`` (a scorer that answers the
    plain way) as it is."""
    if isinstance(got, list):
        return got
    kind, actor, node, rows = got
    cls = RowScore if kind == "r" else Score
    return [Served(cls(*r), actor, node) for r in rows]


def settle() -> None:
    """Move every object this process holds now out of the cyclic collector's reach (``gc.freeze``): a
    pool process's long-lived objects (modules, a model, the broker's cache) are otherwise traversed by
    every full collection, which cost ~10% of the broker's CPU per evaluation (bench/scale.py). Objects
    still die by reference counting; only a cycle among frozen objects is never collected."""
    gc.freeze()


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
        from ghostsearch.model.models import model_files_state

        self.model_state = model_files_state(cfg.model)  # the files as this scorer reads them (model_id)
        self.scorer = scorer_from_config(cfg, threads=threads)
        from ray.util import metrics  # emitted here, so they carry this scorer's node (NodeAddress)

        self.m_scored = metrics.Counter(
            "ghostsearch_scorer_evaluations", "evaluations computed by this scorer", tag_keys=("objective", "actor")
        )
        self.m_busy = metrics.Counter(
            "ghostsearch_scorer_busy_seconds", "seconds this scorer spent scoring", tag_keys=("objective", "actor")
        )
        settle()  # the model and the libraries: alive for the actor's life

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
        """The content identity of the model this scorer serves. Digested when asked (the digest is
        remembered per file), so the files must still be the ones it loaded: a model directory
        rewritten under a running pool (a named one outlives jobs) would otherwise report the new
        weights' identity while the old ones score, and a job's ledger would record their values
        under the new content."""
        from ghostsearch.model.models import model_identity

        self.check_files()
        return model_identity(self.cfg.model)

    def check_files(self) -> None:
        """The model files are still those this scorer loaded (a stat each: name, size, mtime). Every scorer
        is asked (Broker.identity), not one: a scorer Ray restarted after the files changed holds the new
        weights beside the others' old ones, and only the others can tell."""
        from ghostsearch.model.models import model_files_state

        if model_files_state(self.cfg.model) != self.model_state:
            raise ValueError(
                f"the model files of {self.cfg.model} changed after this pool loaded them (size or modification "
                "time): its scorers still hold the old weights; restart the pool (`ghostsearch pool down`, "
                "then `pool up`) to serve the new ones"
            )

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

    def _counted(self, spec: ObjectiveSpec, rs: list) -> tuple:
        """Several answers of one call, counted in one step each metric, as they cross Ray (``answers``)."""
        tags = {"objective": spec.name, "actor": self.name}
        self.m_scored.inc(len(rs), tags=tags)
        self.m_busy.inc(sum(r.seconds for r in rs), tags=tags)
        return answers(self.name, self.node, rs)

    def score_many(self, spec: ObjectiveSpec, items: list) -> tuple:
        """``score`` of several (removed, fidelity, prefix), one after another, in one call: a chunk
        of a batch the broker hands one scorer (Broker.evaluate_many); ``answers`` of them."""
        key = self._key(spec)
        rs = [self.scorer.score(key, tuple(r), f, tuple(p) if p else None) for r, f, p in items]
        return self._counted(spec, rs)

    def rows_many(self, spec: ObjectiveSpec, items: list, rows: tuple) -> tuple:
        """``rows`` for several (removed, prefix) at once: one look of a race (Scorer.score_rows_many);
        ``answers`` of them."""
        return self._counted(spec, self.scorer.score_rows_many(self._key(spec), items, rows))

    def statistic(self, spec: ObjectiveSpec, name: str):
        return self.scorer.statistic(self._key(spec), name)

    def with_model(self, fn, *args, **kwargs):
        """fn(model, tokenizer, *args, **kwargs) on this replica's (unpruned) model, e.g. compare's
        finalist evaluation (evaluate.evaluate_finalist_specs): one replica per actor serves search
        and evaluation alike."""
        return fn(self.scorer.stack.model, self.scorer.tokenizer, *args, **kwargs)


def shares(todo: list[int], n_rows: int, scorers: int) -> list[tuple[list[int], tuple[int, int, int]]]:
    """How one look (candidates ``todo`` x ``n_rows`` rows) is divided among ``scorers``: (candidates,
    (slot, first row, end row)) per share: h row parts x g candidate groups, as many shares as the
    scorers allow (h x g <= scorers, h <= rows, g <= candidates), and of those the most row parts:
    every candidate of a share runs the blocks they share once on its rows, so a split by rows
    computes a shared prefix (greedy's accepted set) once per row, a split by candidates once per group."""
    if not todo:
        return []
    h, g = max(
        ((h, max(1, min(len(todo), scorers // h))) for h in range(1, max(1, min(scorers, n_rows)) + 1)),
        key=lambda hg: (hg[0] * hg[1], hg[0]),
    )
    bounds = [round(i * n_rows / h) for i in range(h + 1)]
    return [(todo[c::g], (p, bounds[p], bounds[p + 1])) for c in range(g) for p in range(h)]


def joined(parts: list[Served[RowScore]]) -> Served[RowScore]:
    """One candidate's answers for consecutive parts of a look's rows, as one answer for them all: sums
    and counts in row order, tokens and scorer seconds added up, the first part's scorer and node."""
    if len(parts) == 1:
        return parts[0]
    first = parts[0]
    score = RowScore(
        sums=[s for p in parts for s in p.score.sums],
        counts=[c for p in parts for c in p.score.counts],
        tokens=sum(p.score.tokens for p in parts),
        seconds=sum(p.score.seconds for p in parts),
        start=min(p.score.start for p in parts),
    )
    return Served(score, actor=first.actor, node=first.node)


STALLED = object()  # _within_limit's answer for a scorer that did not answer in time
CHUNK_MIN_S = 0.05  # a chunk of a batch (one scorer call): at least this much scoring, its call's cost amortized
CHUNK_MAX_S = 1.0  # and at most this much, so that values reach the ledger as they come
SETTLE_EVERY = 4096  # the broker settles (gc.freeze) its cache each time it has grown by this many answers


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
        self.mean_s: float | None = None  # seconds a computed candidate takes (running mean): sizes chunks
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
        self.settled = 0  # the cache's size at the last settle()

    async def _idle(self) -> asyncio.Queue:
        if self.idle is None:
            self.idle = asyncio.Queue()
            for i in range(len(self.actors)):
                self.idle.put_nowait(i)
        return self.idle

    async def ready(self) -> list[dict]:
        return await asyncio.gather(*[a.info.remote() for a in self.actors])

    async def _compute(
        self, spec: ObjectiveSpec, removed: tuple | None, fidelity: float, prefix, rows=None, items=None, many=None
    ):
        """One scorer call: score, rows, (``items``: [(removed, prefix)]) rows_many or (``many``:
        [(removed, fidelity, prefix)]) score_many, retried on a dead scorer."""
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
                    self.actors[i].score_many.remote(spec, many)
                    if many is not None
                    else self.actors[i].score.remote(spec, removed, fidelity, prefix)
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
                return served(r) if many is not None or items is not None else r
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
        await asyncio.gather(*[a.check_files.remote() for a in self.actors[1:]])  # scorer 0's: in model_id
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
                if rows is None:
                    self._timed([r])
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
        self._cell_best(spec, searcher, cell, k, blocks, fidelity, r)
        return dataclasses.replace(r, cached=cached)

    def _chunks(self, n: int, first: bool = False) -> list[int]:
        """The sizes of the chunks ``n`` candidates go out in, one scorer call each: guided (what is left
        over the scorers, largest first, so that the last, small ones even out the scorers' ends; over twice
        the scorers made ~50% more calls: 272-301 against 174-187 at 32 gpu-like stand-ins, bench/scale.py),
        each CHUNK_MIN_S..CHUNK_MAX_S of scoring at the measured seconds per candidate; one candidate a
        chunk while none has been timed."""
        if self.mean_s is None:
            return [1] * n
        lo = max(1, int(CHUNK_MIN_S / max(self.mean_s, 1e-9)))
        hi = max(lo, int(CHUNK_MAX_S / max(self.mean_s, 1e-9)))
        out: list[int] = []
        left = n
        while left > 0 and not (first and out):
            out.append(min(left, max(lo, min(hi, math.ceil(left / len(self.actors))))))
            left -= out[-1]
        return out

    def _first_chunk(self, left: int) -> int:
        """The size of the next chunk ``evaluate_many`` sends while it still reads its batch (``left``: the
        requests not read yet, an upper bound on those still to compute), as ``_chunks`` would size it, or 0
        (none before the whole batch is read: no candidate timed yet, or what is left is one scorer's worth).
        Sending the first chunks as their keys are registered, not after the whole batch is read, starts the
        scorers ~0.1-0.2 s sooner in a 12,000-candidate batch (bench/scale.py at 32 gpu-like stand-ins)."""
        if self.mean_s is None or left <= 0:
            return 0
        first = self._chunks(left, first=True)[0]
        return first if first < left else 0

    def _timed(self, rs: list[Served]) -> None:
        """Fold a call's computed answers into the running seconds per candidate."""
        if rs:
            m = sum(r.score.seconds for r in rs) / len(rs)
            self.mean_s = m if self.mean_s is None else 0.8 * self.mean_s + 0.2 * m

    def _served(self, spec: ObjectiveSpec, pairs: list, cached: bool, searcher: str) -> list[tuple]:
        """``evaluate_many``'s answers to ``pairs`` ((request index, Served)) as they cross Ray: (request index,
        value, tokens, seconds, actor, node, cached), plain tuples (see ``answers``); counted for ``searcher``."""
        self._tally(searcher, computed=0 if cached else len(pairs), cached=len(pairs) if cached else 0)
        if pairs:
            self.m_evals.inc(len(pairs), tags={"searcher": searcher, "objective": spec.name, "cached": str(cached)})
        if not cached:
            for _, r in pairs:
                self.m_seconds.observe(r.score.seconds, tags={"objective": spec.name})
        return [(j, r.score.value, r.score.tokens, r.score.seconds, r.actor, r.node, cached) for j, r in pairs]

    def _settle(self) -> None:
        """``settle`` once the cache has grown by SETTLE_EVERY answers since the last time."""
        if len(self.cache) - self.settled >= SETTLE_EVERY:
            settle()
            self.settled = len(self.cache)

    @ray.method(num_returns="streaming")  # type: ignore[misc]  # Ray's decorator
    async def evaluate_many(
        self, spec: ObjectiveSpec, requests: list, searcher: str, cell: str | None = None, k: int | None = None
    ):
        """``evaluate`` of many requests ((removed, fidelity, prefix)) in one broker call, answered as
        they finish: a streaming generator, each item a list of answers (``_served``). Each request
        is answered from the shared cache or an identical request in flight where it can; the rest go
        out in chunks (``_chunks``), one scorer call each (``ScorerActor.score_many``), retried as
        ``_compute`` retries. One broker call for a whole batch, one scorer call per chunk: the broker's
        own time per evaluation falls with the chunk (bench/scale.py)."""
        skey, loop = spec.key(), asyncio.get_running_loop()
        cached: list[tuple[int, Served]] = []
        waits: dict[asyncio.Future, list[int]] = {}  # in flight for another request (or earlier in this one)
        todo: list[tuple[int, CacheKey, tuple, float, object]] = []
        sets: list[tuple[int, ...]] = []
        fidelities: list[float] = []
        tasks: list[asyncio.Future] = []
        size = self._first_chunk(len(requests))
        try:
            for j, (removed, fidelity, prefix) in enumerate(requests):
                blocks = tuple(sorted({int(i) for i in removed}))
                key = CacheKey(self.cfg.model, self.cfg.dtype, skey, blocks, fidelity)
                sets.append(blocks)
                fidelities.append(fidelity)
                if key in self.cache:
                    cached.append((j, self.cache[key]))
                elif key in self.inflight:
                    waits.setdefault(self.inflight[key], []).append(j)
                else:
                    self.inflight[key] = loop.create_future()
                    todo.append((j, key, blocks, fidelity, prefix))
                    if size and len(todo) >= size:  # a chunk goes out while the rest of the batch is read
                        tasks.append(asyncio.ensure_future(self._chunk(spec, todo)))
                        todo = []
                        size = self._first_chunk(len(requests) - j - 1)
                        await asyncio.sleep(0)  # its scorer call is made now (the task runs to its first wait)
        except BaseException:  # cancelled while reading: what is registered in flight is still computed
            if todo:
                asyncio.ensure_future(self._chunk(spec, todo))
            raise
        self._tally(searcher, requested=len(requests))

        def answered(pairs, hit: bool) -> list[tuple]:
            for j, r in pairs:
                self._cell_best(spec, searcher, cell, k, sets[j], fidelities[j], r)
            return self._served(spec, pairs, hit, searcher)

        if cached:
            yield answered(cached, True)
        at = 0
        for size in self._chunks(len(todo)):
            tasks.append(asyncio.ensure_future(self._chunk(spec, todo[at : at + size])))
            at += size

        async def waited(fut, js):
            r = await asyncio.shield(fut)
            return [(j, r) for j in js], True

        tasks += [asyncio.ensure_future(waited(f, js)) for f, js in waits.items()]
        for done in asyncio.as_completed(tasks):
            pairs, hit = await done
            yield answered(pairs, hit)
        self._settle()

    async def _chunk(self, spec: ObjectiveSpec, part: list) -> tuple[list[tuple[int, Served]], bool]:
        """One chunk of ``evaluate_many``: scored in one scorer call, put into the shared cache."""
        try:
            rs = await self._compute(spec, None, 0.0, None, many=[(b, f, p) for _, _, b, f, p in part])
        except BaseException as e:
            for _, key, *_ in part:
                fut = self.inflight.pop(key)
                fut.set_exception(e)
                fut.exception()  # mark retrieved
            raise
        for (_, key, *_), r in zip(part, rs):
            self.cache[key] = r
            self.inflight.pop(key).set_result(r)
        self._timed(rs)
        return [(j, r) for (j, *_), r in zip(part, rs)], False

    def _cell_best(
        self, spec: ObjectiveSpec, searcher: str, cell: str | None, k: int | None, blocks, fidelity, r: Served
    ) -> None:
        """``blocks``' value (``r``, a value's answer where ``cell`` is given) as its cell's best where it is
        a better full-fidelity k-set."""
        if cell is None:
            return
        value = r.score.value
        c = self.cells.setdefault(cell, CellBest(searcher, spec.name, k))
        if k is not None and new_best(blocks, fidelity, value, k, c.best):  # only sets of the cell's k
            self.cells[cell] = dataclasses.replace(c, best=value, best_removed=list(blocks))
            self.m_best.set(value, tags={"cell": cell, "searcher": searcher, "objective": spec.name, "k": str(k)})

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
        divided among the scorers so that none waits while work remains (``shares``): the look's rows
        split across them, and its candidates too where there are fewer rows than scorers. Each share
        is one rows_many call (a share's candidates run the blocks they share once, on its rows); a
        candidate's parts are joined in the order of ``rows``."""
        keys = [CacheKey.of(self.cfg.model, self.cfg.dtype, spec, removed, 0.0, rows) for removed, _ in items]
        todo: list[int] = []
        futs: dict[CacheKey, asyncio.Future] = {}
        loop = asyncio.get_running_loop()
        for j, key in enumerate(keys):
            if key not in self.cache and key not in self.inflight and key not in futs:
                futs[key] = self.inflight[key] = loop.create_future()
                todo.append(j)
        parts: dict[int, list] = {j: [] for j in todo}  # candidate -> its answers, one per row part

        async def share(group: list[int], lo: int, hi: int, slot: int):
            got = await self._compute(
                spec,
                None,
                0.0,
                None,
                tuple(rows[lo:hi]),
                items=[(tuple(sorted(set(items[j][0]))), items[j][1]) for j in group],
            )
            for j, r in zip(group, got):
                parts[j].append((slot, r))

        try:
            await asyncio.gather(
                *[share(g, lo, hi, slot) for g, (slot, lo, hi) in shares(todo, len(rows), len(self.actors))]
            )
        except BaseException as e:
            for j in todo:
                futs[keys[j]].set_exception(e)
                futs[keys[j]].exception()  # mark retrieved
                self.inflight.pop(keys[j], None)
            raise
        for j in todo:
            r = joined([r for _, r in sorted(parts[j], key=lambda x: x[0])])
            self.cache[keys[j]] = r
            futs[keys[j]].set_result(r)
            self.inflight.pop(keys[j], None)
            self.m_seconds.observe(r.score.seconds, tags={"objective": spec.name})
        out = []
        for key in keys:
            cached = key not in futs
            r = self.cache[key] if key in self.cache else await asyncio.shield(self.inflight[key])
            futs.pop(key, None)
            out.append(r if r.cached == cached else dataclasses.replace(r, cached=cached))
        hits = sum(r.cached for r in out)
        self._tally(searcher, requested=len(out), computed=len(out) - hits, cached=hits)
        for n, hit in ((len(out) - hits, False), (hits, True)):
            if n:
                self.m_evals.inc(n, tags={"searcher": searcher, "objective": spec.name, "cached": str(hit)})
        return out

    async def look(self, spec: ObjectiveSpec, items: list, rows: tuple, searcher: str) -> list[tuple]:
        """``rows`` as the client reads it: per item (loss sums, tokens, seconds, actor, node, cached), plain
        tuples (see ``answers``)."""
        got = await self.rows(spec, items, rows, searcher)
        out = [(r.score.sums, r.score.tokens, r.score.seconds, r.actor, r.node, r.cached) for r in got]
        self._settle()
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
