"""Exact, prefix-cached scoring of a model with blocks removed.

A ``Scorer`` holds one ``Stack`` and, per prepared objective, the calibration micro-batches, the
captured block arguments, the dense hidden states entering each block (every ``cache_every``-th
boundary, bounded memory) and an LRU of *prefix runs*: the states of a model with an accepted
set R removed. A candidate C starts from the deepest cached state it shares with any run:
a run R's state entering block b is valid for C iff C and R agree on blocks [0, b). So the
dense model serves every candidate up to its first removed block, and R's run serves R ∪ {j}
(greedy, beam) up to j. Only the blocks a candidate must run are run.
"""

from __future__ import annotations

import math
import time
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Callable, Protocol

import numpy as np
import torch

from ghostsearch.core.errors import GhostsearchError
from ghostsearch.model.stack import Batch, Captured, Stack, check_removed, run_start
from ghostsearch.objectives import Objective, ObjectiveSpec
from ghostsearch.objectives.scores import RowScore, Score
from ghostsearch.search.base import Removed

if TYPE_CHECKING:  # only for the settings' type: loading and the memory plan are imported where they run
    from ghostsearch.model.memplan import MemorySettings
    from ghostsearch.model.models import ModelSettings

    class ScorerSettings(MemorySettings, ModelSettings, Protocol):
        """What ``scorer_from_config`` reads of a run's settings (``config.Config`` is one): the
        memory plan's and the loader's (``cache.prefix_runs`` and ``cache.offload`` are the plan's)."""


Patches = dict[int, Callable[[torch.Tensor], torch.Tensor]]


class PatchProvider(Protocol):
    """Recovery-aware scoring, plugged into ``Scorer.prepare``: values become those of the model
    after a repair of every cut. ``prepare`` sees the dense states entering every block once;
    ``patches`` gives the repair of one removed set as ``{boundary: fn(h) -> h}`` (see Stack.run).
    The implementation lives in ghostsearch.recovery.aware; scoring knows only this protocol."""

    def prepare(self, stack: Stack, batches: list[Batch], states: list[list[torch.Tensor]]) -> None: ...

    def patches(self, removed: Removed) -> Patches: ...


@dataclass
class Prepared:
    objective: Objective
    batches: list[Batch]
    caps: list[Captured]
    dense: list[dict[int, torch.Tensor]]  # per micro-batch: boundary -> state (kept boundaries)
    runs: OrderedDict = field(default_factory=OrderedDict)  # R -> (start, per-mb dict boundary -> state)
    stats: dict = field(default_factory=dict)
    aware: PatchProvider | None = None  # recovery-aware: values are after this repair

    @property
    def n_rows(self) -> int:
        return sum(b.rows for b in self.batches)


def first_difference(a: Removed, b: Removed, L: int) -> int:
    diff = set(a) ^ set(b)
    return min(diff) if diff else L


def look_prefixes(items, L: int, start_of: Callable[[Removed], int]) -> dict[Removed, set[int]]:
    """The prefixes a look runs on its own rows, and the boundaries where each is kept: per (removed,
    start boundary, prefix) of ``items``, the boundary where the candidate leaves its prefix
    (``first_difference``) when that is deeper than the candidate's own start and than the prefix's
    (``start_of``); a prefix no candidate gains from is not run."""
    out: dict[Removed, set[int]] = {}
    for removed, b, pre in items:
        if pre:
            d = first_difference(removed, pre, L)
            if d > b and d > start_of(pre):
                out.setdefault(pre, set()).add(d)
    return out


class Scorer:
    def __init__(
        self, stack: Stack, tokenizer, *, cache_every: int = 1, max_prefix_runs: int = 8, offload: bool = False
    ):
        if cache_every < 1:
            raise GhostsearchError(f"cache.every={cache_every}; use 1 (every boundary) or more")
        self.stack, self.tokenizer = stack, tokenizer
        self.cache_every, self.max_prefix_runs, self.offload = cache_every, max_prefix_runs, offload
        self.prepared: dict[str, Prepared] = {}

    # ------------------------------------------------------------ preparation
    @torch.no_grad()
    def prepare(self, spec: ObjectiveSpec, aware: PatchProvider | None = None) -> str:
        """Build ``spec``'s calibration batches and dense caches once; returns its key.
        ``aware`` (required when ``spec.aware`` is set): the recovery-aware patch provider."""
        key = spec.key()
        if key in self.prepared:
            return key
        if (aware is None) != (spec.aware is None):
            raise GhostsearchError(f"objective {spec.name}: recovery-aware setting and patch provider disagree")
        obj = spec.build()
        batches = obj.build(self.tokenizer, self.stack.dtype)
        L = self.stack.n_blocks
        keep = {i for i in range(L + 1) if i % self.cache_every == 0} | {L}
        # one micro-batch's full state list at a time (cache.every bounds the cache from here on;
        # recovery-aware preparation still reads every state of every micro-batch)
        caps, dense, full, acc = [], [], [], StatisticsSums()
        for b in batches:
            cap = self.stack.capture(b)
            obj.attach(self.stack, [b], [cap])
            acc.add(cap, b)
            if aware is not None:
                full.append(list(cap.states))
            dense.append({i: self._store(cap.states[i]) for i in keep})
            cap.states = []  # the captured arguments stay; the full state list is dropped
            caps.append(cap)
        if aware is not None:
            aware.prepare(self.stack, batches, full)
        del full
        self.prepared[key] = Prepared(obj, batches, caps, dense, stats=acc.result(), aware=aware)
        return key

    def calibration(self, key: str) -> tuple[list[Batch], list[Captured]]:
        """The calibration micro-batches of a prepared key and their captured block arguments
        (what a repair fits on, and what identifies the data), without reaching into ``prepared``."""
        p = self.prepared[key]
        return p.batches, p.caps

    def dense_states(self, key: str) -> list[list[torch.Tensor]] | None:
        """Per micro-batch, the dense states entering every block 0..L (None unless every
        boundary is cached, i.e. cache.every=1)."""
        p = self.prepared[key]
        L = self.stack.n_blocks
        if not all(i in p.dense[0] for i in range(L + 1)):
            return None
        return [[self._load(d[i], i) for i in range(L + 1)] for d in p.dense]

    def _store(self, x: torch.Tensor) -> torch.Tensor:
        return x.to("cpu", non_blocking=True) if self.offload else x

    def _load(self, x: torch.Tensor, b: int) -> torch.Tensor:
        return x.to(self.stack.device_of(b), non_blocking=True)  # boundary b's device (placement)

    # ------------------------------------------------------------ starts
    def _start(self, p: Prepared, removed: Removed) -> tuple[int, Removed | None]:
        """The deepest boundary b with a cached state valid for ``removed``; and whose (None = dense)."""
        L = self.stack.n_blocks
        first = run_start(removed, None, L)
        best_b = max(b for b in p.dense[0] if b <= first)
        best_src = None
        for R, (start, states) in p.runs.items():
            d = first_difference(removed, R, L)
            b = max((x for x in states[0] if start <= x <= d), default=-1)
            if b > best_b:
                best_b, best_src = b, R
        return best_b, best_src

    def _cached(self, p: Prepared, src: Removed | None, b: int, mb: int) -> torch.Tensor:
        if src is None:
            return self._load(p.dense[mb][b], b)
        p.runs.move_to_end(src)
        return self._load(p.runs[src][1][mb][b], b)

    @torch.no_grad()
    def ensure_run(self, key: str, R: Removed) -> None:
        """Cache the states of the model with R removed, from R's first removed block on."""
        p = self.prepared[key]
        if R in p.runs or not R:
            return
        b, src = self._start(p, R)
        states = []
        for mb, (_batch, cap) in enumerate(zip(p.batches, p.caps)):
            rec: dict[int, torch.Tensor] = {}
            self.stack.run(self._cached(p, src, b, mb), cap, b, R, record=rec)
            states.append({i: self._store(v) for i, v in rec.items()})
        p.runs[R] = (b, states)
        while len(p.runs) > self.max_prefix_runs:
            p.runs.popitem(last=False)

    # ------------------------------------------------------------ scoring
    @torch.no_grad()
    def score(
        self,
        key: str,
        removed: Removed,
        fidelity: float = 1.0,
        prefix: Removed | None = None,
        patches: dict | None = None,
    ) -> Score:
        """``patches``: {boundary b: fn(h) -> h} (recovery operators, see Stack.run); a patch at b may
        read what block b-1 computed, so the run starts at or before b-1."""
        t0 = time.perf_counter()
        p = self.prepared[key]
        removed, patches, b, src = self._begin(key, removed, prefix, patches)
        rows_left = max(1, math.ceil(fidelity * p.n_rows - 1e-9))
        total = count = 0.0
        tokens = 0
        for mb, (batch, cap) in enumerate(zip(p.batches, p.caps)):
            if rows_left <= 0:
                break
            r = min(rows_left, batch.rows)
            h = self._cached(p, src, b, mb)[:r]
            c = Stack.slice(cap, slice(0, r), batch.rows)
            h = self.stack.run(h, c, b, removed, patches=patches)
            s, n = p.objective.loss(self.stack, h, batch, r)
            total, count = total + s, count + n
            tokens += int(batch.weight[:r].sum()) if batch.weight is not None else r * batch.input_ids.shape[1]
            rows_left -= r
        value = p.objective.value(total, count)
        if not math.isfinite(value):
            raise GhostsearchError(f"removing {removed} gives a non-finite loss ({value}); check the model dtype")
        return Score(value=value, tokens=tokens, seconds=time.perf_counter() - t0, start=b)

    def _begin(self, key: str, removed: Removed, prefix: Removed | None, patches: dict | None):
        """Validate ``removed``; its patches (recovery-aware); the boundary b to start from and whose
        cached state (None = dense)."""
        p = self.prepared[key]
        L = self.stack.n_blocks
        removed = check_removed(set(removed), L, what="the scored set")
        if patches is None and p.aware is not None and removed:
            patches = p.aware.patches(removed)
        if patches:  # repaired states differ after the first cut: only the dense prefix is valid
            first = run_start(removed, patches, L)
            return removed, patches, max(x for x in p.dense[0] if x <= first), None
        if prefix:
            self.ensure_run(key, tuple(sorted(prefix)))
        return removed, patches, *self._start(p, removed)

    @torch.no_grad()
    def score_rows(self, key: str, removed: Removed, rows, prefix: Removed | None = None) -> RowScore:
        """Per-row loss sums and counts of the calibration rows ``rows`` (global indices: micro-batch
        after micro-batch), in the order given, for racing. Only those rows run."""
        t0 = time.perf_counter()
        p = self.prepared[key]
        removed, patches, b, src = self._begin(key, removed, prefix, None)
        out: dict[int, tuple[float, float]] = {}
        wanted, tokens, offset = sorted({int(r) for r in rows}), 0, 0
        for mb, (batch, cap) in enumerate(zip(p.batches, p.caps)):
            local = [r - offset for r in wanted if offset <= r < offset + batch.rows]
            if local:
                idx = torch.tensor(local)
                whole = local == list(range(batch.rows))
                h = self._cached(p, src, b, mb)
                h = self.stack.run(
                    h if whole else h[idx.to(h.device)],
                    Stack.slice(cap, slice(0, batch.rows) if whole else idx, batch.rows),
                    b,
                    removed,
                    patches=patches,
                )
                sums, counts = p.objective.row_losses(self.stack, h, batch, idx)
                out.update({offset + r: (float(s), float(n)) for r, s, n in zip(local, sums, counts)})
                tokens += (
                    int(batch.weight[idx].sum()) if batch.weight is not None else len(local) * batch.input_ids.shape[1]
                )
            offset += batch.rows
        if not all(math.isfinite(s) for s, _ in out.values()):
            raise GhostsearchError(f"removing {removed} gives a non-finite loss; check the model dtype")
        return RowScore(
            sums=[out[int(r)][0] for r in rows],
            counts=[out[int(r)][1] for r in rows],
            tokens=tokens,
            seconds=time.perf_counter() - t0,
            start=b,
        )

    @torch.no_grad()
    def score_rows_many(self, key: str, items, rows) -> list[RowScore]:
        """``score_rows`` of several candidates on the same rows (one look of a race): [(removed,
        prefix)] -> one RowScore each. Per micro-batch, a block every candidate runs is run once
        for all of them (their states stacked, at most a micro-batch's rows or the look's rows of
        it at a time, so no more memory than exact scoring), and the head once for them where the
        objective allows it (``Objective.row_losses_many``: a look holds 1-2 rows of a micro-batch, and
        a head of so few rows costs ~25% more a row); rows are independent, so each value is that
        candidate's own. A prefix the scorer holds no run of
        (greedy's accepted set) is run on the look's rows only, once for the candidates that name
        it, up to where each leaves it (``look_prefixes``): a look pays for its own rows of it, not
        for every calibration row as ``ensure_run`` would, so a race split across scorers by rows
        computes its prefix once per row. Recovery-aware scoring (patches) goes one candidate at a time."""
        t0 = time.perf_counter()
        p = self.prepared[key]
        L, wanted = self.stack.n_blocks, sorted({int(r) for r in rows})
        if p.aware is not None and any(r for r, _ in items):
            return [self.score_rows(key, r, rows, tuple(pre) if pre else None) for r, pre in items]
        begun = []  # (removed, start boundary, its cached source, prefix the look runs or None)
        for r, pre in items:
            removed = check_removed(set(r), L, what="the scored set")
            b, src = self._start(p, removed)
            pre = tuple(sorted(pre)) if pre else None
            begun.append((removed, b, src, pre if pre and pre not in p.runs else None))
        prefixes = look_prefixes([(removed, b, pre) for removed, b, _, pre in begun], L, lambda P: self._start(p, P)[0])
        starts = [  # where each starts: where it leaves the look's prefix run, where that is deeper
            first_difference(removed, pre, L)
            if pre and first_difference(removed, pre, L) in prefixes.get(pre, ())
            else b
            for removed, b, _, pre in begun
        ]
        outs: list[dict[int, tuple[float, float]]] = [{} for _ in items]
        tokens, offset = 0, 0
        for mb, (batch, cap) in enumerate(zip(p.batches, p.caps)):
            local = [r - offset for r in wanted if offset <= r < offset + batch.rows]
            offset += batch.rows
            if not local:
                continue
            idx, n = torch.tensor(local), len(local)
            sliced = Stack.slice(cap, idx, batch.rows)
            runs = self._look_runs(p, prefixes, mb, idx, sliced)
            group = max(1, max(n, batch.rows) // n)  # candidates per forward
            tokens += len(items) * (
                int(batch.weight[idx].sum()) if batch.weight is not None else n * batch.input_ids.shape[1]
            )
            for g in range(0, len(items), group):
                part = list(range(g, min(g + group, len(items))))
                caps = {}
                h = {c: self._look_state(p, begun[c], starts[c], runs, mb, idx) for c in part}
                for i in range(min(starts[c] for c in part), L):
                    active = [c for c in part if starts[c] <= i and i not in begun[c][0]]
                    if not active:
                        continue
                    if len(active) not in caps:
                        caps[len(active)] = Stack.slice(cap, idx.repeat(len(active)), batch.rows)
                    x = torch.cat([h[c].to(h[active[0]].device) for c in active]) if len(active) > 1 else h[active[0]]
                    y = self.stack.run(x, caps[len(active)], i, (), stop=i + 1)
                    for c, part_y in zip(active, y.split(n)):
                        h[c] = part_y
                finals = [self.stack.run(h[c], sliced, L, ()) for c in part]  # to the head's device
                for c, (sums, counts) in zip(part, p.objective.row_losses_many(self.stack, finals, batch, idx)):
                    outs[c].update(
                        {offset - batch.rows + r: (float(s), float(k)) for r, s, k in zip(local, sums, counts)}
                    )
        seconds = (time.perf_counter() - t0) / max(1, len(items))
        result = []
        for (removed, _, _, _), start, out in zip(begun, starts, outs):
            if not all(math.isfinite(s) for s, _ in out.values()):
                raise GhostsearchError(f"removing {removed} gives a non-finite loss; check the model dtype")
            result.append(
                RowScore(
                    sums=[out[int(r)][0] for r in rows],
                    counts=[out[int(r)][1] for r in rows],
                    tokens=tokens // max(1, len(items)),
                    seconds=seconds,
                    start=start,
                )
            )
        return result

    def _look_runs(self, p: Prepared, prefixes: dict, mb: int, idx: torch.Tensor, sliced: Captured) -> dict:
        """Micro-batch ``mb``'s look rows ``idx`` of each prefix of ``prefixes`` (``look_prefixes``):
        prefix -> boundary -> its state there, each prefix run once, from its own start to its deepest end."""
        runs: dict[Removed, dict[int, torch.Tensor]] = {}
        for P, ends in prefixes.items():
            b, src = self._start(p, P)
            s = self._cached(p, src, b, mb)
            h, runs[P] = s[idx.to(s.device)], {}
            for e in sorted(ends):
                h = self.stack.run(h, sliced, b, P, stop=e)
                runs[P][e], b = h, e
        return runs

    def _look_state(self, p: Prepared, begun: tuple, start: int, runs: dict, mb: int, idx: torch.Tensor):
        """A candidate's state on the look's rows at ``start``: from the look's prefix run where it
        starts deeper than its own cached start, else its cached state."""
        _, b, src, pre = begun
        if start > b:
            return runs[pre][start]
        s = self._cached(p, src, b, mb)
        return s[idx.to(s.device)]

    def statistic(self, key: str, name: str):
        st = self.prepared[key].stats
        if name == "row_counts" and name not in st:  # per-row loss counts (racing): the dense model's
            st[name] = self.score_rows(key, (), range(self.prepared[key].n_rows)).counts
        if name not in st:
            raise GhostsearchError(f"unknown statistic {name!r}; choose one of: {', '.join(st)}")
        return st[name]


class ScorerEvaluator:
    """A search's evaluator over one in-process ``Scorer`` and one prepared objective ``key``: what
    ``PoolClient`` is through the pool, with no pool (tests, in-process measurements). ``evaluate`` scores
    each (removed, fidelity) once (a shared cache, as the broker's); ``rows`` answers a race's look with every
    survivor at once (``score_rows_many``, as ``Broker.rows`` does); ``computed`` counts scored candidates."""

    def __init__(self, scorer: Scorer, key: str):
        self.scorer, self.key = scorer, key
        self.cache: dict[tuple[Removed, float], float] = {}
        self.computed = 0
        self.value_of = scorer.prepared[key].objective.value

    def evaluate(self, candidates, searcher: str = "") -> list[float]:
        out = []
        for c in candidates:
            k = (c.removed, c.fidelity)
            if k not in self.cache:
                self.cache[k] = self.scorer.score(self.key, c.removed, c.fidelity, c.prefix).value
                self.computed += 1
            out.append(self.cache[k])
        return out

    def statistic(self, name: str):
        return self.scorer.statistic(self.key, name)

    def n_rows(self) -> int:
        return self.scorer.prepared[self.key].n_rows

    def rows(self, requests, searcher: str = "") -> list[tuple[list[float], list[float], float]]:
        """Per request (racing.RowRequest): its rows' loss sums and counts, and the value over every row it has
        seen (``before`` and these)."""
        if len({tuple(q.rows) for q in requests}) > 1:
            raise ValueError("one look scores the same rows for every survivor")
        got = self.scorer.score_rows_many(self.key, [(q.removed, q.prefix) for q in requests], requests[0].rows)
        self.computed += len(requests)
        return [
            (r.sums, r.counts, self.value_of(q.before[0] + sum(r.sums), q.before[1] + sum(r.counts)))
            for q, r in zip(requests, got)
        ]


class StatisticsSums:
    """Token-weighted sums behind ``block_statistics``, added one micro-batch at a time."""

    def __init__(self) -> None:
        self.cos_sum: torch.Tensor | None = None
        self.ang_sum: torch.Tensor | None = None
        self.n = 0.0

    @torch.no_grad()
    def add(self, cap: Captured, batch: Batch) -> None:
        states = cap.states
        L1 = len(states)
        if self.cos_sum is None or self.ang_sum is None:
            self.cos_sum = torch.zeros(L1, L1, dtype=torch.float64)
            self.ang_sum = torch.zeros(L1, L1, dtype=torch.float64)
        flat = [s.reshape(-1, s.shape[-1]) for s in states]
        dev = flat[0].device  # a split model's states live on their blocks' devices: compared on the first
        w = batch.weight.reshape(-1).float() if batch.weight is not None else torch.ones(flat[0].shape[0])
        for s in range(0, flat[0].shape[0], 512):  # 512 tokens of every boundary at a time
            h = torch.nn.functional.normalize(torch.stack([x[s : s + 512].to(dev).float() for x in flat]), dim=-1)
            c = torch.einsum("itc,jtc->ijt", h, h).clamp(-1, 1)
            ww = w[s : s + 512].to(dev)
            self.cos_sum += (c * ww).sum(-1).double().cpu()
            self.ang_sum += (torch.arccos(c) / math.pi * ww).sum(-1).double().cpu()
        self.n += float(w.sum())

    def result(self) -> dict:
        if self.cos_sum is None or self.ang_sum is None:
            raise GhostsearchError("block statistics of no micro-batch: add one first")
        cos = (self.cos_sum / self.n).numpy()
        ang = (self.ang_sum / self.n).numpy()
        L = cos.shape[0] - 1
        return {
            "similarity": cos[:L, :L].copy(),
            "block_influence": np.array([1.0 - cos[i, i + 1] for i in range(L)]),
            "window_distance": {k: np.array([ang[i, i + k] for i in range(L - k + 1)]) for k in range(1, L)},
            "angular": ang,
        }


@torch.no_grad()
def block_statistics(caps: list[Captured], batches: list[Batch]) -> dict:
    """Dense statistics from the states entering each block (and the final output, index L):
    similarity[i, j]: token-weighted mean cosine of block inputs i and j (i, j < L);
    block_influence[i] = 1 - mean cos(input_i, output_i) (ShortGPT's BI);
    window_distance[k][i]: mean angular distance arccos(cos)/pi between the input of block i and
    the state leaving block i+k-1 (fast-block-select / ShortGPT-style windows)."""
    acc = StatisticsSums()
    for cap, batch in zip(caps, batches):
        acc.add(cap, batch)
    return acc.result()


def scorer_from_config(cfg: ScorerSettings, threads: int | None = None) -> Scorer:
    """Load the configured model once and wrap it in a Scorer (objectives are prepared on demand)."""
    from ghostsearch.model.models import load_configured

    if threads:
        torch.set_num_threads(threads)
    from ghostsearch.model.memplan import check_fit

    every = check_fit(cfg)  # one line before loading when the run cannot fit; resolves cache.every: auto
    model, tok = load_configured(cfg)
    return Scorer(
        Stack(model), tok, cache_every=every, max_prefix_runs=cfg.cache.prefix_runs, offload=cfg.cache.offload
    )
