"""`ghostsearch recover` and `ghostsearch export` end to end on a tiny SmolLM2 run directory."""

import json

import pytest
import yaml

from ghostsearch.cli import main

pytestmark = pytest.mark.slow


@pytest.fixture
def run_dir(tmp_path, data_dir):
    cfg = {
        "model": "smollm2-135m",
        "dtype": "fp32",
        "data_dir": data_dir,
        "k": 2,
        "calibration": {"n_seq": 4, "seq_len": 64},
        "recovery": {"n_seq": 32, "seq_len": 128},
    }  # 4,096 repair tokens (fewer overfit a 576 x 576 operator)
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(cfg))
    cells = {
        "greedy/k2": {"removed": [20, 21], "value": 60.0},
        "fastblock/k2": {"removed": [14, 15], "value": 55.0},
        "beam/k2": {"removed": [15, 14], "value": 56.0},
    }
    (tmp_path / "result.json").write_text(json.dumps({"searchers": cells}))
    return tmp_path


def test_recover_and_export(run_dir, tmp_path_factory, capsys):
    import pyarrow.parquet as pq

    from ghostsearch import load_pruned

    assert main(["recover", str(run_dir), "--method", "ghosted", "--top", "2"]) == 0
    rows = pq.read_table(run_dir / "recovery.parquet").to_pylist()
    assert [r["finalist"] for r in rows] == ["fastblock/k2", "greedy/k2"]  # best first, duplicates once
    for r in rows:
        assert r["method"] == "ghosted" and r["value_after"] < r["value_before"]
        assert r["alignment_error"] < r["alignment_error_before"] and 0 < r["antisymmetric_share"] < 1
        # fitted on recovery.* (32 x 128), scored on the run's calibration data (4 x 64): both recorded
        assert r["fit_data"].endswith("32x128 seed 0") and r["score_data"].endswith("4x64 seed 0")
        assert r["in_sample"] == (r["fit_data"].split()[0] == r["score_data"].split()[0])
        assert r["value_before"] > r["dense_value"] > 1
    out = tmp_path_factory.mktemp("exp") / "m"
    assert main(["export", str(run_dir), "--method", "ghosted", "--out", str(out)]) == 0
    meta = json.loads((out / "recovery.json").read_text())
    assert meta["data"]["repair"]["n_seq"] == 32 and meta["data"]["search"][0]["n_seq"] == 4
    assert load_pruned(out).config.num_hidden_layers == 28
    from transformers import AutoModelForCausalLM

    with pytest.raises(ValueError, match="trust_remote_code"):  # never loads as if unrepaired
        AutoModelForCausalLM.from_pretrained(out)
    card = (out / "README.md").read_text()
    assert "[14, 15]" in card and "ghosted" in card and "trust_remote_code=True" in card
    assert "base_model: HuggingFaceTB/SmolLM2-135M-Instruct" in card and "Q4_1" in card
    capsys.readouterr()
    assert main(["export", str(run_dir), "--method", "ghosted", "--out", str(out)]) == 2
    assert "--force" in capsys.readouterr().err
    plain = out.parent / "plain"  # none (and replaceme) stay plain transformers checkpoints
    assert main(["export", str(run_dir), "--method", "none", "--out", str(plain)]) == 0
    assert AutoModelForCausalLM.from_pretrained(plain).config.num_hidden_layers == 28
    assert main(["export", str(run_dir), "--method", "none", "--out", str(out), "--force"]) == 0  # replaces an export
    assert main(["export", str(run_dir), "--method", "none", "--out", str(run_dir), "--force"]) == 2  # never a run
    assert (run_dir / "result.json").exists() and (run_dir / "recovery.parquet").exists()
    assert main(["export", str(run_dir / "config.yaml"), "--method", "none", "--out", str(out) + "2"]) == 2
    assert "--remove" in capsys.readouterr().err
