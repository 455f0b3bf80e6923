"""`ghostsearch recover` keeps each method's rows: recovery.parquet is keyed by (finalist, method,
variant), a rerun of one method replaces only its rows; a progress bar unless -q."""
import json

import pyarrow.parquet as pq
import pytest
import yaml

from ghostsearch.cli import main

pytestmark = pytest.mark.slow


@pytest.fixture
def run_dir(tmp_path, tiny_model_dir):
    cfg = {"model": tiny_model_dir, "dtype": "fp32", "k": 2,
           "calibration": {"dataset": "lambada", "n_seq": 4, "seq_len": 32},
           "recovery": {"dataset": "lambada", "n_seq": 4, "seq_len": 32}}
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(cfg))
    cells = {"greedy-perplexity-k2-s0": {"removed": [2, 3], "value": 60.0},
             "beam-perplexity-k2-s0": {"removed": [1, 4], "value": 55.0}}
    (tmp_path / "result.json").write_text(json.dumps({"searchers": cells}))
    return tmp_path


def keys(run_dir):
    return sorted((r["finalist"], r["method"]) for r in pq.read_table(run_dir / "recovery.parquet").to_pylist())


def test_methods_side_by_side(run_dir, capsys):
    assert main(["recover", str(run_dir), "--method", "ghosted", "--top", "2"]) == 0
    assert "recover (ghosted)" in capsys.readouterr().err  # the progress bar
    assert main(["-q", "recover", str(run_dir), "--method", "linearpatch", "--top", "2"]) == 0
    out, err = capsys.readouterr()
    assert "recover (" not in err and len(out.strip().splitlines()) == 2  # -q: no bar; JSON rows stay on stdout
    both = [("beam-perplexity-k2-s0", "ghosted"), ("beam-perplexity-k2-s0", "linearpatch"),
            ("greedy-perplexity-k2-s0", "ghosted"), ("greedy-perplexity-k2-s0", "linearpatch")]
    assert keys(run_dir) == both
    before = {(r["finalist"], r["method"]): r["seconds"] for r in pq.read_table(run_dir / "recovery.parquet").to_pylist()}
    assert main(["-q", "recover", str(run_dir), "--method", "ghosted", "--top", "1"]) == 0
    assert keys(run_dir) == both  # replaced, not added, and linearpatch's rows untouched
    after = {(r["finalist"], r["method"]): r["seconds"] for r in pq.read_table(run_dir / "recovery.parquet").to_pylist()}
    changed = {k for k in both if after[k] != before[k]}
    assert changed == {("beam-perplexity-k2-s0", "ghosted")}
