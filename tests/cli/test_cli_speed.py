"""`ghostsearch speed` on a tiny random Llama: a config with --remove, a run directory (its cells and
the repairs `recover` fitted), an export; the table leads with the dense model; files written only
where asked (or in the run directory)."""

from __future__ import annotations

import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import yaml

from ghostsearch.cli.main import main

FAST = ["--batch", "1", "2", "--seq-len", "4", "--decode-tokens", "1", "--repeats", "1"]


def _run(capsys, *argv) -> tuple[int, str, str]:
    rc = main(["-q", "speed", *map(str, argv)])
    out, err = capsys.readouterr()
    return rc, out, err


def test_config_with_sets_and_a_repair(tmp_path, tiny_model_dir, capsys):
    cfg = tmp_path / "c.yaml"
    cfg.write_text(yaml.safe_dump({"model": tiny_model_dir, "dtype": "fp32"}))
    out = tmp_path / "s.json"
    rc, text, _ = _run(capsys, cfg, "--remove", "1,2", "--remove", "4", "--recovery", "ghosted", *FAST, "--out", out)
    assert rc == 0
    lines = text.splitlines()
    assert lines[0].split()[:3] == ["model", "removed", "params"] and lines[1].startswith("dense")
    assert [ln.split()[0] for ln in lines[1:5]] == ["dense", "k=2", "k=1", "k=2"] and "+ ghosted" in lines[4]
    rec = json.loads(out.read_text())
    assert [(r["removed"], r["recovery"]) for r in rec["rows"]] == [
        ([], "none"),
        ([1, 2], "none"),
        ([4], "none"),
        ([1, 2], "ghosted"),
        ([4], "ghosted"),
    ]
    assert rec["rows"][3]["params"] == rec["rows"][1]["params"] + 64 * 64  # one C x C operator for the one cut
    flat = pq.read_table(out.with_suffix(".parquet")).to_pylist()
    assert [r["label"] for r in flat] == [
        "dense",
        "k=2",
        "k=1",
        "k=2 + ghosted",
        "k=1 + ghosted",
    ] and "decode_b2_speedup" in flat[0]


def test_run_dir_cells_and_recovered_repairs(tmp_path, tiny_model_dir, capsys):
    run = tmp_path / "run"
    run.mkdir()
    (run / "config.yaml").write_text(yaml.safe_dump({"model": tiny_model_dir, "dtype": "fp32"}))
    cells = {
        "greedy|perplexity|k2|s0": {"removed": [3, 4], "value": 9.5},
        "beam|perplexity|k2|s0": {"removed": [0, 5], "value": 9.7},
    }
    (run / "result.json").write_text(json.dumps({"cells": cells}))
    pq.write_table(
        pa.Table.from_pylist(
            [{"finalist": "greedy|perplexity|k2|s0", "method": "linearpatch", "variant": "hadamard", "removed": [3, 4]}]
        ),
        run / "recovery.parquet",
    )
    rc, text, _ = _run(capsys, run, *FAST, "--json")
    assert rc == 0
    rec = json.loads(text.splitlines()[0])
    assert [(r["removed"], r["recovery"]) for r in rec["rows"]] == [
        ([], "none"),
        ([3, 4], "none"),
        ([0, 5], "none"),
        ([3, 4], "linearpatch"),
    ]
    assert json.loads((run / "speed.json").read_text()) == rec and (run / "speed.parquet").exists()
    rc, _, _ = _run(capsys, run, *FAST)  # a rerun replaces its own files
    assert rc == 0


def test_export_dir_beside_its_dense_model(tmp_path, tiny_model_dir, capsys):
    from transformers import AutoModelForCausalLM

    from ghostsearch.recovery.export import export

    export(AutoModelForCausalLM.from_pretrained(tiny_model_dir), [2], "none", None, tmp_path / "exp")
    rc, text, _ = _run(capsys, tmp_path / "exp", f"model={tiny_model_dir}", "dtype=fp32", *FAST)
    assert rc == 0
    lines = text.splitlines()
    assert lines[1].startswith("dense") and lines[2].startswith("export exp") and " 2 " in lines[2]


@pytest.mark.parametrize(
    "argv, message",
    [
        (["CFG"], "needs --remove"),
        (["CFG", "--remove", "9"], "out of range"),
        (["CFG", "--remove", "1", "--out", "x.csv"], "give a .json path"),
    ],
)
def test_bad_input_is_one_line_before_the_model(tmp_path, tiny_model_dir, capsys, argv, message):
    cfg = tmp_path / "c.yaml"
    cfg.write_text(yaml.safe_dump({"model": tiny_model_dir, "dtype": "fp32"}))
    rc, _, err = _run(capsys, *[str(cfg) if a == "CFG" else a for a in argv])
    assert rc == 2 and message in err and len(err.strip().splitlines()) == 1
