"""A cell's best-so-far curve (rundir/curves.py): the one rule the report (study/report/summary.py)
and bench/search.py read: full-fidelity k-sets only (search.base.new_best), the budget a race block
charges is its own cost, and the cell's k is the ledger's cell_k column (else its name's k)."""

from __future__ import annotations

import math

import pytest

from ghostsearch.rundir import curves
from ghostsearch.rundir.curves import best_so_far, cell_k, curve
from ghostsearch.rundir.ledger import Ledger


class Table:
    def __init__(self, rows):
        self.rows = rows

    def to_pylist(self):
        return self.rows


def test_report_curves_count_only_full_fidelity_k_sets(monkeypatch):
    """Moved from tests/search/test_best_k_set.py with best_so_far (summary uses this function)."""
    import importlib

    summary = importlib.import_module("ghostsearch.study.report.summary")  # the package exports a function 'summary'

    rows = [
        {"cell": "greedy-ppl-k3-s0", "time": t, "fidelity": f, "cost": None, "removed": r, "value": v}
        for t, (r, f, v) in enumerate(
            [
                ([4], 1.0, 1.0),
                ([4, 5], 1.0, 2.0),
                ([4, 5, 6], 1.0, 9.0),
                ([1, 2, 3], 0.5, 3.0),
                ([1, 2, 7], 1.0, 8.0),
                ([4, 5, 8], 1.0, 8.5),
            ]
        )
    ]
    monkeypatch.setattr(curves, "read_ledger", lambda run_dir: Table(rows))
    c = best_so_far("RUN")["greedy-ppl-k3-s0"]
    assert c.best == [9.0, 9.0, 8.0, 8.0] and c.evaluations == [3.0, 3.5, 4.5, 5.5]
    assert summary.best_so_far is best_so_far  # the report's curves are this rule, not a copy


def test_a_race_block_charges_its_cost_and_only_a_full_block_can_be_the_best():
    """Racing: blocks of 16 of 64 rows (cost 0.25 each) are partial until the last; the budget grows by
    the cost (not the fidelity, which is rows seen so far), and only the full block's value counts."""
    blocks = [(0.25, 0.25, 5.0), (0.5, 0.25, 4.0), (0.75, 0.25, 4.5), (1.0, 0.25, 6.0)]  # (fidelity, cost, value)
    rows = [
        {"time": float(i), "removed": [1, 2], "fidelity": f, "cost": c, "value": v}
        for i, (f, c, v) in enumerate(blocks)
    ]
    rows.append({"time": 9.0, "removed": [3, 4], "fidelity": 1.0, "cost": None, "value": 5.5})  # an exact evaluation
    c = curve("greedy-perplexity-k2-s0", rows)
    assert c.used == pytest.approx(2.0)  # 4 x 0.25 + 1 (by fidelity, the old copy in bench: 3.5)
    assert c.evaluations == [1.0, 2.0] and c.best == [6.0, 5.5] and c.seconds == [3.0, 9.0]
    assert c.improvements() == [(1.0, 3.0, 6.0), (2.0, 9.0, 5.5)] and c.final == 5.5 and c.wall == 9.0
    assert c.reach(5.5) == (2.0, 9.0) and c.reach(5.0) is None and c.reach(6.0 * (1 + 1e-10)) == (1.0, 3.0)


def test_the_cells_k_comes_from_the_column_else_the_name_else_the_largest_set():
    small = [{"removed": [1]}, {"removed": [1, 2]}]
    assert cell_k("greedy-perplexity-k4-s0", [{**r, "cell_k": 3} for r in small]) == 3
    assert cell_k("greedy-perplexity-k4-s0", small) == 4  # a ledger before the column: the name
    assert cell_k("greedy-my-objective-k12-s-1", small) == 12
    assert cell_k("hand-made", small) == 2
    with pytest.raises(ValueError, match="different k"):
        cell_k("c", [{"removed": [1], "cell_k": 2}, {"removed": [1], "cell_k": 3}])
    # an interrupted greedy cell (k=4, got to 2-sets): no k-set yet, so no best (the old rule, the
    # largest set, would have reported a 2-set as its best)
    rows = [{"time": float(i), "removed": r["removed"], "fidelity": 1.0, "value": 1.0} for i, r in enumerate(small)]
    assert curve("greedy-perplexity-k4-s0", rows).final == math.inf


def test_best_so_far_reads_a_real_ledger_and_bench_search_agrees(tmp_path):
    """Rows written through the ledger (cell_k set as PoolClient writes it); study.matched's curves (bench/search.py)
    are the same Curve objects."""
    from ghostsearch.study.matched import curves

    led = Ledger(tmp_path)
    for i, (removed, fid, cost, value) in enumerate(
        [([1], 1.0, None, 3.0), ([1, 2], 0.5, 0.5, 2.0), ([1, 2], 1.0, 0.5, 2.5), ([2, 3], 1.0, None, 2.2)]
    ):
        led.append(
            {
                "cell": "greedy-perplexity-k2-s0",
                "searcher": "greedy",
                "objective": "perplexity",
                "objective_key": "p",
                "removed": removed,
                "k": len(removed),
                "fidelity": fid,
                "value": value,
                "cached": False,
                "time": 100.0 + i,
                "cost": cost,
                "cell_k": 2,
            }
        )
    led.close()
    c = best_so_far(tmp_path)["greedy-perplexity-k2-s0"]
    assert (c.k, c.used, c.best, c.evaluations) == (2, 3.0, [2.5, 2.2], [2.0, 3.0])
    assert best_so_far(tmp_path, objective="margin") == {}
    assert curves(tmp_path, "perplexity", 2) == {"greedy": c} and curves(tmp_path, "perplexity", 3) == {}
