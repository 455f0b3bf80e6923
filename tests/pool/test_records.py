"""The records of the scoring -> pool -> ledger path (issue 26), without Ray: the broker's cache key
(one form for a value and a race block, written and read back), a resumed cell's view of its
ledger (including a ledger written in the historical format), racing's block arithmetic, and
PoolClient answering a resumed cell from its ledger: the same values, and no row written twice."""

from __future__ import annotations

import math

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from ghostsearch.objectives import AwareSpec, CalibrationSpec, ObjectiveSpec
from ghostsearch.pool.blocks import RaceBlocks
from ghostsearch.pool.keys import CacheKey
from ghostsearch.pool.resume import Resume, entry_of
from ghostsearch.rundir.ledger import Ledger, LedgerRow, read_ledger
from ghostsearch.search.base import Candidate
from ghostsearch.search.racing import RowRequest

SPEC = ObjectiveSpec.make("perplexity", CalibrationSpec("c4", 8, 64, 0), aware=AwareSpec())


# ---------------------------------------------------------------- cache keys
def test_cache_key_writes_the_historical_form_and_reads_it_back():
    value = CacheKey.of("m/x", "fp32", SPEC, (5, 1, 3), 1 / 3)
    block = CacheKey.of("m/x", "fp32", SPEC, (3, 1), 0.0, rows=(7, 0, 5))
    # the strings the broker wrote before keys were records (f"{model}|{dtype}|{spec.key()}|f=..|..[|rows=..]")
    assert value.to_str() == f"m/x|fp32|{SPEC.key()}|f=0.333333|1,3,5"
    assert block.to_str() == f"m/x|fp32|{SPEC.key()}|f=0|1,3|rows=7,0,5"
    assert "|" in SPEC.key()  # the objective's own key holds the separator: parse must still split right
    for k in (value, block, CacheKey.of("m", "auto", SPEC, (), 1.0)):
        assert CacheKey.parse(k.to_str()) == k and hash(CacheKey.parse(k.to_str())) == hash(k)
    assert value.removed == (1, 3, 5) and block.rows == (7, 0, 5) and block.is_block and not value.is_block


def test_cache_keys_compare_as_their_strings_did():
    a = CacheKey.of("m", "fp32", SPEC, (1, 2), 1 / 3)
    assert a == CacheKey.of("m", "fp32", SPEC, [2, 1], 0.333333)  # same written form: the same entry
    assert a != CacheKey.of("m", "fp32", SPEC, (1, 2), 0.33334)
    assert CacheKey.of("m", "fp32", SPEC, (1, 2), 0.0, rows=(0, 1)) != CacheKey.of("m", "fp32", SPEC, (1, 2), 0.0)
    assert CacheKey.of("m", "fp32", SPEC, (1, 2), 0.0, rows=(0, 1)) != CacheKey.of(
        "m", "fp32", SPEC, (1, 2), 0.0, rows=(1, 0)
    )
    other = ObjectiveSpec.make("perplexity", CalibrationSpec("c4", 8, 64, 1))
    assert a != CacheKey.of("m", "fp32", other, (1, 2), 1 / 3) and a != CacheKey.of("m", "bf16", SPEC, (1, 2), 1 / 3)


@pytest.mark.parametrize(
    "text", ["", "m|fp32", "m|fp32|obj|1,2", "m|fp32|obj|f=x|1,2", "m|fp32|obj|f=1|1,a", "m|fp32|obj|f=1|1,2|rows=3,b"]
)
def test_a_string_that_is_no_cache_key_is_refused(text):
    with pytest.raises(ValueError, match="not a cache key"):
        CacheKey.parse(text)


# ---------------------------------------------------------------- resume
KEY = SPEC.key()


def _row(cell, removed, fidelity, value, cached=False, key=KEY, **kw) -> LedgerRow:
    return LedgerRow(
        cell=cell,
        searcher=cell.split("-")[0],
        objective="perplexity",
        objective_key=key,
        removed=list(removed),
        k=len(removed),
        fidelity=fidelity,
        value=value,
        tokens=64,
        seconds=0.5,
        cached=cached,
        actor="a",
        node="n",
        seed=0,
        **kw,
    )


def _ledger(run_dir, rows):
    led = Ledger(run_dir, checkpoint_seconds=3600)
    for r in rows:
        led.append(r)
    led.close()


def test_resume_knows_computed_values_and_blocks_and_counts_the_cells_own_rows(tmp_path):
    _ledger(
        tmp_path,
        [
            _row("greedy", (1,), 1.0, 10.0),
            _row("greedy", (1,), 1.0, 99.0, cached=True),  # a cache hit: counted for the cell, not a value
            _row("beam", (2,), 1.0, 11.0),  # another cell's value: known, not this cell's row
            _row("greedy", (3,), 1.0, 12.0, key="other"),  # another objective: ignored
            _row("greedy", (1, 2), 4 / 32, 13.0, cost=4 / 32, partial=True, row_losses=[1.0, 2.0, 3.0, 4.0]),
        ],
    )
    r = Resume(SPEC.key(), "greedy")
    assert r.load(tmp_path) == 3
    assert r.value((1,), 1.0).value == 10.0 and r.value((2,), 1.0).value == 11.0
    assert r.value((3,), 1.0) is None and r.value((1, 2), 4 / 32) is None  # a block is not a value
    assert r.block((1, 2), 4 / 32, 4).row_losses == [1.0, 2.0, 3.0, 4.0]
    assert r.block((1, 2), 4 / 32, 2) is None and r.block((1, 2), 8 / 32, 4) is None
    assert r.replays == {entry_of((1,), 1.0): 2, entry_of((1, 2), 4 / 32, 4): 1}
    assert [r.is_new(entry_of((1,), 1.0)) for _ in range(3)] == [False, False, True]
    assert r.is_new(entry_of((2,), 1.0))  # beam's row is beam's: greedy's answer is a row of its own


def test_resume_reads_a_ledger_written_in_the_historical_format(tmp_path):
    """A part written before LedgerRow existed (the columns as pyarrow wrote them then, racing's too)."""
    old = pa.schema(
        [
            ("eval_id", pa.string()),
            ("cell", pa.string()),
            ("searcher", pa.string()),
            ("objective", pa.string()),
            ("objective_key", pa.string()),
            ("removed", pa.list_(pa.int32())),
            ("k", pa.int32()),
            ("fidelity", pa.float64()),
            ("value", pa.float64()),
            ("tokens", pa.int64()),
            ("seconds", pa.float64()),
            ("cached", pa.bool_()),
            ("actor", pa.string()),
            ("node", pa.string()),
            ("time", pa.float64()),
            ("seed", pa.int64()),
            ("cost", pa.float64()),
            ("partial", pa.bool_()),
            ("row_losses", pa.list_(pa.float64())),
        ]
    )
    rows = [
        {
            "eval_id": "a",
            "cell": "greedy",
            "searcher": "greedy",
            "objective": "perplexity",
            "objective_key": SPEC.key(),
            "removed": [4, 6],
            "k": 2,
            "fidelity": 1.0,
            "value": 7.5,
            "tokens": 64,
            "seconds": 0.5,
            "cached": False,
            "actor": "a",
            "node": "n",
            "time": 1.0,
            "seed": 0,
            "cost": None,
            "partial": None,
            "row_losses": None,
        }
    ]
    (tmp_path / "ledger").mkdir()
    pq.write_table(pa.Table.from_pylist(rows, schema=old), tmp_path / "ledger" / "part-00000000000000000001-x.parquet")
    r = Resume(SPEC.key(), "greedy")
    assert r.load(tmp_path) == 1 and r.value((4, 6), 1.0).value == 7.5


# ---------------------------------------------------------------- racing's arithmetic
def test_race_blocks_value_cost_and_fidelity():
    counts = [2.0, 3.0, 5.0, 7.0, 11.0, 13.0, 17.0, 19.0]
    b = RaceBlocks(lambda s, n: s / n, tuple(counts))
    q = RowRequest((3, 1), None, (6, 2), start=2, before=(10.0, 8.0))
    assert b.n_rows == 8 and b.fidelity(q) == 4 / 8 and b.cost(q) == 2 / 8 and b.partial(q)
    assert b.counts(q) == [17.0, 5.0]
    assert b.value(q, [4.0, 6.0]) == (10.0 + 10.0) / (8.0 + 22.0)
    assert b.candidate(q) == Candidate((1, 3), fidelity=0.5)
    last = RowRequest((1, 3), (1,), tuple(range(4, 8)), start=4)
    assert not b.partial(last) and b.fidelity(last) == 1.0 and b.candidate(last).prefix == (1,)
    ppl = RaceBlocks.of(ObjectiveSpec.make("perplexity", CalibrationSpec("c4", 8, 64, 0)), counts)
    assert ppl.value(q, [4.0, 6.0]) == pytest.approx(math.exp(20.0 / 30.0))


# ---------------------------------------------------------------- PoolClient on a resumed cell
def test_a_resumed_cell_is_answered_from_its_ledger_without_writing_a_row_twice(tmp_path):
    """Everything asked is in the ledger, so the pool is never called (broker=None would fail if it
    were); the cell's own rows are replayed, and asking once more than the ledger holds adds a row."""
    from ghostsearch.pool.client import PoolClient

    N = 8
    losses = [1.0, 2.0, 3.0, 4.0]
    _ledger(
        tmp_path,
        [
            _row("greedy", (1,), 1.0, 10.0),
            _row("greedy", (2,), 1.0, 11.0),
            _row("greedy", (1, 2), 4 / N, 5.0, cost=4 / N, partial=True, row_losses=losses),
        ],
    )
    n0 = len(read_ledger(tmp_path))
    seen = []
    client = PoolClient(
        None, SPEC, Ledger(tmp_path, checkpoint_seconds=3600), "greedy", 0, "m", "fp32", on_result=seen.append
    )
    assert client.load_known(tmp_path) == 3
    assert client.evaluate([Candidate((1,)), Candidate((2,))], "greedy") == [10.0, 11.0]
    assert len(read_ledger(tmp_path)) == n0  # replayed: the ledger had these rows of this cell
    client.blocks = RaceBlocks(lambda s, n: s / n, tuple([2.0] * N))
    q = RowRequest((1, 2), None, (5, 1, 7, 0))
    ((sums, counts, v),) = client.rows([q], "greedy")
    assert sums == losses and counts == [2.0] * 4 and v == sum(losses) / 8.0
    assert len(read_ledger(tmp_path)) == n0
    assert client.evaluate([Candidate((1,))], "greedy") == [10.0]  # asked again: now a row of its own
    new = [r for r in read_ledger(tmp_path).to_pylist() if r["cached"]]
    assert len(new) == 1 and new[0]["removed"] == [1] and new[0]["value"] == 10.0 and new[0]["cell"] == "greedy"
    assert client.evaluations == 4 and client.cache_hits == 4
    assert [(tuple(r.removed), r.fidelity, r.cost) for r in seen] == [
        ((1,), 1.0, None),
        ((2,), 1.0, None),
        ((1, 2), 0.5, 0.5),
        ((1,), 1.0, None),
    ]
    assert seen[2].partial and seen[2].row_losses == losses and seen[2].value == v


# ---------------------------------------------------------------- the broker's accounting
def test_pool_status_writes_pool_json_as_before_and_takes_a_resumed_cells_best():
    from ghostsearch.pool.actors import CellBest, PoolStatus, SearcherCounts

    counts = SearcherCounts().add(requested=1).add(computed=1).add(requested=1, cached=1)
    status = PoolStatus(
        actors=["a-0"],
        queue=0,
        inflight=0,
        cache_size=3,
        hit_rate=0.5,
        retries=0,
        stalls=1,
        searchers={"greedy": counts},
        cells={"c": CellBest("greedy", "perplexity", 2, 9.0, [1, 3]), "d": CellBest("bo", "perplexity", 2)},
    )
    # pool.json's keys in the order the broker's dicts had them
    assert status.to_dict() == {
        "actors": ["a-0"],
        "queue": 0,
        "inflight": 0,
        "cache_size": 3,
        "hit_rate": 0.5,
        "retries": 0,
        "stalls": 1,
        "searchers": {"greedy": {"requested": 2, "computed": 1, "cached": 1}},
        "cells": {
            "c": {"searcher": "greedy", "objective": "perplexity", "k": 2, "best": 9.0, "best_removed": [1, 3]},
            "d": {"searcher": "bo", "objective": "perplexity", "k": 2, "best": None, "best_removed": None},
        },
    }
    assert list(status.to_dict()) == list(PoolStatus.__dataclass_fields__)
    assert list(status.to_dict()["cells"]["c"]) == ["searcher", "objective", "k", "best", "best_removed"]
    better = status.with_best([("c", 8.5, [0, 3]), ("d", None, []), ("gone", 1.0, [5])])
    assert better.cells["c"].best == 8.5 and better.cells["c"].best_removed == [0, 3]
    assert better.cells["d"] == status.cells["d"] and "gone" not in better.cells
    assert status.with_best([("c", 9.5, [0, 1])]) == status  # a worse answer leaves the broker's best
