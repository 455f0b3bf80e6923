"""speed.speedup_k: a speed-up target resolved to the least k whose measured speed-up (the lesser of
prefill and decode) reaches it. The choice is checked against reports whose speed-ups are set (the
timing itself is measure_speed's, tested in test_speed.py), then once end to end on a tiny random Llama
with real timings, where whichever way it falls the answer must agree with its own measured report."""

from __future__ import annotations

import pytest

from ghostsearch.core.errors import GhostsearchError
from ghostsearch.evaluation.speed import SpeedReport, SpeedRow, Throughput, speedup_k
from tests.conftest import tiny_model


@pytest.fixture(scope="module")
def model():
    return tiny_model("llama", 6, vocab=512)


def timings(speedups: dict[int, tuple[float, float]], calls: list):
    """A stand-in for measure_speed whose per-k (prefill, decode) speed-ups are given."""

    def measure(model, sets, batches, seq_len, decode_tokens, repeats, peak, progress):
        calls.append([list(s) for s in sets])
        rows = []
        for s in sets:
            pre, dec = speedups[len(s)]
            tp = tuple(
                Throughput(ph, b, 1.0, 1.0, 1.0, x, x, x)
                for ph, x in (("prefill", pre), ("decode", dec))
                for b in batches
            )
            rows.append(SpeedRow(f"k={len(s)}", tuple(sorted(s)), "none", 6, 1, 1, None, 6 / (6 - len(s)), tp))
        return SpeedReport(tuple(rows), "cpu", "float32", tuple(batches), seq_len, decode_tokens, repeats, 1, "-", 1)

    return measure


def test_the_least_k_whose_slower_phase_reaches_the_target(model):
    calls: list = []
    # ideal 6/(6-k): k=1 1.2x cannot reach 1.25, so timing starts at k0 = 2; k=2's decode falls short
    k, rep = speedup_k(model, 1.25, [1, 2, 3, 4], measure=timings({2: (1.3, 1.2), 3: (1.5, 1.3), 4: (2, 1.9)}, calls))
    assert k == 3
    assert calls == [[[3, 4], [2, 3, 4], [1, 2, 3, 4]]]  # k0..every free block, the last k free blocks each
    assert rep.row([2, 3, 4]) is not None
    k, _ = speedup_k(model, 1.25, [1, 2, 3, 4], measure=timings({2: (1.26, 1.25), 3: (1, 1), 4: (1, 1)}, calls))
    assert k == 2  # reaching it exactly counts


def test_no_timed_k_reaching_it_is_one_line_naming_each(model):
    with pytest.raises(GhostsearchError, match=r"no k timed reached it .*k=2 1\.10x, k=3 1\.20x, k=4 1\.24x") as e:
        speedup_k(model, 1.25, [1, 2, 3, 4], measure=timings({2: (1.1, 1.2), 3: (1.3, 1.2), 4: (1.24, 1.3)}, []))
    assert "\n" not in str(e.value)


def test_impossible_or_meaningless_targets_fail_before_timing(model):
    calls: list = []
    with pytest.raises(GhostsearchError, match="needs at least 5 of 6 blocks removed .* only 4 may be removed"):
        speedup_k(model, 4.0, [1, 2, 3, 4], measure=timings({}, calls))
    with pytest.raises(GhostsearchError, match="above 1"):
        speedup_k(model, 1.0, [1, 2, 3, 4], measure=timings({}, calls))
    assert calls == []


def test_on_real_timings_the_answer_agrees_with_its_own_report(model):
    try:
        k, rep = speedup_k(model, 1.1, [1, 2, 3, 4], seq_len=16, decode_tokens=4, repeats=2)
    except GhostsearchError as e:  # a loaded machine may time none of them that fast: then it says so
        assert "no k timed reached it" in str(e)
        return

    def slower(j):
        row = rep.row(list(range(5 - j, 5)))
        return min(row.at("prefill", 1).speedup, row.at("decode", 1).speedup)

    assert slower(k) >= 1.1 and all(slower(j) < 1.1 for j in range(1, k))
