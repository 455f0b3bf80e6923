"""``PoolClient``: what a searcher evaluates through (the Evaluator and Oracle of one cell).

It adds the cell's objective to every request, answers a resumed run's candidates from its own
ledger (``resume.Resume``), turns race blocks into values and ledger rows (``blocks.RaceBlocks``),
and writes every finished evaluation to the ledger before the searcher sees it. It only carries
requests: the pool it talks to is started and released by ``session.PoolSession``.
"""

from __future__ import annotations

import gc
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

import ray

from ghostsearch.core.errors import GhostsearchError
from ghostsearch.objectives import ObjectiveSpec
from ghostsearch.pool.actors import Served
from ghostsearch.pool.blocks import RaceBlocks
from ghostsearch.pool.resume import Entry, Resume, entry_of
from ghostsearch.rundir.ledger import Ledger, LedgerRow
from ghostsearch.search import Candidate
from ghostsearch.search.racing import LookCosts, RowRequest

LOOKS = "looks"  # RUN_DIR/looks/<cell>.json: race: auto's look-cost estimate per cell


@contextmanager
def paused():
    """The cyclic garbage collector off for the block (as it was after): a batch's objects die by reference
    counting, and a full collection over the driver's heap in the middle of a batch cost up to 38% of the
    driver's CPU for it (bench/scale.py, gc callbacks); what it would have collected waits for the next one."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


@dataclass
class PoolClient:
    """The Evaluator and Oracle of one searcher (one cell of a run): the transport to the pool's
    broker. What a resumed run reads back from its ledger is ``Resume`` (resume.py); how a race block
    becomes a value and a ledger row's numbers is ``RaceBlocks`` (blocks.py)."""

    broker: Any  # the Broker's actor handle
    spec: ObjectiveSpec
    ledger: Ledger
    cell: str
    seed: int
    model: str
    dtype: str
    k: int | None = None  # the cell's k: its best value counts only k-sets
    on_result: Callable[[LedgerRow], None] | None = None  # called with each row for progress
    evaluations: int = 0
    cache_hits: int = 0
    sources: dict = field(default_factory=dict)  # objective name -> CalibrationSpec statistics may come from
    resume: Resume = field(init=False)
    blocks: RaceBlocks | None = field(default=None, init=False)  # racing: known once n_rows is asked
    look_costs: LookCosts | None = None  # race: auto's look costs (search.run's); kept in RUN_DIR (load_known)

    def __post_init__(self) -> None:
        self.resume = Resume(self.spec.key(), self.cell)

    def load_known(self, run_dir) -> int:
        """Resume: every value this run's ledger holds for the cell's objective (see Resume); and
        ``race: auto``'s look-cost estimate, kept in RUN_DIR/looks/<cell>.json once the search makes
        it and read back from there, so that a resumed cell takes the looks the interrupted one took
        (racing.LookCosts.kept)."""
        self.look_costs = LookCosts.kept(Path(run_dir) / LOOKS / f"{self.cell}.json")
        return self.resume.load(run_dir)

    def share_known(self) -> int:
        """Put the values ``load_known`` read (not race blocks) into the pool's shared cache
        (``Broker.remember``), as if this pool had computed them: another run directory on the same
        pool is answered from them instead of computing them again. Returns how many were new there."""
        known = [
            (list(r.removed), r.fidelity, r.value, r.tokens, r.seconds, r.actor, r.node)
            for r in self.resume.known.values()
            if r.row_losses is None and r.removed
        ]
        return int(ray.get(self.broker.remember.remote(self.spec, known))) if known else 0

    def _append_new(self, key: Entry, row: LedgerRow) -> None:
        """Ledger a resumed cell's answer unless the ledger already has this cell's row for it."""
        if self.resume.is_new(key):
            self.ledger.append(row)

    def _row(
        self, c: Candidate, searcher: str, value: float, cached: bool, source: Served | LedgerRow | tuple, **race
    ) -> LedgerRow:
        """The ledger row of ``c``'s answer: scored now (``source``: what the pool served, or its (tokens,
        seconds, actor, node) as the broker sends them) or replayed from the ledger (``source``: the row that
        holds it); ``race``: a block's cost, partial, row_losses."""
        tokens: int | None
        seconds: float | None
        actor: str | None
        node: str | None
        if isinstance(source, tuple):
            tokens, seconds, actor, node = source
        elif isinstance(source, Served):
            tokens, seconds, actor, node = source.score.tokens, source.score.seconds, source.actor, source.node
        else:
            tokens, seconds, actor, node = source.tokens, source.seconds, source.actor, source.node
        return LedgerRow(
            cell=self.cell,
            searcher=searcher,
            objective=self.spec.name,
            objective_key=self.spec.key(),
            removed=list(c.removed),
            k=len(c.removed),
            fidelity=c.fidelity,
            value=value,
            tokens=tokens,
            seconds=seconds,
            cached=cached,
            actor=actor,
            node=node,
            time=time.time(),
            seed=self.seed,
            cell_k=self.k,
            **race,
        )

    def evaluate(self, candidates: Sequence[Candidate], searcher: str) -> list[float]:
        """Values of ``candidates``: from this run's ledger where a resumed run has them, the rest in one
        broker call (``Broker.evaluate_many``), each ledgered as its answer arrives, before the searcher
        sees any value. The cyclic garbage collector waits while a batch streams in (``paused``)."""
        with paused():
            return self._evaluate(candidates, searcher)

    def _evaluate(self, candidates: Sequence[Candidate], searcher: str) -> list[float]:
        values: list[float | None] = [None] * len(candidates)
        pending: list[int] = []
        for i, c in enumerate(candidates):
            known = self.resume.value(c.removed, c.fidelity)
            if known is not None:  # resumed run: answered from this run's own ledger
                row = self._row(c, searcher, known.value, True, known)
                self._answer(entry_of(c.removed, c.fidelity), row)
                values[i] = row.value
            else:
                pending.append(i)
        if pending:
            requests = [
                (list(c.removed), c.fidelity, list(c.prefix) if c.prefix else None)
                for c in (candidates[i] for i in pending)
            ]
            stream = self.broker.evaluate_many.remote(self.spec, requests, searcher, self.cell, self.k)
            for answered in self._streamed(stream):
                rows = [
                    (pending[j], self._row(candidates[pending[j]], searcher, v, hit, (tokens, seconds, actor, node)))
                    for j, v, tokens, seconds, actor, node, hit in answered
                ]
                self._answer_many([row for _, row in rows])  # durable before the searcher sees any value
                for i, row in rows:
                    values[i] = row.value
        return values  # type: ignore[return-value]

    def _answer(self, key: Entry, row: LedgerRow) -> None:
        self._append_new(key, row)
        self._count(row)

    def _answer_many(self, rows: list[LedgerRow], keys: list[Entry] | None = None) -> None:
        """``_answer`` of the answers that arrived together (``keys``: their entries, default values'),
        ledgered in one write (Ledger.append_many)."""
        if self.resume.replays:  # a resumed cell: a row its ledger holds is replayed, not written again
            keys = keys if keys is not None else [entry_of(r.removed, r.fidelity) for r in rows]
            rows_new = [r for r, key in zip(rows, keys) if self.resume.is_new(key)]
        else:
            rows_new = rows
        self.ledger.append_many(rows_new)
        for row in rows:
            self._count(row)

    def _count(self, row: LedgerRow) -> None:
        self.evaluations += 1
        self.cache_hits += int(row.cached)
        if self.on_result is not None:
            self.on_result(row)

    @staticmethod
    def _streamed(stream):
        """Each item of a broker's streaming answer, as it comes (waited on with ray.wait)."""
        while True:
            ray.wait([stream], num_returns=1)
            try:
                ref = next(stream)
            except StopIteration:
                return
            yield ray.get(ref)

    def n_rows(self) -> int:
        return self._blocks().n_rows

    def _blocks(self) -> RaceBlocks:
        if self.blocks is None:
            self.blocks = RaceBlocks.of(self.spec, self.statistic("row_counts"))
        return self.blocks

    def rows(self, requests: Sequence[RowRequest], searcher: str) -> list[tuple[list[float], list[float], float]]:
        """Racing (search/racing.py): per-row loss sums of blocks of calibration rows. Each block is a
        ledger row (fidelity: rows seen / all rows; value: on those rows, ``partial`` below 1;
        ``row_losses``; ``cost``), written before the race sees it; a resumed run replays it."""
        blocks = self._blocks()
        out: list = [None] * len(requests)
        todo: list[int] = []
        done: list[tuple[int, list[float], bool, Served | LedgerRow | tuple]] = []  # (request, sums, cached, source)
        for i, q in enumerate(requests):
            c = blocks.candidate(q)
            known = self.resume.block(c.removed, c.fidelity, len(q.rows))
            if known is not None and known.row_losses is not None:  # resumed run: in the run's own ledger
                done.append((i, list(known.row_losses), True, known))
            else:
                todo.append(i)
        if len({tuple(requests[i].rows) for i in todo}) > 1:
            raise ValueError("one look scores the same rows for every survivor")
        if todo:  # the look's rows for every survivor: one broker call
            items = [(list(q.removed), list(q.prefix) if q.prefix else None) for q in (requests[i] for i in todo)]
            rs = ray.get(self.broker.look.remote(self.spec, items, tuple(requests[todo[0]].rows), searcher))
            done += [
                (i, list(sums), hit, (tokens, s, actor, node))
                for i, (sums, tokens, s, actor, node, hit) in zip(todo, rs)
            ]
        rows, keys = [], []
        for i, sums, cached, source in done:
            q = requests[i]
            v = blocks.value(q, sums)
            c = blocks.candidate(q)
            rows.append(
                self._row(
                    c, searcher, v, cached, source, cost=blocks.cost(q), partial=blocks.partial(q), row_losses=sums
                )
            )
            keys.append(entry_of(c.removed, c.fidelity, len(q.rows)))
            out[i] = (list(sums), blocks.counts(q), v)
        self._answer_many(rows, keys)  # the look's blocks in one write, durable before the race sees any
        return out

    def statistic(self, name: str, source: str | None = None):
        """A dense statistic of this cell's calibration data or, with ``source`` (an objective name
        in ``sources``, e.g. 'perplexity'), of that objective's, whatever this cell's objective."""
        spec = self.spec
        if source not in (None, self.spec.name):
            if source not in self.sources:
                raise GhostsearchError(
                    f"statistic {name!r} from {source!r}: this run has no such calibration "
                    f"source; use one of: {', '.join([self.spec.name, *self.sources])}"
                )
            spec = ObjectiveSpec.make(source, self.sources[source])
        return ray.get(self.broker.statistic.remote(spec, name))

    def best_known(self, n: int) -> list[tuple[list[int], float]]:
        """The n best full-fidelity k-sets (this cell's k) any searcher has scored on this pool so far."""
        return ray.get(self.broker.best_known.remote(self.spec, self.k, n))

    def dense_value(self) -> float:
        """The dense model's value on this objective (the reference; no ledger row, not charged)."""
        return ray.get(self.broker.evaluate.remote(self.spec, [], 1.0, None, "dense")).score.value
