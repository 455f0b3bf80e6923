"""ghostsearch.study.studies.study2_ppl (bench/study2_ppl.py's recomputation of study 2's perplexities
window by window, issue 37) against the committed data: every recomputed slot (windows j, j + 16, ...)
sums to the batch-position sum study 2 committed, so the recomputed models are study 2's."""

from pathlib import Path

import pytest

from ghostsearch.study.studies.base import REDO_NAME
from ghostsearch.study.studies.study2_ppl import SLOTS, check, slot_order

RUN = Path(__file__).resolve().parents[2] / "docs" / "results" / "study-cpu-2"


def test_slot_order_walks_the_windows_slot_by_slot():
    order = slot_order(148)
    assert sorted(order) == list(range(148)) and order[:3] == [0, 16, 32] and order[10] == 1
    assert slot_order(47, [2]) == [2, 18, 34]


@pytest.mark.skipif(not (RUN / REDO_NAME / "windows.jsonl").exists(), reason="no committed recomputation")
def test_recomputed_slots_sum_to_the_committed_batch_position_sums():
    rows = check(RUN / REDO_NAME, RUN)
    assert len(rows) >= 300  # M1-M10 and the cheap models, every slot of both corpora that finished
    assert {r["corpus"] for r in rows} == {"wikitext2", "c4"} and {r["slot"] for r in rows} == set(range(SLOTS))
    assert max(abs(r["diff"]) for r in rows) < 1e-4  # the committed sums are rounded to 6 decimals
