"""`ghostsearch eval` end to end on a tiny random Llama (real lm-eval and perplexity code, seconds)."""

from __future__ import annotations

import json
import subprocess
import sys

import pyarrow.parquet as pq
import yaml

from tests.corpora import PROSE

EVAL = {
    "tasks": ["arc_easy"],
    "perplexity": list(dict.fromkeys([PROSE, "lambada"])),
    "ppl_seq_len": 64,
    "ppl_max_seq": 2,
    "limit": 3,
    "batch_size": 4,
}


def _eval(*args, table: bool = False):
    """The rows `eval --json` prints (or, with ``table``, eval's stdout: the models table)."""
    r = subprocess.run(
        [sys.executable, "-m", "ghostsearch", "eval", *map(str, args), *([] if table else ["--json"])],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert r.returncode == 0, r.stderr[-3000:]
    if table:
        return r.stdout
    return [json.loads(line) for line in r.stdout.splitlines() if line.startswith("{")]


def _check(row):
    assert 0 <= row["arc_easy_acc"] <= 1 and 0 <= row["lambada_acc"] <= 1 and row["arc_easy_n"] == 3
    assert row[f"ppl_{PROSE}"] > 1 and row["lambada_lastword_ppl"] > 1 and row["mean_acc"] == row["arc_easy_acc"]


def test_parquet_types_of_a_dense_row(tmp_path):
    import pyarrow as pa

    from ghostsearch.evaluation.evaluate import write_rows

    write_rows([{"cell": "remove", "removed": [], "value": None, "ppl_wikitext2": 30.0}], tmp_path / "e.parquet")
    t = pq.read_table(tmp_path / "e.parquet")
    assert t.schema.field("removed").type == pa.list_(pa.int64()) and t.schema.field("value").type == pa.float64()
    assert t.to_pylist() == [{"cell": "remove", "removed": [], "value": None, "ppl_wikitext2": 30.0}]


def test_config_with_remove(tmp_path, tiny_model_dir):
    cfg = tmp_path / "c.yaml"
    cfg.write_text(yaml.safe_dump({"model": tiny_model_dir, "dtype": "fp32", "eval": EVAL}))
    out = tmp_path / "e.parquet"
    dense, row = _eval(cfg, "eval.ppl_max_seq=1", "--remove", "1,2", "--limit", "3", "--out", out)
    assert row["removed"] == [1, 2] and row["recovery"] == "none" and row["cell"] == "remove"
    assert dense["removed"] == [] and dense["cell"] == "dense" and dense["value"] is None  # beside it, always
    _check(row)
    _check(dense)
    assert pq.read_table(out).to_pylist() == [dense, row]


def test_run_dir_every_cell(tmp_path, tiny_model_dir):
    run = tmp_path / "run"
    run.mkdir()
    (run / "config.yaml").write_text(yaml.safe_dump({"model": tiny_model_dir, "dtype": "fp32", "eval": EVAL}))
    cells = {
        "greedy|perplexity|k2|s0": {"removed": [3, 4], "value": 9.5},
        "beam|perplexity|k2|s0": {"removed": [0, 5], "value": 9.7},
        "greedy|perplexity|k2|s1": {"removed": [3, 4], "value": 9.5},
    }
    (run / "result.json").write_text(json.dumps({"cells": cells}))
    rows = _eval(run)
    assert [(r["cell"], r["removed"], r["value"]) for r in rows] == [("dense", [], None)] + [
        (c, v["removed"], v["value"]) for c, v in cells.items()
    ]
    rows = rows[1:]
    for r in rows:
        _check(r)
    assert pq.read_table(run / "eval.parquet").to_pylist()[1:] == rows
    assert {k: v for k, v in rows[0].items() if k != "cell"} == {k: v for k, v in rows[2].items() if k != "cell"}
    items = pq.read_table(run / "eval_items.parquet").to_pylist()  # each distinct set once, every item
    docs = sorted(
        {i["doc"] for i in items}
    )  # the run's seeded draw (ghostsearch/data/items.py), the same for both sets
    assert len(docs) == 3 and sorted((tuple(i["removed"]), i["doc"]) for i in items) == [((), d) for d in docs] + [
        ((0, 5), d) for d in docs
    ] + [((3, 4), d) for d in docs]
    for r in rows:
        mine = [i for i in items if i["removed"] == r["removed"]]
        assert sum(i["pred"] == i["gold"] for i in mine) / 3 == r["arc_easy_acc"]


def test_exported_model(tmp_path, tiny_model_dir):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from ghostsearch.recovery.export import export

    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir)
    export(model, [2], "none", None, tmp_path / "exp", tokenizer=AutoTokenizer.from_pretrained(tiny_model_dir))
    (row,) = _eval(tmp_path / "exp", f"eval={json.dumps(EVAL)}")
    assert row["model"] == str(tmp_path / "exp")
    _check(row)
    table = _eval(tmp_path / "exp", f"eval={json.dumps(EVAL)}", table=True).splitlines()
    assert table[0].startswith("model") and table[1].startswith("exp ")


def test_run_dir_table_dense_none_and_recovered_repair(tmp_path, tiny_model_dir):
    """After `recover`, eval RUN_DIR prints one table: dense, the set without repair, and the repair,
    each with its difference from dense and a paired interval; --json gives the same rows."""
    import pyarrow as pa

    run = tmp_path / "run"
    run.mkdir()
    ev = {**EVAL, "perplexity": [PROSE], "ppl_max_seq": 4}
    cfg = {"model": tiny_model_dir, "dtype": "fp32", "eval": ev, "recovery": {"n_seq": 4, "seq_len": 32}}
    (run / "config.yaml").write_text(yaml.safe_dump(cfg))
    cell = "greedy|perplexity|k2|s0"
    (run / "result.json").write_text(json.dumps({"cells": {cell: {"removed": [3, 4], "value": 9.5}}}))
    rec = {"finalist": cell, "method": "ghosted", "variant": "dense", "removed": [3, 4]}
    pq.write_table(pa.Table.from_pylist([rec]), run / "recovery.parquet")
    lines = _eval(run, table=True).splitlines()
    assert lines[0].split()[:3] == ["model", "removed", "ppl"] and "mean acc" in lines[0] and "held out" in lines[0]
    assert [ln.split()[0] for ln in lines[1:4]] == ["dense", "k=2", "k=2"] and "+ ghosted" in lines[3]
    assert lines[1].split()[1] == "-" and "nothing fitted" in lines[1]
    for ln in lines[2:4]:  # ratio to dense with its interval (or "within noise" and the interval); data held out
        assert (" x" in ln or "within noise [" in ln) and "[" in ln and "yes:" in ln
    assert "(ghosted" not in lines[2] and "(repair)" in lines[3]
    # the repair's own effect, against the same set without repair: in the repaired row only, for the
    # perplexity and the mean accuracy (paired over the same items: an interval, or "within noise")
    # one "; repair: " per perplexity column the table shows ("ppl <set>": which perplexities an eval
    # reports depends on the data it finds) and one for the mean accuracy
    n_ppl = lines[0].split().count("ppl")
    assert n_ppl >= 1 and "repair:" not in lines[2] and lines[3].count("; repair: ") == n_ppl + 1
    acc = lines[3][lines[0].index("mean acc") :]
    assert "; repair: " in acc and "[" in acc.split("; repair: ")[1]
    end = next(i for i, ln in enumerate(lines) if ln.startswith("(perplexity:"))  # the table's last line
    floor = "\n".join(lines[end + 1 :])  # issue 47: the floor and majority answers of the same item rows
    assert "Answer bias and the floor" in floor and "\n| dense | " in floor and "\n| -3,4+ghosted | " in floor
    rows = pq.read_table(run / "eval.parquet").to_pylist()
    assert [(r["cell"], r["recovery"]) for r in rows] == [("dense", "none"), (cell, "none"), (cell, "ghosted")]
    assert rows[2][f"ppl_{PROSE}"] != rows[1][f"ppl_{PROSE}"]
