"""target's kept files (issue 48): every value file is validated as it is read (JSON, schema, finite
values, 0/1 for an accuracy, the key and metric it is filed under, its count and checksum); a damaged
one is set aside beside itself (renamed ``.damaged-N``, never deleted) with one warning and its values
computed again; a damaged looks.json likewise. On a tiny random Llama (loads in milliseconds), no Ray."""

from __future__ import annotations

import json
import logging
import math

import numpy as np
import pytest

from ghostsearch.config import load_config
from ghostsearch.study import target as t
from ghostsearch.study.target import Values, eval_cfg, plan


def make(tiny_model_dir, run_dir, metric: str = "ppl") -> Values:
    over = [f"model={tiny_model_dir}", "dtype=fp32", "target.ks=[1]", "target.recovery=none"]
    if metric == "ppl":
        over += ["eval.perplexity=[lambada]", "eval.ppl_seq_len=32", "eval.batch_size=4"]
        over += ["target.quality.max_ratio=1.25"]
    else:
        over += ["eval.tasks=[arc_easy,piqa]", "target.quality.metric=mean_acc", "target.quality.max_drop=0.05"]
        over += ["target.looks=[16,32]"]
    cfg = load_config(None, over)
    p = plan(cfg, 6)
    held = ("lambada",) if metric == "ppl" else ()
    return Values(eval_cfg(cfg, p), p, run_dir, {1: [2]}, held_out=held, progress=False)


def dense_file(v: Values):
    return v.dir / f"{v.keys[0]}.json"


@pytest.fixture(scope="module")
def computed(tiny_model_dir, tmp_path_factory):
    """A run directory whose dense and k=1 values (5 windows each) are kept, computed once for the module."""
    d = tmp_path_factory.mktemp("target-values")
    v = make(tiny_model_dir, d)
    v.ensure([0, 1], 5)
    return d, v


def test_a_value_file_names_its_key_metric_count_and_checksum(computed):
    d, v = computed
    rec = json.loads(dense_file(v).read_text())
    assert (rec["key"], rec["metric"], rec["n"]) == (v.keys[0], "ppl_lambada", 5)
    assert rec["sha256"] == t.values_digest(rec["values"]) and rec["values"] == v.values[0]


@pytest.fixture
def kept(computed, tmp_path):
    """A copy of ``computed``'s run directory, with its reference values."""
    import shutil

    src, v = computed
    shutil.copytree(src, tmp_path / "run")
    return tmp_path / "run", v.values[0], v.values[1]


def damage(f, how: str, other_key: str) -> None:
    rec = json.loads(f.read_text())
    if how == "truncated":  # the issue's: cut short mid-write by something outside ghostsearch
        f.write_text('{"values": [0.1, 0.2')
    elif how == "empty":
        f.write_text("")
    elif how == "garbage":
        f.write_bytes(b"\x00\xff\xfe garbage")
    elif how == "not-an-object":
        f.write_text("[0.1, 0.2]")
    elif how == "values-not-a-list":
        f.write_text(json.dumps({**rec, "values": "0.1,0.2"}))
    elif how == "nan":
        f.write_text(json.dumps({**rec, "values": [math.nan] * rec["n"]}))
    elif how == "inf":
        f.write_text(json.dumps({**rec, "values": [1.0, math.inf, 1.0, 1.0, 1.0]}))
    elif how == "string-value":
        f.write_text(json.dumps({**rec, "values": ["1.0"] * rec["n"]}))
    elif how == "edited":  # one value changed by hand: its checksum no longer matches
        f.write_text(json.dumps({**rec, "values": [rec["values"][0] - 0.5, *rec["values"][1:]]}))
    elif how == "other-key":  # another model's values copied in under this name
        f.write_text(json.dumps({**rec, "key": other_key}))
    elif how == "count":
        f.write_text(json.dumps({**rec, "n": rec["n"] + 3}))
    else:
        raise AssertionError(how)


HOWS = [
    "truncated",
    "empty",
    "garbage",
    "not-an-object",
    "values-not-a-list",
    "nan",
    "inf",
    "string-value",
    "edited",
    "other-key",
    "count",
]


@pytest.mark.parametrize("how", HOWS)
def test_a_damaged_value_file_is_set_aside_with_one_warning_and_recomputed(how, kept, computed, tiny_model_dir, caplog):
    run_dir, dense, pruned = kept
    v = make(tiny_model_dir, run_dir)
    f = dense_file(v)
    damage(f, how, v.keys[1])
    bad = f.read_bytes()
    with caplog.at_level(logging.WARNING, logger="ghostsearch"):
        again = make(tiny_model_dir, run_dir)  # today: a JSONDecodeError traceback, or the bad values used
    warned = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(warned) == 1 and "is damaged" in warned[0] and "set aside as" in warned[0], warned
    aside = f.with_name(f.name + ".damaged-1")
    assert aside.read_bytes() == bad and not f.exists()  # renamed, never deleted
    assert again.values[0] == [] and again.values[1] == pruned  # the good file is kept as it was
    if how == "truncated":  # computed again (once: the same path for every damage)
        again.model, again.draw, again.ops = computed[1].model, computed[1].draw, computed[1].ops  # once a module
        again.ensure([0, 1], 5)
        assert again.computed == 5  # the dense values only
        np.testing.assert_allclose(again.values[0], dense, atol=1e-6)
        assert make(tiny_model_dir, run_dir).values[0] == again.values[0]  # and kept valid


def test_a_second_damage_is_set_aside_beside_the_first(kept, tiny_model_dir):
    run_dir, _, _ = kept
    f = dense_file(make(tiny_model_dir, run_dir))
    for n in (1, 2):
        f.write_text("{")
        make(tiny_model_dir, run_dir)
        assert f.with_name(f"{f.name}.damaged-{n}").read_text() == "{"


def test_an_accuracy_value_other_than_0_or_1_is_damaged(tiny_model_dir, tmp_path, caplog):
    v = make(tiny_model_dir, tmp_path, metric="acc")
    f = dense_file(v)
    f.parent.mkdir(parents=True, exist_ok=True)
    vals = [1.0, 0.0, 0.5, 1.0]
    f.write_text(json.dumps(t.values_record(v.keys[0], "mean_acc", vals)))
    with caplog.at_level(logging.WARNING, logger="ghostsearch"):
        assert make(tiny_model_dir, tmp_path, metric="acc").values[0] == []
    assert "value 2 is 0.5, but an accuracy item is 0 or 1" in caplog.text


def test_a_value_file_of_an_earlier_version_is_read(kept, tiny_model_dir):
    """{"values": [...]} alone (no key, n, sha256), as target wrote before: validated for the rest and used."""
    run_dir, dense, _ = kept
    f = dense_file(make(tiny_model_dir, run_dir))
    f.write_text(json.dumps({"values": dense}))
    assert make(tiny_model_dir, run_dir).values[0] == dense


def test_a_damaged_looks_json_is_set_aside_with_one_warning(tmp_path, caplog):
    f = tmp_path / "looks.json"
    f.write_text('{"ks": [{"k": 1, "stop"')
    with caplog.at_level(logging.WARNING, logger="ghostsearch"):
        assert t.kept_file(f, t.read_looks, "written again after the looks") is None
    assert (tmp_path / "looks.json.damaged-1").exists() and not f.exists()
    assert caplog.text.count("is damaged") == 1 and "written again after the looks" in caplog.text


def test_a_kept_block_is_read_only_from_an_object():
    import tempfile
    from pathlib import Path

    with tempfile.TemporaryDirectory() as d:
        f = Path(d) / "result.json"
        for text, want in [
            ('{"target": {"certified_k": 2}}', {"certified_k": 2}),
            ('{"target": [1]}', {}),
            ("[1, 2]", {}),
            ('{"cells": {', {}),
            ("", {}),
        ]:
            f.write_text(text)
            assert t.kept_block(f) == want, text
        assert t.kept_block(Path(d) / "missing.json") == {}
