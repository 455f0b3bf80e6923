"""ghostsearch.study.target without a model: the plan's one-line refusals (before any model work), greedy's
nested path read back from a ledger, and the last line's wording."""

from __future__ import annotations

import math

import numpy as np
import pytest

from ghostsearch.config import load_config
from ghostsearch.core.errors import GhostsearchError
from ghostsearch.rundir.ledger import Ledger
from ghostsearch.stats.certify import certify_matrix
from ghostsearch.study.target import nested_path, plan, sentence


def cfg(*over):
    return load_config(None, ["target.quality.max_ratio=1.25", "eval.perplexity=[lambada]", *over])


def test_plan_resolves_and_refuses_in_one_line():
    p = plan(cfg("target.ks=[1,2,3]"), 30)
    assert (p.metric, p.ks, p.looks, p.perplexity, p.method) == (
        "ppl_lambada",
        [1, 2, 3],
        [100, 200, 400],
        "lambada",
        "ghosted",
    )
    assert p.delta == pytest.approx(math.log(1.25))
    assert plan(cfg(), 30).ks == list(range(1, 16))  # auto: 1 .. half the blocks
    for over, msg in [
        (["target.speedup=1.5", "target.params=0.8"], "target.params and target.speedup both set"),
        (["eval.perplexity=[c4]"], "needs lambada in eval.perplexity"),
        (["target.quality.metric=mean_acc"], "takes max_drop"),
        (
            [
                "target.quality.metric=boolq_acc",
                "target.quality.max_ratio=null",
                "target.quality.max_drop=0.02",
                "eval.tasks=[piqa]",
            ],
            "use ppl_<set>",
        ),
        (["target.ks=[1,30]"], "only 30 blocks may be removed"),
    ]:
        with pytest.raises(GhostsearchError, match=msg) as e:
            plan(cfg(*over), 30)
        assert "\n" not in str(e.value)
    with pytest.raises(GhostsearchError, match="target.ks"):
        cfg("target.ks=[2,1]")
    with pytest.raises(GhostsearchError, match=r"target.speedup=0.9: a speed-up over the dense model, above 1"):
        cfg("target.speedup=0.9")
    assert plan(cfg("target.speedup=1.3"), 30).delta == pytest.approx(math.log(1.25))  # the quality still judged


def test_a_speedup_resolved_before_is_read_back_not_timed_again(tmp_path):
    """target.speedup's k comes from timing, which is noisy: a rerun of the same config takes the k its
    result.json recorded (no model is loaded: the model named here does not exist), another config times."""
    import json

    from ghostsearch.study.target import config_key, speedup_resolved

    c = cfg("target.speedup=1.3", f"out={tmp_path}", "model=/nonexistent/model")
    rec = {"asked": 1.3, "k": 7, "batch": 1, "measured": {"7": 1.31}, "timing": {}}
    (tmp_path / "result.json").write_text(json.dumps({"target": {"config_key": config_key(c), "speedup": rec}}))
    assert speedup_resolved(c, 30) == rec
    other = cfg("target.speedup=1.4", f"out={tmp_path}", "model=/nonexistent/model")
    with pytest.raises(GhostsearchError):  # not answered by the record: it would time, and the model is absent
        speedup_resolved(other, 30)


def test_a_params_target_resolved_before_is_read_back_not_counted_again(tmp_path):
    """target.params's k needs the model's parameter counts: a rerun of the same config takes the k and
    total its result.json recorded (no model is loaded: the model named here does not exist), another
    config counts (and so loads the model)."""
    import json

    from ghostsearch.study.target import config_key, params_resolved

    c = cfg("target.params=0.8", f"out={tmp_path}", "model=/nonexistent/model")
    rec = {"asked": 0.8, "k": 6, "total": 134515008}
    (tmp_path / "result.json").write_text(json.dumps({"target": {"config_key": config_key(c), "params": rec}}))
    assert params_resolved(c, 30) == (6, 134515008)
    other = cfg("target.params=0.7", f"out={tmp_path}", "model=/nonexistent/model")
    with pytest.raises(GhostsearchError):  # not answered by the record: it would count, and the model is absent
        params_resolved(other, 30)


def test_nested_path_from_the_ledger(tmp_path):
    """Greedy's step t+1 asks every free j added to the step-t answer: their intersection is it."""
    ledger = Ledger(tmp_path)
    cell, path = "greedy-perplexity-k3-s0", [(5,), (5, 9), (2, 5, 9)]
    base = dict(cell=cell, searcher="greedy", objective="perplexity", objective_key="x", fidelity=1.0, cached=False)
    prev: tuple[int, ...] = ()
    for step in path:
        for j in (1, 2, 3, 5, 9, 11):
            if j not in prev:
                s = sorted(prev + (j,))
                ledger.append({**base, "removed": s, "k": len(s), "value": float(sum(s))})
        prev = step
    ledger.close()
    assert nested_path(tmp_path, cell, (2, 5, 9)) == {1: [5], 2: [5, 9], 3: [2, 5, 9]}
    with pytest.raises(GhostsearchError, match="does not hold greedy's step"):
        nested_path(tmp_path, "greedy-perplexity-k4-s0", (1, 2, 5, 9))


def test_the_last_line():
    c = cfg("target.ks=[1,2,3]")
    p = plan(c, 30)
    rng = np.random.default_rng(0)
    d = np.stack([rng.normal(m, 0.05, 400) for m in (0.02, 0.05, 0.5)])
    cert = certify_matrix(d, p.looks, p.delta, 0.95)
    cert = type(cert)(**{**cert.__dict__, "ks": cert.ks, "removed": [4], "certified_k": 2})
    line = sentence(c, p, cert)
    assert line.startswith("Certified: remove k=2 blocks [4] with ghosted; ppl_lambada ratio 1.05")
    assert "<= target 1.25; k=3 failed (est 1.6" in line
    assert line.endswith(
        "P(true drop > target) <= 0.05, together with every test this run directory's account holds, for this "
        "repair fit and these data."
    )
    # a failure names only next steps that keep the level (issue 47): no looser target, no other repair here
    fail = type(cert)(**{**cert.__dict__, "certified_k": 0, "removed": []})
    spent = sentence(c, p, fail)
    assert spent.startswith("Not certified: no k meets ppl_lambada ratio <= 1.25 at level 0.95 with ghosted")
    assert "looser" not in spent and "another repair" not in spent
    assert "k=3 failed" in spent and spent.endswith("target.rerun: continue runs its later looks.")  # futility
    ended = type(fail)(
        **{**fail.__dict__, "ks": [*fail.ks[:2], type(fail.ks[2])(**{**fail.ks[2].__dict__, "stop": "last look"})]}
    )
    spent = sentence(c, p, ended)  # its level spent at the last look: only a plan made before a test helps
    assert "The level is spent on these items" in spent and "target.tries" in spent and "continue" not in spent
    left = sentence(c, p, fail, tries_left=2)
    assert "2 of target.tries=1 left: another repair, target or looks is a new try" in left


def test_plan_of_a_target_config_is_the_target_run_phase_by_phase(capsys):
    """Issue 48: `ghostsearch plan configs/target-quick.yaml` printed a compare's cost ("~2.85 h of task items"),
    not the target's. Now: the search greedy's nested path runs (one cell at k=6: 28 + 27 + ... + 23 = 153
    evaluations), the model's load, the repair fits, the looks as a range (7 models x 16 windows if every k is
    settled at its first look, x 64 at most) and the speed timing, and the whole run as their sum."""
    from pathlib import Path

    from ghostsearch.cli.main import main

    quick = str(Path(__file__).resolve().parents[2] / "configs" / "target-quick.yaml")
    assert main(["plan", quick]) in (0, None)
    out = capsys.readouterr().out
    assert "compare" not in out and "task items" not in out, out
    assert "target: ppl_lambada, ks 1, 2, 3, 4, 5, 6, repair ghosted, looks 16/32/64 windows per model (7 models" in out
    for phase in ("  search ", "  the model's load in the driver ", "  repair fits ", "  looks ", "  speed "):
        assert phase in out, out
    assert "worst case: 448 windows" in out and "first look: 112 windows" in out and "at most 21 cut fits" in out
    from ghostsearch.study.plan import plan_target

    tp = plan_target(load_config(quick))
    (cell,) = tp.search.cells
    assert (cell.searcher, cell.k, cell.evaluations) == ("greedy", 6, 153)
    assert tp.worst_s == pytest.approx(tp.search.search_wall_s + sum(p.seconds for p in tp.parts.values()))
    assert tp.parts["looks"].seconds == pytest.approx(4 * tp.least_looks_s)  # 64 windows a model against 16
    assert tp.least_s < tp.worst_s and all(p.seconds > 0 for p in tp.parts.values())
    # another searcher: one search per k, each planned
    other = plan_target(load_config(quick, ["searcher=oneshot"]))
    assert [c.k for c in other.search.cells] == [1, 2, 3, 4, 5, 6]
