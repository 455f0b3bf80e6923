"""``ghostsearch pool ceiling`` (pool/standin.py): stand-in scorers at a set cost behind the real broker,
client and searcher, on a real local Ray. Its refusals are one line before Ray; its numbers are checked
against what sleeping stand-ins allow (never above the ideal N / cost; above half of it only when both of
two stand-ins work at once) and the searcher's answer against the stand-in's own value of the set it found."""

from __future__ import annotations

import json

import pytest

from ghostsearch.cli.main import main


@pytest.mark.parametrize(
    "argv, words",
    [
        (["--actors", "0"], "--actors '0'"),
        (["--actors", "2,x"], "--actors '2,x'"),
        (["--row-ms", "-1"], "--row-ms"),
        (["--blocks", "4", "k=4"], "k=4 leaves too few"),
    ],
)
def test_ceiling_refuses_in_one_line_before_ray(argv, words, capsys):
    import ray

    assert main(["pool", "ceiling", *argv]) == 2
    err = capsys.readouterr().err.strip()
    assert words in err and len(err.splitlines()) == 1
    assert not ray.is_initialized()


@pytest.mark.slow
def test_ceiling_measures_a_pool_on_real_ray(capsys):
    import ray

    from ghostsearch.pool.standin import standin_class

    if ray.is_initialized():
        pytest.skip("this process already has a Ray (the command would join it)")
    # 8 rows x 2.5 ms + 20 ms a call = 40 ms a candidate: ideal 25/s a stand-in, 50/s for 2
    argv = ["pool", "ceiling", "--actors", "2", "--row-ms", "2.5", "--call-ms", "20", "--seconds", "0.6"]
    argv += ["--blocks", "12", "k=2", "calibration.n_seq=8", "pool.dashboard=false", "searcher=greedy"]
    assert main([*argv, "--floor", "5", "--profile"]) == 0
    text = capsys.readouterr().out
    out = text.splitlines()
    tp, search, direct, relay, look = (json.loads(line) for line in out if line.startswith("{"))
    assert (tp["part"], tp["actors"], search["part"]) == ("throughput", 2, "greedy")
    assert tp["ideal_per_s"] == pytest.approx(50.0)
    # a stand-in cannot answer faster than it sleeps; above half the ideal, both stand-ins worked at once
    assert 0.6 * tp["ideal_per_s"] < tp["evals_per_s"] <= 1.02 * tp["ideal_per_s"]
    assert 0.6 < tp["busy_share"] <= 1.0 and tp["broker_ms_per_eval"] > 0 and tp["scorer_calls"] >= 2
    # the searcher ran through the pool to its end (greedy at k = 2 of 12: 12 + 11 evaluations), and its
    # answer is the stand-in's own value of the set it found
    value = standin_class(12, 8).__ray_actor_class__._values([(tuple(search["set"]), 8)])[0]
    assert search["evals"] == search["calls"] == 23 and search["value"] == pytest.approx(value)
    # Ray's floor: 5 bare rounds of greedy's mean share of a pool call, direct and through a relay actor
    assert [r["part"] for r in (direct, relay, look)] == ["floor-direct", "floor-relay", "floor-look"]
    share = 1000 * search["busy_share"] * search["wall"] / search["pool_calls"]
    for r in (direct, relay):
        assert r["looks"] == 5 and r["share_ms"] == pytest.approx(share) and r["ms_per_look"] >= 0.95 * share
    assert look["ms_per_look"] == pytest.approx(search["ms_per_call"])
    # the profile switched on in the broker's event loop sees the broker's own method
    broker = text.split("--- profile, throughput")[1].split("--- the driver")[0]
    assert "evaluate_many" in broker
    table = [line for line in out if line.startswith("| ")]
    assert len(table) == 2 and table[1].startswith("| 2 | ") and "| greedy |" in table[1]
    assert table[0].endswith("look ms: search / relay / direct (share) |")
    assert not ray.is_initialized()  # the command's session stopped the Ray it started
