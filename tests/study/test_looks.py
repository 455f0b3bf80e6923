"""Adaptive evaluation (ghostsearch/stats/looks.py, compare.evaluate_finalists with eval.looks): a large
contrast is decided at the first look and its models stop, a null one runs on; over simulated null
studies the family-wise error across all looks stays at alpha; a real run on a tiny model records
the draw, the looks and the items per model, and a longer rerun evaluates only the items its
per-item rows lack (a rerun of the same design: none)."""

from __future__ import annotations

import json
import math

import numpy as np
import pyarrow.parquet as pq
import pytest

from ghostsearch.stats.looks import Contrast, Design

TASKS = ("arc_easy", "piqa")


def items_of(n):
    return [(TASKS[i % 2], i // 2) for i in range(n)]


def bernoulli(rng, p, its):
    return {it: float(rng.random() < p) for it in its}


def test_a_large_contrast_stops_at_the_first_look_a_null_one_runs_on():
    rng = np.random.default_rng(0)
    its = items_of(600)
    a = bernoulli(rng, 0.75, its)
    ones, zeros = [it for it in its if a[it] == 1], [it for it in its if a[it] == 0]
    flip = set(ones[::20][:12]) | set(zeros[::8][:12])  # 12 right answers made wrong and 12 wrong made right
    correct = {"A": a, "B": bernoulli(rng, 0.35, its), "C": {it: 1 - v if it in flip else v for it, v in a.items()}}
    d = Design([150, 300, 600], [Contrast("A - B", "A", "B"), Contrast("A - C", "A", "C")])
    d.test(0, correct, its[:150])
    assert d.decided() == [True, False] and d.open_keys() == {"A", "C"}  # B stops consuming items
    d.test(1, correct, its[:300])
    d.test(2, correct, its[:600])
    rows = d.table({"A": 600, "B": 150, "C": 600}, 3)
    assert rows[0].decided_at_look == 1 and rows[0].sign == 1 and rows[0].look_items == 150
    assert rows[1].decided is False and rows[1].decided_at_look is None and len(rows[1].z_by_look) == 3
    assert np.isnan(rows[0].z_by_look[1])  # a decided contrast is not tested again


@pytest.mark.parametrize("spending", ["obrien-fleming", "pocock"])
def test_family_wise_error_over_all_looks_is_at_most_alpha(spending):
    """600 null studies (three models with equal accuracies, two contrasts, looks 100/200/400):
    any rejection at any look counts; the rate is <= 0.05 plus two Monte-Carlo standard errors."""
    rng = np.random.default_rng(1)
    its = items_of(400)
    n_sim, errors = 600, 0
    for _ in range(n_sim):
        c = {m: bernoulli(rng, 0.6, its) for m in "ABC"}
        d = Design([100, 200, 400], [Contrast("A - B", "A", "B"), Contrast("A - C", "A", "C")], spending=spending)
        for j, n in enumerate(d.looks):
            d.test(j, c, its[:n])
            if d.finished():
                break
        errors += any(d.decided())
    assert errors / n_sim <= 0.05 + 2 * np.sqrt(0.05 * 0.95 / n_sim)


def test_adaptive_run_records_its_looks_and_resumes_without_reevaluating(
    tmp_path, tiny_model_dir, data_dir, monkeypatch
):
    import ghostsearch.evaluation.evaluate as evaluate
    from ghostsearch.config import load_config
    from ghostsearch.study.compare import eval_key, evaluate_finalists

    calls = []
    real = evaluate.evaluate_finalist_specs

    def counted(model, tok, cfg, specs, held_out=(), progress=False, items=None, perplexity=True):
        calls.append((len(specs), sorted((t, d) for t, ds in (items or {}).items() for d in ds), perplexity))
        return real(model, tok, cfg, specs, held_out, progress, items, perplexity)

    monkeypatch.setattr(evaluate, "evaluate_finalist_specs", counted)

    def cfg(looks):
        return load_config(
            None,
            [
                f"model={tiny_model_dir}",
                "dtype=fp32",
                "device=cpu",
                "eval.tasks=[arc_easy,piqa]",
                "eval.perplexity=[lambada]",
                "eval.ppl_seq_len=64",
                "eval.ppl_max_seq=1",
                "eval.limit=4",
                "eval.batch_size=4",
                f"eval.looks={looks}",
                "eval.max_items=8",
            ]
            + ([f"data_dir={data_dir}"] if data_dir else []),
        )

    short, full = cfg("[4]"), cfg("[4,8]")
    jobs = [([], "none"), ([1, 2, 3], "none"), ([5], "none")]
    keys = [eval_key(r, m, full) for r, m in jobs]
    assert keys == [eval_key(r, m, short) for r, m in jobs]  # looks do not change what a number means
    contrasts = [Contrast("dense - cut3", keys[0], keys[1]), Contrast("dense - cut1", keys[0], keys[2])]
    # the items first (3 models x 4 items, no perplexity), the perplexities after the looks (no items);
    # a run killed between the two resumes with the perplexities alone
    real_ppl = evaluate.perplexity_finalists

    def killed(*a, **k):
        raise KeyboardInterrupt

    monkeypatch.setattr(evaluate, "perplexity_finalists", killed)
    with pytest.raises(KeyboardInterrupt):
        evaluate_finalists(short, tmp_path, jobs, progress=False, contrasts=contrasts)
    assert len(calls) == 2 and calls[0][0] == 3 and len(calls[0][1]) == 4 and not calls[0][2]
    assert calls[1][0] == 3 and calls[1][1] == [] and calls[1][2]
    items_asked = calls[0][1]
    assert all("lambada_acc" not in json.loads((tmp_path / "evals" / f"{k}.json").read_text()) for k in keys)
    assert json.loads((tmp_path / "looks.json").read_text())["looks_run"] == 1  # each look's decisions, kept
    monkeypatch.setattr(evaluate, "perplexity_finalists", real_ppl)
    calls.clear()
    first = evaluate_finalists(short, tmp_path, jobs, progress=False, contrasts=contrasts)
    assert len(calls) == 1 and calls[0][0] == 3 and calls[0][1] == [] and calls[0][2]
    # the same perplexities as one pass of items and perplexities together (a run without contrasts)
    (tmp_path / "together").mkdir()
    together = evaluate_finalists(short, tmp_path / "together", jobs, progress=False)
    for k in keys:
        ppl = {n: v for n, v in together[k].to_dict().items() if n.startswith(("ppl_", "lambada_"))}
        assert ppl and {n: first[k].to_dict()[n] for n in ppl} == ppl and first[k].recovery == "none"
    calls.clear()
    drawn = pq.read_table(tmp_path / "items.parquet").to_pylist()  # the draw, recorded: 8 items, random
    assert [r["rank"] for r in drawn] == list(range(8))
    assert sorted(items_asked) == sorted((r["task"], r["doc"]) for r in drawn[:4])
    looks = json.loads((tmp_path / "looks.json").read_text())
    assert looks["looks_run"] == 1 and looks["items_per_model"] == {k: 4 for k in keys}
    assert [c["contrast"] for c in looks["contrasts"]] == ["dense - cut3", "dense - cut1"]
    # the longer design: only the second look's items, only for models of open contrasts, no perplexity again
    calls.clear()
    second = evaluate_finalists(full, tmp_path, jobs, progress=False, contrasts=contrasts)
    looks = json.loads((tmp_path / "looks.json").read_text())
    open_ = {
        k
        for c, row in zip(contrasts, looks["contrasts"])
        if row["decided_at_look"] != 1
        for k in (c.left_key, c.right_key)
    }
    if open_:
        assert len(calls) == 1 and calls[0][0] == len(open_) and not calls[0][2]  # no perplexity again
        assert sorted(calls[0][1]) == sorted((r["task"], r["doc"]) for r in drawn[4:])
    assert looks["items_per_model"] == {k: 8 if k in open_ else 4 for k in keys}
    for k in keys:
        rows = pq.read_table(tmp_path / "evals" / f"{k}.items.parquet").to_pylist()
        assert len({(r["task"], r["doc"]) for r in rows}) == len(rows) == looks["items_per_model"][k]
        assert second[k].items_used == len(rows)
        assert second[k].lambada_acc == first[k].lambada_acc is not None
        acc = np.mean([r["pred"] == r["gold"] for r in rows if r["task"] == "piqa"])
        assert second[k].tasks["piqa"].acc == pytest.approx(acc)
    # the same command again: nothing evaluated; the looks recorded before are replayed from the rows,
    # neither written again nor reported (looks.json never steps back to an earlier look)
    calls.clear()
    recorded = (tmp_path / "looks.json").read_text()
    seen = []

    def on_look(j, n):
        seen.append((j, n))
        assert (tmp_path / "looks.json").read_text() == recorded

    again = evaluate_finalists(full, tmp_path, jobs, progress=False, contrasts=contrasts, on_look=on_look)
    assert again == second and calls == []
    assert seen == [(looks["looks_run"] - 1, [4, 8][looks["looks_run"] - 1])]
    assert (tmp_path / "looks.json").read_text() == recorded
    # another design on the same rows (one contrast) is recorded from its first look: nothing stale is left
    evaluate_finalists(full, tmp_path, jobs, progress=False, contrasts=contrasts[:1], on_look=lambda j, n: None)
    assert [c["contrast"] for c in json.loads((tmp_path / "looks.json").read_text())["contrasts"]] == ["dense - cut3"]
    assert calls == []


def test_a_look_with_one_item_in_a_task_decides_nothing():
    """One item per task leaves no within-task variance: the stratified standard error is 0 and any
    difference would be |z| = inf. Such a look is not tested (study 2's smoke run decided LoRP -
    ShortGPT at its first look of 8 items, one a task, before this guard)."""
    from ghostsearch.stats.looks import Contrast, Design

    tasks = [f"t{i}" for i in range(8)]
    one = [(t, 0) for t in tasks]
    two = one + [(t, 1) for t in tasks]
    correct = {"L": {it: 0.0 for it in two}, "R": {it: 1.0 for it in two}}  # R right everywhere, L never
    d = Design([8, 16], [Contrast("L - R", "L", "R")])
    d.test(0, correct, one)
    assert math.isnan(d.z[0][0]) and not d.decided()[0]
    d.test(1, correct, two)  # two items a task, every difference -1: se is still 0, so still untested
    assert math.isnan(d.z[0][1]) and not d.decided()[0]
    correct["L"][("t0", 1)] = 1.0  # one agreement: a finite z, far beyond any bound
    d2 = Design([8, 16], [Contrast("L - R", "L", "R")])
    d2.test(1, correct, two)
    assert d2.z[0][1] < -5 and d2.decided()[0]


def paired(rng, its, p10, p01, p_both=0.5):
    """Two models' correctness on ``its``: left right and right wrong with probability p10, the
    reverse with p01, both right with p_both, else both wrong; the true difference is p10 - p01."""
    u = rng.random(len(its))
    a = (u < p10) | ((u >= p10 + p01) & (u < p10 + p01 + p_both))
    b = ((u >= p10) & (u < p10 + p01)) | ((u >= p10 + p01) & (u < p10 + p01 + p_both))
    return dict(zip(its, a.astype(float))), dict(zip(its, b.astype(float)))


def run_design(d, correct, its):
    for j, n in enumerate(d.looks):
        d.test(j, correct, its[:n])
        if d.finished():
            break
    return d


@pytest.mark.parametrize("spending", ["obrien-fleming", "pocock"])
def test_margin_false_within_rate_at_the_margin_is_at_most_alpha(spending):
    """eval.margin's rule (repeated intervals at alpha / m inside +-margin) where it is most often
    wrong: both contrasts' true differences sit exactly on the margin (+0.04 and -0.04), so every
    "within margin" is an error. Over 500 simulated studies the family-wise rate of any such error
    is <= 0.05 plus two Monte-Carlo standard errors; a margin rule that used the unadjusted 95%
    interval at every look would break it (checked: its rate is reported in the assertion)."""
    rng = np.random.default_rng(7)
    its = items_of(1600)
    n_sim, errors, naive = 500, 0, 0
    for _ in range(n_sim):
        a, b = paired(rng, its, 0.07, 0.03)  # a - b = +0.04
        c, e = paired(rng, its, 0.03, 0.07)  # c - e = -0.04
        correct = {"A": a, "B": b, "C": c, "E": e}
        d = run_design(
            Design(
                [400, 800, 1600],
                [Contrast("A - B", "A", "B"), Contrast("C - E", "C", "E")],
                spending=spending,
                margin=0.04,
            ),
            correct,
            its,
        )
        errors += any(w is not None for w in d.within_at)
        naive += any(
            abs(d.estimate[i][j]) + 1.96 * d.se[i][j] < 0.04
            for i in range(2)
            for j in range(3)
            if not math.isnan(d.z[i][j])
        )
    rate = errors / n_sim
    assert rate <= 0.05 + 2 * np.sqrt(0.05 * 0.95 / n_sim), (rate, naive / n_sim)


def test_margin_decides_a_near_null_contrast_early_and_never_a_large_one():
    """Two near-identical models (they disagree on 2% of items, true difference 0) are decided
    "within margin" at the first look and stop; a large contrast (+0.2) is decided "differs" at the
    first look; a medium one (+0.06, over the margin) is never "within margin" in 200 studies.
    Without a margin the near-null contrast runs to the last look."""
    rng = np.random.default_rng(3)
    its = items_of(1600)
    looks, within_early, medium_within = [400, 800, 1600], 0, 0
    for _ in range(200):
        a, b = paired(rng, its, 0.01, 0.01)
        c, e = paired(rng, its, 0.25, 0.05)
        f, g = paired(rng, its, 0.16, 0.10)
        correct = {"A": a, "B": b, "C": c, "E": e, "F": f, "G": g}
        cs = [Contrast("A - B", "A", "B"), Contrast("C - E", "C", "E"), Contrast("F - G", "F", "G")]
        d = run_design(Design(looks, cs, spending="pocock", margin=0.04), correct, its)
        within_early += d.within_at[0] == 0
        medium_within += d.within_at[2] is not None
        assert d.rejected()[1] and d.decisions[1].look == 0 and d.within_at[1] is None
    assert within_early >= 190 and medium_within == 0
    d = Design(looks, cs, spending="pocock")
    d.test(0, correct, its[:400])
    assert d.decided()[1] and not d.decided()[0] and {"A", "B"} <= d.open_keys()
    rows = run_design(Design(looks, cs, spending="pocock", margin=0.04), correct, its).table(
        {k: 400 for k in correct}, 1
    )
    assert rows[0].verdict == "within margin" and rows[0].decided_at_look == 1
    assert -0.04 < rows[0].rci[0] < rows[0].rci[1] < 0.04 and rows[1].verdict == "differs"


def test_margin_is_checked_by_the_config():
    from ghostsearch.config import load_config
    from ghostsearch.core.errors import GhostsearchError

    assert load_config(None, ["eval.margin=0.04"]).eval.margin == 0.04
    with pytest.raises(GhostsearchError, match="eval.margin"):
        load_config(None, ["eval.margin=4"])


def test_eval_share_saves_each_share_and_gives_the_same_numbers(tmp_path, tiny_model_dir, data_dir, monkeypatch):
    """eval.share=1: one evaluate_finalist_specs call per model, each model's rows on disk as soon as
    its share ends (a run killed midway keeps them), and the same numbers and rows as one share."""
    import ghostsearch.evaluation.evaluate as evaluate
    from ghostsearch.config import load_config
    from ghostsearch.study.compare import evaluate_finalists

    def cfg(share):
        return load_config(
            None,
            [
                f"model={tiny_model_dir}",
                "dtype=fp32",
                "device=cpu",
                "eval.tasks=[arc_easy,piqa]",
                "eval.perplexity=[]",
                "eval.limit=4",
                "eval.batch_size=4",
                "eval.max_items=6",
                f"eval.share={share}",
            ]
            + ([f"data_dir={data_dir}"] if data_dir else []),
        )

    jobs = [([], "none"), ([1, 2], "none"), ([4], "none")]
    real, seen = evaluate.evaluate_finalist_specs, []

    def spy(model, tok, cfg_, specs, *a, **kw):
        seen.append((len(specs), sorted(p.name for p in (tmp_path / "one" / "evals").glob("*.items.parquet"))))
        return real(model, tok, cfg_, specs, *a, **kw)

    monkeypatch.setattr(evaluate, "evaluate_finalist_specs", spy)
    (tmp_path / "one").mkdir()
    (tmp_path / "all").mkdir()
    one = evaluate_finalists(cfg(1), tmp_path / "one", jobs, progress=False)
    assert [n for n, _ in seen] == [1, 1, 1] and [len(files) for _, files in seen] == [0, 1, 2]
    together = evaluate_finalists(cfg(8), tmp_path / "all", jobs, progress=False)
    assert len(seen) == 4 and seen[-1][0] == 3
    assert {k: v.mean_acc for k, v in one.items()} == {k: v.mean_acc for k, v in together.items()}
    for k in one:
        rows = [pq.read_table(tmp_path / d / "evals" / f"{k}.items.parquet").to_pylist() for d in ("one", "all")]
        assert sorted((r["task"], r["doc"], r["pred"]) for r in rows[0]) == sorted(
            (r["task"], r["doc"], r["pred"]) for r in rows[1]
        )


@pytest.mark.parametrize("run,design", [("bench-adaptive", "eight"), ("bench-adaptive-3", "three")])
def test_replay_of_the_smollm2_bench_reproduces_its_adaptive_run(run, design):
    """docs/results/bench-adaptive and bench-adaptive-3 hold bench/adaptive.py's SmolLM2 runs (design
    eight: five models, three contrasts, looks 300/600/900/1200; design three: three models, two
    contrasts, looks 600/1200/2400; both Pocock, margin 0.04): the fixed design's per-item rows and the
    adaptive run's looks.json. Replaying the design on the rows (bench/adaptive.py --replay: no forward
    passes; ghostsearch.study.adaptive.replay) must give the live run's items per model, looks of
    decision and verdicts; and the fixed design's verdicts recomputed here, and by
    ghostsearch.study.adaptive.fixed_verdicts, must be the ones bench.json records, and so must
    ``agreement``'s rows (both designs' verdicts side by side); the pre-registered design
    (``DESIGNS``) must be the one the run recorded, down to the unrepaired models' eval keys (the
    draw and the evaluation settings)."""
    from pathlib import Path

    from ghostsearch.config import load_config
    from ghostsearch.stats import inference as stats
    from ghostsearch.stats.looks import Contrast
    from ghostsearch.study.adaptive import DESIGNS, agreement, correct_by_key, design_settings, fixed_verdicts, replay
    from ghostsearch.study.compare import eval_key

    out = Path(__file__).resolve().parents[2] / "docs" / "results" / run
    info = json.loads((out / "bench.json").read_text())
    live = json.loads((out / "adaptive" / "looks.json").read_text())
    r = replay(out, info["looks"], info["spending"], info["margin"])
    assert r["items"] == live["items_total"] == info["items_adaptive"]
    for mine, theirs in zip(r["contrasts"], live["contrasts"]):
        assert (mine["verdict"], mine["decided_at_look"]) == (theirs["verdict"], theirs["decided_at_look"])
        assert mine["estimate"] == pytest.approx(theirs["estimate"])
    rows = pq.read_table(out / "fixed" / "eval_items.parquet").to_pylist()
    corr: dict = {}
    for row in rows:
        corr.setdefault(row["key"], {})[(row["task"], row["doc"])] = float(row["pred"] == row["gold"])
    items = sorted(next(iter(corr.values())))
    tests = [
        stats.paired_test(
            [corr[c["left_key"]][i] for i in items], [corr[c["right_key"]][i] for i in items], [t for t, _ in items]
        )
        for c in live["contrasts"]
    ]
    adj = stats.holm([t.p for t in tests])
    assert [bool(p <= 0.05) for p in adj] == [c["fixed"] == "differs" for c in info["contrasts"]]
    contrasts = [Contrast(c["contrast"], c["left_key"], c["right_key"]) for c in live["contrasts"]]
    got = fixed_verdicts(correct_by_key(out / "fixed" / "eval_items.parquet"), contrasts, info["margin"])
    assert [v for v, _, _ in got] == [c["fixed"] for c in info["contrasts"]]
    assert agreement(contrasts, live["contrasts"], got) == (info["contrasts"], info["same_verdicts"])
    des = DESIGNS[design]
    assert [des[k] for k in ("looks", "spending", "margin", "seed")] == [
        info[k] for k in ("looks", "spending", "margin", "seed")
    ]
    assert [c for c, _, _ in des["contrasts"]] == [c["contrast"] for c in info["contrasts"]]
    cfg = load_config(None, design_settings(des)[0])
    plain = {n: eval_key(r, m, cfg) for n, (r, m) in des["models"].items() if m == "none"}
    assert plain == {n: k for n, k in info.get("keys", plain).items() if n in plain}
