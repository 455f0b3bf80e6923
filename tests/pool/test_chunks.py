"""How the broker sends a batch out (``Broker.evaluate_many``): its chunks go to the scorers while the rest of
the batch is still being read, in the sizes ``Broker._chunks`` gives the whole batch, and every request is
answered once. The broker's own code, run in this process on scorers that answer at once (no Ray)."""

from __future__ import annotations

import asyncio

from ghostsearch.config import load_config
from ghostsearch.objectives.scores import Score
from ghostsearch.pool.actors import Broker, answers

BrokerClass = Broker.__ray_actor_class__  # type: ignore[attr-defined]  # the class Ray wraps


class Batch(list):
    """A batch that counts how many of its requests the broker has read so far."""

    read = 0

    def __iter__(self):
        for x in super().__iter__():
            self.read += 1
            yield x


class Scorer:
    """A scorer handle whose ``score_many.remote`` answers each set with the sum of its blocks once the broker
    has read all of ``batch``, and notes how much of it the broker had read when the call was made, and the call's
    size."""

    def __init__(self, name: str, batch: Batch, calls: list):
        self.name, self.batch, self.calls = name, batch, calls
        self.score_many = self

    def remote(self, spec, many):
        self.calls.append((self.batch.read, len(many)))

        async def answer():  # once the batch is read (so the running seconds a candidate stay as they were)
            while self.batch.read < len(self.batch):
                await asyncio.sleep(0)
            scores = [Score(value=float(sum(r)), tokens=1, seconds=0.01, start=0) for r, _, _ in many]
            return answers(self.name, "node", scores)

        return answer()


def test_chunks_go_out_while_the_batch_is_read_and_every_request_is_answered_once():
    cfg = load_config(None, ["dtype=fp32", "device=cpu", "pool.actors=4"])
    batch, calls = Batch([([i, i + 1], 1.0, None) for i in range(1, 400)]), []
    broker = BrokerClass(cfg, [f"s{i}" for i in range(4)], [Scorer(f"s{i}", batch, calls) for i in range(4)])
    broker.mean_s = 0.01  # a candidate timed: chunks of 5..100 (CHUNK_MIN_S, CHUNK_MAX_S)
    sizes = broker._chunks(len(batch))

    async def run():
        return [a async for got in broker.evaluate_many(cfg.objective_spec(), batch, "s") for a in got]

    got = asyncio.run(run())
    assert sorted(j for j, *_ in got) == list(range(len(batch)))  # each request answered once
    assert all(v == 2 * j + 3 for j, v, *_ in got)  # with its own value
    assert calls[0][0] < len(batch)  # the first chunk went out before the batch was read to its end
    assert [n for _, n in calls] == sizes  # the sizes the whole batch's chunks had before
    assert not broker.inflight


def test_a_batch_answered_from_the_cache_sends_nothing():
    cfg = load_config(None, ["dtype=fp32", "device=cpu", "pool.actors=2"])
    batch, calls = Batch([([i], 1.0, None) for i in range(1, 60)]), []
    broker = BrokerClass(cfg, ["s0", "s1"], [Scorer(f"s{i}", batch, calls) for i in range(2)])
    broker.mean_s = 0.01
    spec = cfg.objective_spec()

    async def run():
        return [a async for got in broker.evaluate_many(spec, batch, "s") for a in got]

    first = asyncio.run(run())
    sent = len(calls)
    again = asyncio.run(run())
    assert len(calls) == sent and sorted(a[:2] for a in again) == sorted(a[:2] for a in first)
    assert all(a[-1] for a in again)  # answered from the cache
