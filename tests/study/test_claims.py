"""The study's verdicts (ghostsearch.study.claims) on small synthetic runs whose answers are known."""

import math
from dataclasses import replace

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from ghostsearch.core.comparison_row import ComparisonRow, to_arrow
from ghostsearch.stats.bootstrap import ItemMatrix, item_bootstrap
from ghostsearch.study.claims.base import (
    ClaimRow,
    Hypothesis,
    decide,
    distinct,
    family,
    jaccard,
    recovery_comparison,
    render,
    verdict,
)
from ghostsearch.study.claims.search_paper import (
    all_claims,
    calibration_vs_accuracy,
    cost_of_search,
    objective_beats_search,
    objective_shapes_sets,
    paper_rho,
    search_spread,
)

TASKS = ["boolq", "piqa", "hellaswag", "winogrande", "arc_easy", "arc_challenge", "openbookqa", "social_iqa"]
N_DOC = 60
N_ITEMS = len(TASKS) * N_DOC


def synthetic(
    correct_fn,
    searchers=("ga", "bo", "beam"),
    seeds=(0, 1),
    objectives=("perplexity", "margin"),
    k=4,
    recoveries=("none",),
    removed_fn=None,
    calib_fn=None,
    used_fn=None,
):
    """Comparison rows (one per cell and recovery, plus the dense row) and their item rows;
    correct_fn(objective, searcher, seed, recovery) -> 0/1 array over the items (task-major)."""
    rows = [
        {
            "cell": "dense",
            "searcher": "dense",
            "objective": None,
            "k": 0,
            "seed": None,
            "removed": [],
            "calib_value": None,
            "recovery": "none",
            "mean_acc": 0.9,
            "eval_key": "dense",
            "wall_seconds": None,
        }
    ]
    items = {"key": [], "task": [], "doc": [], "gold": [], "pred": []}
    own = {}  # by default every (objective, searcher, seed) finds its own set: each cell a distinct model
    if removed_fn is None:

        def removed_fn(obj, s, sd):
            i = own.setdefault((obj, s, sd), len(own))
            return [i, i + 40, i + 80, i + 120]

    for rec in recoveries:
        for obj in objectives:
            for s in searchers:
                for sd in seeds:
                    key = f"{obj}-{s}-{sd}-{rec}"
                    c = np.asarray(correct_fn(obj, s, sd, rec), dtype=int)
                    rows.append(
                        {
                            "cell": f"{s}-{obj}-k{k}-s{sd}",
                            "searcher": s,
                            "objective": obj,
                            "k": k,
                            "seed": sd,
                            "removed": removed_fn(obj, s, sd),
                            "calib_value": calib_fn(obj, s, sd) if calib_fn else 1.0,
                            "recovery": rec,
                            "budget_used": used_fn(s) if used_fn else 1.0,
                            "wall_seconds": 5.0,
                            "eval_key": key,
                            "mean_acc": float(c.reshape(len(TASKS), N_DOC).mean(axis=1).mean()),
                        }
                    )
                    items["key"] += [key] * N_ITEMS
                    items["task"] += [t for t in TASKS for _ in range(N_DOC)]
                    items["doc"] += [d for _ in TASKS for d in range(N_DOC)]
                    items["gold"] += [1] * N_ITEMS
                    items["pred"] += c.tolist()
    return [ComparisonRow.from_dict(r) for r in rows], ItemMatrix.from_table(pa.table(items))


def one(claims, **match):
    got = [c for c in claims if all(getattr(c, k) == v for k, v in match.items())]
    assert len(got) == 1, claims
    return got[0]


# ---------------------------------------------------------------- the rule
@pytest.mark.parametrize(
    "lo, hi, t, d, want",
    [
        (0.001, 1.0, 0.0, ">", "holds"),
        (0.0, 1.0, 0.0, ">", "within noise"),  # touching the threshold
        (-1.0, 0.0, 0.0, ">", "within noise"),
        (-1.0, -0.001, 0.0, ">", "does not hold"),
        (-0.5, 0.5, 0.0, ">", "within noise"),
        (0.01, 0.029, 0.03, "<", "holds"),
        (0.02, 0.03, 0.03, "<", "within noise"),
        (0.03, 0.05, 0.03, "<", "within noise"),
        (0.031, 0.05, 0.03, "<", "does not hold"),
        (math.nan, 0.05, 0.03, "<", "not computed"),
        (None, None, 0.0, ">", "not computed"),
    ],
)
def test_verdict_boundaries(lo, hi, t, d, want):
    assert verdict(lo, hi, t, d) == want


def test_verdict_rejects_unknown_direction():
    with pytest.raises(ValueError):
        verdict(0.0, 1.0, 0.0, ">=")


# ---------------------------------------------------------------- items and bootstrap


def test_identical_models_give_exactly_zero():
    rng = np.random.default_rng(1)
    c = rng.integers(0, 2, N_ITEMS)
    _, m = synthetic(lambda *a: c, searchers=("ga",), seeds=(0,))
    point, lo, hi = item_bootstrap(m, lambda acc: acc["perplexity-ga-0-none"] - acc["margin-ga-0-none"])
    assert (point, lo, hi) == (0.0, 0.0, 0.0)


def test_paired_bootstrap_is_narrower_for_correlated_models():
    rng = np.random.default_rng(2)
    a = rng.integers(0, 2, N_ITEMS)
    b = a.copy()
    flip = rng.choice(N_ITEMS, N_ITEMS // 20, replace=False)
    b[flip] = 1 - b[flip]
    _, m = synthetic(lambda obj, *r: a if obj == "perplexity" else b, searchers=("ga",), seeds=(0,))
    diff = lambda acc: acc["perplexity-ga-0-none"] - acc["margin-ga-0-none"]
    p, lo, hi = item_bootstrap(m, diff, n_boot=1000)
    pu, lou, hiu = item_bootstrap(m, diff, n_boot=1000, paired=False)
    assert p == pu == pytest.approx(m.mean_acc("perplexity-ga-0-none") - m.mean_acc("margin-ga-0-none"))
    assert lo <= p <= hi and lou <= pu <= hiu
    assert hi - lo < 0.5 * (hiu - lou)


# ---------------------------------------------------------------- the claims
def test_objective_beats_search_holds_when_the_objective_decides():
    rng = np.random.default_rng(4)
    rows, m = synthetic(lambda obj, *r: rng.random(N_ITEMS) < (0.7 if obj == "perplexity" else 0.4))
    c = one(family(objective_beats_search(rows, m, n_boot=1000)))
    assert c.condition == "k=4, recovery none"
    assert 0.2 < c.ours < 0.35 and c.lo > 0.15
    assert c.verdict == "holds" and c.p_adj < 0.01


def test_objective_blind_searchers_are_left_out_of_the_objective_effect():
    """lorp finds one set under both objectives (its accuracies are the same model's): it is left
    out of the objective effect, which then comes from ga alone; ga finds different sets."""
    rng = np.random.default_rng(9)
    lorp = rng.random(N_ITEMS) < 0.5
    rows, m = synthetic(
        lambda obj, s, *r: lorp if s == "lorp" else rng.random(N_ITEMS) < (0.7 if obj == "perplexity" else 0.4),
        searchers=("ga", "lorp", "bo"),
        seeds=(0,),
        removed_fn=lambda o, s, sd: [9, 10] if s == "lorp" else sets_by_objective(o, s, sd) + [{"ga": 20, "bo": 21}[s]],
    )
    from ghostsearch.study.claims.search_paper import objective_blind

    assert objective_blind(rows) == {"lorp"}
    c = one(family(objective_beats_search(rows, m, n_boot=400)))
    assert c.ours > 0.15  # ga's and bo's 0.3 objective effect, not diluted by lorp's 0


def searcher_noise(obj, s, sd, rec):
    """The same answers for every objective and seed; searcher bo loses 5%, beam 10% of each task's items."""
    base = np.tile(np.arange(N_DOC) % 2 == 0, len(TASKS)).astype(int)  # 0.5 on every task
    drop = {"ga": 0, "bo": 3, "beam": 6}[s]  # of the 30 right answers per task
    c = base.reshape(len(TASKS), N_DOC).copy()
    c[:, 0 : 2 * drop : 2] = 0
    return c.ravel()


def test_objective_beats_search_does_not_hold_when_only_search_matters():
    rows, m = synthetic(searcher_noise)
    c = one(family(objective_beats_search(rows, m, n_boot=1000)))
    assert c.ours == pytest.approx(0.0 - 0.1, abs=0.01)  # objective effect exactly 0, search effect 6/60
    assert c.hi < 0 and c.verdict == "does not hold"


def test_search_spread():
    rows, m = synthetic(searcher_noise)
    got = family(search_spread(rows, m, n_boot=1000))
    assert len(got) == 2
    for c in got:
        assert c.ours == pytest.approx(0.1, abs=0.01) and c.lo > 0.03 and c.verdict == "does not hold"
        assert c.level == pytest.approx(1 - 0.05 / 2) or c.level == pytest.approx(1 - 0.05)  # Holm steps
    c0 = np.tile(np.arange(N_DOC) % 3 == 0, len(TASKS))
    rows, m = synthetic(lambda *a: c0)
    c = one(family(search_spread(rows, m, n_boot=200)), condition="margin, k=4, recovery none")
    assert (c.ours, c.lo, c.hi, c.verdict) == (0.0, 0.0, 0.0, "holds")


def test_search_spread_makes_no_verdict_on_two_distinct_models():
    """ga and bo found the same set under the same repair: one model, whatever the items say."""
    rows, m = synthetic(
        searcher_noise,
        searchers=("ga", "bo", "beam"),
        seeds=(0,),
        objectives=("margin",),
        removed_fn=lambda o, s, sd: [1, 2] if s in ("ga", "bo") else [3, 4],
    )
    c = one(search_spread(rows, m, n_boot=100))
    assert c.verdict == "no verdict" and c.note.startswith("2 distinct evaluated models")


def sets_by_objective(obj, s, sd):
    return [1, 2, 3, 4] if obj == "perplexity" else [5, 6, 7, 8]


SIX = ("ga", "bo", "beam", "cbo", "greedy", "oneshot")


def test_objective_shapes_sets_holds_for_disjoint_sets_and_ignores_fastblock():
    """Six objective-guided searchers, each with one set per objective: 2^6 = 64 relabellings within
    searchers; the observed labelling and its mirror image are the two most extreme: p = 2/64."""
    rows, _ = synthetic(
        lambda *a: np.ones(N_ITEMS),
        searchers=SIX + ("fastblock",),
        recoveries=("none", "ghosted"),
        removed_fn=lambda obj, s, sd: [5, 6, 7, 8] if s == "fastblock" else sets_by_objective(obj, s, sd),
    )
    c = one(family(objective_shapes_sets(rows)))
    assert c.condition == "k=4 (all recoveries)" and "12 cells" in c.note and "64 relabellings" in c.note
    assert c.ours == 1.0 and c.p == pytest.approx(2 / 64) and c.verdict == "holds"


def test_objective_shapes_sets_is_descriptive_when_too_few_relabellings():
    """The pilot's shape: 3 searchers, one set per objective each: 8 relabellings, p >= 1/8 > 0.05."""
    rows, _ = synthetic(lambda *a: np.ones(N_ITEMS), removed_fn=lambda obj, s, sd: sets_by_objective(obj, s, sd))
    c = one(objective_shapes_sets(rows))
    assert c.verdict == "descriptive" and c.p is None and "8 relabellings" in c.note


def test_objective_shapes_sets_hand_computed_and_no_difference():
    sets = {("perplexity", 0): [1, 2], ("perplexity", 1): [1, 3], ("margin", 0): [1, 2], ("margin", 1): [4, 5]}
    rows, _ = synthetic(lambda *a: np.ones(N_ITEMS), searchers=("ga",), removed_fn=lambda o, s, sd: sets[(o, sd)])
    # same: J({1,2},{1,3}) = 1/3, J({1,2},{4,5}) = 0; different: 1, 0, 1/3, 0
    assert one(objective_shapes_sets(rows, n_boot=200)).ours == pytest.approx((1 / 3 + 0) / 2 - (4 / 3) / 4)
    rows, _ = synthetic(lambda *a: np.ones(N_ITEMS), searchers=SIX, seeds=(0,), removed_fn=lambda *a: [1, 2, 3, 4])
    c = one(family(objective_shapes_sets(rows)))
    assert (c.ours, c.p, c.verdict) == (0.0, 1.0, "within noise")


def test_seeds_that_found_the_same_set_count_once():
    """Deterministic searchers give every seed the same set: those cells are one observation.
    ga removes {1,2} and bo {3,4} under both objectives: within an objective J(ga, bo) = 0, across
    objectives the mean is 1/2, so -1/2 (counting each seed, a set paired with its copy: -1/6)."""
    rows, _ = synthetic(
        lambda *a: np.ones(N_ITEMS), searchers=("ga", "bo"), removed_fn=lambda o, s, sd: [1, 2] if s == "ga" else [3, 4]
    )
    assert len(distinct([r for r in rows if not r.is_dense])) == 2  # {1,2} and {3,4}, unrepaired
    assert one(objective_shapes_sets(rows, n_boot=200)).ours == pytest.approx(-0.5)
    twice = [
        replace(r, seed=sd, cell=r.cell + f"-s{sd}") for r in calib_rows({"perplexity": "opposite"}) for sd in (0, 1)
    ]
    assert [c.condition for c in calibration_vs_accuracy(twice, n_boot=100)[:-1]] == [
        "perplexity, k=4, recovery none (n=5)"
    ]


def test_jaccard():
    assert jaccard([1, 2, 3], [2, 3, 4]) == 0.5 and jaccard([], []) == 1.0


def test_paper_rho_sign_convention():
    # best (lowest) calibration value has the worst accuracy: opposite orders, paper rho = -1
    assert paper_rho([1, 2, 3, 4, 5], [0.1, 0.2, 0.3, 0.4, 0.5])[0] == pytest.approx(-1.0)
    assert paper_rho([1, 2, 3, 4, 5], [0.5, 0.4, 0.3, 0.2, 0.1])[0] == pytest.approx(1.0)
    # by hand: calib ranks 1 2 3, accuracy ranks 2 1 3, d = -1 1 0, rho = 1 - 6*2/(3*8) = 0.5; paper: -0.5
    rho, lo, hi = paper_rho([1.0, 2.0, 3.0], [0.2, 0.1, 0.3])
    assert rho == pytest.approx(-0.5) and lo <= rho <= hi


def calib_rows(order: dict):
    """5 searchers x 1 seed; accuracy rises with the searcher index; calib_value rises ("opposite")
    or falls ("agree") with it, per objective."""
    acc = {s: 0.3 + 0.05 * i for i, s in enumerate("abcde")}
    return [
        ComparisonRow.from_dict(
            {
                "cell": f"{s}-{o}",
                "searcher": s,
                "objective": o,
                "k": 4,
                "seed": 0,
                "recovery": "none",
                "removed": [i],
                "mean_acc": a,
                "calib_value": (10 + i) if order[o] == "opposite" else (10 - i),
            }
        )
        for o in order
        for i, (s, a) in enumerate(acc.items())
    ]


@pytest.mark.parametrize(
    "order, per",
    [
        ({"perplexity": "opposite", "margin": "opposite"}, ["holds", "holds"]),
        ({"perplexity": "agree", "margin": "agree"}, ["does not hold", "does not hold"]),
        ({"perplexity": "opposite", "margin": "agree"}, ["does not hold", "holds"]),  # margin first
    ],
)
def test_calibration_vs_accuracy(order, per):
    """n=5 distinct models in a perfect order: exact two-sided p = 2/5! = 0.0167 each, Holm over the
    two rows: 0.033 <= 0.05, both decided."""
    got = family(calibration_vs_accuracy(calib_rows(order), n_boot=300))
    assert [c.verdict for c in got[:-1]] == per
    for c in got[:-1]:
        want = -1.0 if c.verdict == "holds" else 1.0
        assert (c.ours, c.lo, c.hi) == pytest.approx((want, want, want))
        assert c.p == pytest.approx(2 / 120) and c.p_adj == pytest.approx(4 / 120)
    assert got[-1].verdict == "reported"


def test_calibration_vs_accuracy_without_verdict_on_few_models():
    rows = [r for r in calib_rows({"perplexity": "opposite"}) if r.searcher in "abcd"]
    c = calibration_vs_accuracy(rows)[0]
    assert c.verdict == "descriptive" and "2/4!" in c.note  # the smallest p, 2/24, cannot reach 0.05
    c = calibration_vs_accuracy(rows[:2])[0]
    assert c.verdict == "no verdict" and c.ours is None


def test_cost_of_search():
    c0 = np.tile(np.arange(N_DOC) % 2 == 0, len(TASKS))
    rows, m = synthetic(
        lambda *a: c0,
        searchers=("oneshot", "fastblock", "ga", "bo"),
        recoveries=("none", "ghosted"),
        used_fn=lambda s: 100.0 if s in ("ga", "bo") else 10.0,
    )
    got = family(cost_of_search(rows, m, n_boot=200))
    ratio = one(
        got,
        claim="complex search buys little: compute ratio",
        verdict="reported",
        condition="perplexity: evaluations complex 400 / simple 40",
    )
    assert ratio.ours == pytest.approx(10.0)  # cells counted once, not once per recovery
    gains = [c for c in got if c.claim.endswith("accuracy gain")]
    assert len(gains) == 4 and all((c.ours, c.lo, c.hi, c.verdict) == (0.0, 0.0, 0.0, "holds") for c in gains)


def test_recovery_comparison():
    a = np.tile(np.arange(N_DOC) % 2 == 0, len(TASKS)).astype(int)
    b = a.copy()
    b[::4] = 0  # half of a's right answers lost
    _, m = synthetic(lambda obj, *r: a if obj == "perplexity" else b, searchers=("ga",), seeds=(0,))
    ka, kb = "perplexity-ga-0-none", "margin-ga-0-none"
    got = family(
        recovery_comparison(
            m,
            [
                ("ghosted", ka, "replaceme", kb, "ghosted beats replaceme"),
                ("replaceme", kb, "ghosted", ka, "x"),
                ("x", ka, "y", "missing", "x"),
            ],
        )
    )
    assert got[0].ours == pytest.approx(0.25) and got[0].verdict == "holds"
    assert got[1].ours == pytest.approx(-0.25) and got[1].verdict == "does not hold"
    assert got[2].verdict == "not computed"


def test_without_items_the_item_claims_are_not_computed():
    rows, _ = synthetic(lambda *a: np.ones(N_ITEMS), removed_fn=lambda o, s, sd: sets_by_objective(o, s, sd))
    got = all_claims(rows, None, n_boot=100)
    item_claims = [
        c
        for c in got
        if c.claim.startswith(("objective matters", "search algorithms", "complex search"))
        and "compute ratio" not in c.claim
    ]
    assert item_claims and all(c.verdict == "not computed" and c.note == "no per-item data" for c in item_claims)
    assert one(got, claim="objectives shape the removed set").verdict == "descriptive"  # 8 relabellings
    md = render(got)
    assert "| no per-item data | – | not computed |" in md


def test_render():
    md = render(
        [
            ClaimRow(claim="c", condition="k=4", paper="p|q", ours=0.12345, lo=-0.0, hi=0.2, rule="r", verdict="holds"),
            ClaimRow(
                claim="d",
                condition="k=6",
                paper="",
                ours=0.05,
                lo=0.01,
                hi=0.09,
                rule="r",
                verdict="",
                p=0.004,
                tested=Hypothesis(0.0, ">", np.linspace(0.0, 0.1, 101)),
            ),
        ]
    )
    assert md.splitlines() == [
        "| claim | condition | paper | ours [interval] | p (Holm-adjusted) | verdict |",
        "|---|---|---|---|---|---|",
        "| c | k=4 | p\\|q | 0.123 [0.000, 0.200] | – | holds |",
        "| d | k=6 |  | 0.050 [0.003, 0.098] | 0.004 (raw 0.004) | holds |",
    ]


def test_decide_and_family_follow_holm():
    assert decide(0.1, 0.049, 0.0, ">") == "holds" and decide(-0.1, 0.049, 0.0, ">") == "does not hold"
    assert decide(0.1, 0.051, 0.0, ">") == "within noise" and decide(0.01, 0.01, 0.03, "<") == "holds"
    rows = [
        ClaimRow(
            claim=str(i),
            condition="",
            paper="",
            ours=0.1,
            lo=0.0,
            hi=0.2,
            rule="",
            verdict="",
            p=p,
            tested=Hypothesis(0.0, ">", se=0.05, n_items=80),
        )
        for i, p in enumerate([0.01, 0.02, 0.04])
    ]
    got = family(rows)  # Holm: 0.03, 0.04, 0.04: all decided; Bonferroni would keep only the first
    assert [c.p_adj for c in got] == pytest.approx([0.03, 0.04, 0.04])
    assert [c.verdict for c in got] == ["holds"] * 3
    assert all(
        set(c.to_dict())
        == {"claim", "condition", "paper", "ours", "lo", "hi", "rule", "verdict", "p", "p_adj", "level", "family"}
        for c in got
    )  # the test's inputs are not written
    got = family([replace(r, p=p) for r, p in zip(rows, [0.01, 0.3, 0.04])])
    assert [c.verdict for c in got] == ["holds", "within noise", "within noise"]
    assert "MDD" in got[1].note and "items per model would detect 0.03" in got[1].note


def test_study_table_prints_claims(tmp_path):
    """report.study_table (what bench/study_table.py prints): the tables, the claims, the rule."""
    from ghostsearch.study.report.study_table import study_report

    rng = np.random.default_rng(5)
    rows, _ = synthetic(
        lambda obj, *r: rng.random(N_ITEMS) < (0.7 if obj == "perplexity" else 0.4),
        removed_fn=lambda o, s, sd: sets_by_objective(o, s, sd),
    )
    pq.write_table(to_arrow(rows), tmp_path / "comparison.parquet")
    out = study_report(str(tmp_path))
    assert "## Claims" in out and "| no per-item data | – | not computed |" in out and "Verdict rule" in out
    assert "### recovery none, objective margin" in out
    items = [
        {"key": r.eval_key, "task": t, "doc": d, "gold": 1, "pred": int(rng.random() < 0.5)}
        for r in rows
        for t in TASKS[:2]
        for d in range(20)
    ]
    pq.write_table(pa.Table.from_pylist(items), tmp_path / "eval_items.parquet")
    out = study_report(str(tmp_path))
    assert "not computed" not in out.split("## Claims")[1].split("calibration ranking")[0]


def test_search_spread_is_cross_fitted_so_noise_alone_does_not_make_searchers_differ():
    """Six searchers of identical true accuracy (every answer a fair coin), 10 items a task: the
    in-sample best-minus-worst is large (the maximum of noisy accuracies), the cross-fitted spread
    is centred on 0 and its verdict is never "does not hold" for searchers that are truly alike."""
    in_sample, crossed, verdicts = [], [], []
    for inst in range(12):
        rng = np.random.default_rng(100 + inst)
        rows, m = synthetic(
            lambda *a: rng.random(N_ITEMS) < 0.5,  # noqa: B023  (called within synthetic)
            searchers=("ga", "bo", "beam", "cbo", "greedy", "oneshot"),
            seeds=(0,),
            objectives=("margin",),
        )
        sub = m.subset(np.flatnonzero(m.docs < 10))  # 10 items a task, as in the reduced study
        c = one(search_spread(rows, sub, n_boot=300))
        in_sample.append(float(c.note.split()[-1]))
        crossed.append(c.ours)
        verdicts.append(c.verdict)
    assert np.mean(in_sample) > 0.1  # ~2.5 standard errors of an 80-item accuracy
    assert abs(np.mean(crossed)) < 0.03
    assert "does not hold" not in verdicts


def test_split_halves_are_disjoint_stratified_and_seeded():
    rows, m = synthetic(lambda *a: np.ones(N_ITEMS))
    a, b = m.split(3)
    assert a.n_items + b.n_items == m.n_items and a.tasks == b.tasks == tuple(sorted(TASKS))
    assert all(len(i) == N_DOC // 2 for i in a.task_items() + b.task_items())
    pa_ = set(zip(np.array(a.tasks)[a.task_of], a.docs))
    assert not pa_ & set(zip(np.array(b.tasks)[b.task_of], b.docs))
    assert np.array_equal(m.split(3)[0].docs, a.docs) and not np.array_equal(m.split(4)[0].docs, a.docs)


def test_cross_fitted_claims_with_one_item_a_task_are_not_computed():
    """One item a task cannot be split in halves that both keep the task (a compare with
    eval.max_items=8 over the eight tasks raised ZeroDivisionError in the report): the cross-fitted
    claims say so instead of failing or deciding."""
    from ghostsearch.study.claims.base import NO_SPLIT
    from ghostsearch.study.claims.search_paper import cost_of_search

    half = np.tile(np.arange(N_DOC) % 2 == 0, len(TASKS))
    rows, m = synthetic(lambda *a: half, searchers=("ga", "bo", "fastblock"))
    first = np.array([idx[0] for idx in m.task_items()])
    small = m.subset(first)
    assert not small.splittable() and m.splittable()
    for claims in (
        objective_beats_search(rows, small, n_boot=50),
        search_spread(rows, small, n_boot=50),
        cost_of_search(rows, small, n_boot=50),
    ):
        tested = [c for c in claims if c.note == NO_SPLIT]
        assert tested and all(c.verdict not in ("holds", "does not hold") for c in claims)


# ---------------------------------------------------------------- the papers' claims (moved from bench/)
def test_method_comparison_pairs_a_method_with_its_rivals_per_k():
    """claims.method_comparison (was bench/study_table.py's lorp_claims, which passes the LoRP paper's
    names): unrepaired perplexity cells of seed 0, one paired row per rival and k, the better items
    giving 'holds' after the family's adjustment."""
    from ghostsearch.study.claims.base import method_comparison

    paper = "LoRP beats ShortGPT / LLM-Streamline"

    def lorp_claims(rows, m):
        return method_comparison(rows, m, "lorp", ["shortgpt", "streamline"], paper)

    rng = np.random.default_rng(3)
    rows, m = synthetic(
        lambda obj, s, sd, rec: rng.random(N_ITEMS) < (0.8 if s == "lorp" else 0.3),
        searchers=("lorp", "shortgpt", "streamline"),
        seeds=(0, 1),
        objectives=("perplexity",),
    )
    got, lines = lorp_claims(rows, m)
    assert [r.condition for r in got] == [
        "lorp (k=4, [0, 40, 80, 120]) - shortgpt ([2, 42, 82, 122])",
        "lorp (k=4, [0, 40, 80, 120]) - streamline ([4, 44, 84, 124])",
    ]
    assert all(r.paper == paper for r in got)
    assert [r.verdict for r in family(got)] == ["holds", "holds"]
    assert lines == ["k=4, unrepaired WikiText-2 perplexity: lorp –, shortgpt –, streamline – (lowest: lorp)"]
    assert [r.verdict for r in lorp_claims(rows, None)[0]] == ["not computed", "not computed"]


def test_ghosted_claims_rows_and_lines():
    """claims.ghosted_claims (was bench/ghosted_study.py's): Ghosted against each other repair of a set,
    the saturation and calibration-data rows, the antisymmetric share reported over sets."""
    from ghostsearch.study.claims.ghosted_paper import ANTISYM_PAPER, ghosted_claims

    def row(role, method, variant, key, n_seq=32, **kw):
        base = {"role": role, "set": "greedy", "k": 4, "removed": [1, 2, 3, 4], "method": method}
        return {**base, "variant": variant, "key": key, "n_seq": n_seq, "ppl_wikitext2": 50.0, **kw}

    rows = [
        row("main", "ghosted", "dense", "g", antisymmetric_share_w=0.2, antisymmetric_share_m=0.6, mean_acc=0.5),
        row("main", "replaceme", "lstsq", "r"),
        row("main", "none", None, "n", ppl_wikitext2=90.0),
        row("saturation", "ghosted", "dense", "g64", n_seq=64, mean_acc=0.5),
        row("dataset", "ghosted", "dense", "w", mean_acc=0.5),
    ]
    keys = ["g", "r", "n", "g64", "w"]
    items = {"key": [], "task": [], "doc": [], "gold": [], "pred": []}
    rng = np.random.default_rng(0)
    for k in keys:
        c = rng.random(N_ITEMS) < (0.9 if k != "n" else 0.2)
        items["key"] += [k] * N_ITEMS
        items["task"] += [t for t in TASKS for _ in range(N_DOC)]
        items["doc"] += [d for _ in TASKS for d in range(N_DOC)]
        items["gold"] += [1] * N_ITEMS
        items["pred"] += c.astype(int).tolist()
    got, lines = ghosted_claims(rows, ItemMatrix.from_table(pa.table(items)))
    assert [r.condition for r in got] == [
        "ghosted (greedy k=4) - replaceme lstsq",
        "ghosted (greedy k=4) - none",
        "acc(64) - acc(32), greedy k=4",
        "ghosted, greedy k=4",
        "ghosted, 1 sets",
    ]
    assert got[-1].paper == ANTISYM_PAPER and got[-1].verdict == "reported" and got[-1].ours == 0.2
    assert lines[0].startswith("greedy k=4 [1, 2, 3, 4]: WikiText-2 perplexity ghosted 50.0, replaceme lstsq 50.0")
    assert lines[1].startswith("saturation (greedy k=4): 32 seq") and lines[2].startswith("calibration data")
    without, more = ghosted_claims(rows, None)  # no items: the pairs not computed, no saturation/data rows
    assert [r.verdict for r in without] == ["not computed", "not computed", "reported"] and len(more) == 1
