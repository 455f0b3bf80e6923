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
    cfg = {
        "model": tiny_model_dir,
        "dtype": "fp32",
        "k": 2,
        "calibration": {"dataset": "lambada", "n_seq": 4, "seq_len": 32},
        "recovery": {"dataset": "lambada", "n_seq": 4, "seq_len": 32},
    }
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(cfg))
    cells = {
        "greedy-perplexity-k2-s0": {"removed": [2, 3], "value": 60.0},
        "beam-perplexity-k2-s0": {"removed": [1, 4], "value": 55.0},
    }
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
    both = [
        ("beam-perplexity-k2-s0", "ghosted"),
        ("beam-perplexity-k2-s0", "linearpatch"),
        ("greedy-perplexity-k2-s0", "ghosted"),
        ("greedy-perplexity-k2-s0", "linearpatch"),
    ]
    assert keys(run_dir) == both
    before = {
        (r["finalist"], r["method"]): r["seconds"] for r in pq.read_table(run_dir / "recovery.parquet").to_pylist()
    }
    assert main(["-q", "recover", str(run_dir), "--method", "ghosted", "--top", "1"]) == 0
    assert keys(run_dir) == both  # replaced, not added, and linearpatch's rows untouched
    after = {
        (r["finalist"], r["method"]): r["seconds"] for r in pq.read_table(run_dir / "recovery.parquet").to_pylist()
    }
    changed = {k for k in both if after[k] != before[k]}
    assert changed == {("beam-perplexity-k2-s0", "ghosted")}


def test_fit_all_reads_one_dense_pass_and_equals_fitting_each(tiny_model_dir, monkeypatch):
    """compare's repaired finalists: fit_all captures the calibration once (under eval.cache_gib) and
    gives every method the operators it fits alone; over the cap it re-captures, same operators."""
    import torch

    from ghostsearch.config import load_config
    from ghostsearch.model.models import load_model
    from ghostsearch.model.stack import Stack
    from ghostsearch.recovery import repair

    cfg = load_config(
        None,
        [
            f"model={tiny_model_dir}",
            "dtype=fp32",
            "recovery.dataset=lambada",
            "recovery.n_seq=4",
            "recovery.seq_len=32",
            "recovery.steps=20",
        ],
    )
    model, tok = load_model(cfg.model, dtype="fp32")
    specs = [([2, 3], "ghosted"), ([1, 4], "ghosted"), ([2, 3], "linearpatch"), ([1, 4], "replaceme"), ([2], "none")]
    captures = []
    real = Stack.capture
    monkeypatch.setattr(Stack, "capture", lambda self, b: captures.append(1) or real(self, b))
    together = repair.fit_all(model, tok, specs, cfg)
    n_batches = len(captures)
    alone = [None if m == "none" else repair.fit(model, tok, r, cfg, m) for r, m in specs]
    assert together[-1] is None and n_batches * 5 <= len(captures)  # once, against once per cut and fit
    for t, a in zip(together, alone):
        if a is not None:
            assert t.method == a.method and sorted(t.mats) == sorted(a.mats)
            for b in a.mats:
                torch.testing.assert_close(t.mats[b], a.mats[b], rtol=1e-5, atol=1e-6)
    cfg.eval.cache_gib = 0.0  # over the cap: re-captured per pass, the same operators
    tight = repair.fit_all(model, tok, specs[:2], cfg)
    for t, a in zip(tight, alone):
        for b in a.mats:
            torch.testing.assert_close(t.mats[b], a.mats[b], rtol=1e-5, atol=1e-6)
