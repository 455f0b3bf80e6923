"""End to end: configs/compare-quick.yaml (2 searchers x 2 objectives x 1 k x 1 seed on one pool, few
tokens, --limit) on a tiny random Llama of SmolLM2's depth (30 blocks, SmolLM2's tokenizer): nothing
checked here depends on the model's weights, and compare-quick on SmolLM2 itself is
tests/cli/test_first_hour.py's step 5. comparison.parquet has the documented schema; the report and
its plots exist; a rerun resumes (finished cells skipped, nothing recomputed)."""

import json
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from ghostsearch.rundir.ledger import read_ledger
from ghostsearch.study.report import best_so_far

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def model30(tmp_path_factory, smollm2_tokenizer_dir) -> str:
    """A tiny random Llama with SmolLM2's 30 blocks (compare-quick protects blocks 0 and 29)."""
    from transformers import AutoTokenizer

    from tests.conftest import tiny_model

    d = tmp_path_factory.mktemp("tiny-llama-30")
    tiny_model("llama", 30).save_pretrained(d, safe_serialization=True)
    AutoTokenizer.from_pretrained(smollm2_tokenizer_dir).save_pretrained(d)
    return str(d)


def test_compare_end_to_end(tmp_path, model30):
    out = tmp_path / "cmp"
    cmd = [
        sys.executable,
        "-m",
        "ghostsearch",
        "compare",
        str(ROOT / "configs" / "compare-quick.yaml"),
        f"out={out}",
        f"model={model30}",
        "--limit",
        "8",
        "--no-progress",
        'compare.contrasts=["ghosted - none | searcher=fastblock, objective=perplexity"]',
        "recovery.n_seq=8",  # CI's cost: the repair data of the old compare-quick, under the warning's line
        "recovery.seq_len=128",
    ]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=1500, cwd=ROOT)
    assert r.returncode == 0, r.stderr[-3000:]
    # the pre-registered contrast: its power said before any model work, first in result.json
    assert "ghosted - none | searcher=fastblock, objective=perplexity': 1,422 items per model would detect" in r.stderr
    assert list(json.loads((out / "result.json").read_text()))[0] == "contrasts"
    t = pq.read_table(out / "comparison.parquet")
    assert t.num_rows == 1 + 4 * 2  # the dense model, then every cell unrepaired and Ghosted-repaired
    for col in (
        "cell",
        "searcher",
        "objective",
        "k",
        "seed",
        "removed",
        "calib_value",
        "dense_calib_value",
        "calib_change",
        "evaluations",
        "budget_used",
        "budget_mode",
        "wall_seconds",
        "cache_hits",
        "recovery",
        "ppl_lambada",
        "arc_easy_acc",
        "piqa_acc",
        "arc_easy_acc_norm",
        "arc_easy_acc_stderr",
        "mean_acc",
        "mean_acc_stderr",
        "mean_acc_lo",
        "mean_acc_hi",
        "delta_mean_acc",
        "calibration_data",
        "held_out",
    ):
        assert col in t.column_names, col
    all_rows = t.to_pylist()
    dense, rows = all_rows[0], [r for r in all_rows[1:] if r["recovery"] == "ghosted"]
    assert dense["cell"] == "dense" and dense["removed"] == [] and len(rows) == 4
    assert {r["recovery"] for r in all_rows[1:]} == {"none", "ghosted"}
    assert set(dense["held_out"].split(",")) >= {"lambada", "arc_easy", "piqa"} or dense["held_out"] == ""
    for r in all_rows[1:]:
        assert r["delta_mean_acc"] == pytest.approx(r["mean_acc"] - dense["mean_acc"])
        assert r["mean_acc_lo"] < r["mean_acc"] < r["mean_acc_hi"]
        assert r["dense_calib_value"] is not None and r["calib_change"] is not None
    assert {r["searcher"] for r in rows} == {"fastblock", "lorp"}
    assert {r["objective"] for r in rows} == {"perplexity", "margin"}
    assert all(len(r["removed"]) == 4 and 0 not in r["removed"] and 29 not in r["removed"] for r in rows)
    assert all(0.0 <= r["mean_acc"] <= 1.0 for r in rows)
    for name in ("patterns", "convergence", "similarity", "accuracy", "spearman"):
        assert (out / "plots" / f"{name}.png").stat().st_size > 1000
    curves = best_so_far(out)  # the plotted best-so-far ends at each cell's calibration value
    for r in rows:
        assert curves[r["cell"]].best[-1] == pytest.approx(r["calib_value"], rel=1e-9), r["cell"]
    assert "## Summary" in (out / "report.md").read_text()
    assert (out / "report.html").exists()
    n_rows = len(read_ledger(out))
    # resume: a rerun skips every finished cell and evaluation
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=900, cwd=ROOT)
    assert r.returncode == 0, r.stderr[-3000:]
    assert len(read_ledger(out)) == n_rows
    result = json.loads((out / "result.json").read_text())
    assert result["cells_resumed"] == 4 and result["data"]["calibration"]
    assert "## Best value at budget B" in (out / "report.md").read_text()
    assert json.loads((out / "summary.json").read_text())["summary"]


def test_compare_bad_input_fails_before_search(tmp_path):
    base = [
        sys.executable,
        "-m",
        "ghostsearch",
        "compare",
        str(ROOT / "configs" / "compare-quick.yaml"),
        f"out={tmp_path / 'x'}",
    ]
    cases = (
        (["compare.searchers=[fastblock,nosuch]"], "unknown searcher"),
        (["compare.objectives=[]"], "compare.objectives is empty"),
        (["eval.tasks=[nosuchtask]"], "nosuchtask"),
        (["compare.ks=[40]"], "k=40"),
    )
    # the four runs at once (each is mostly interpreter start-up and imports)
    procs = [
        (subprocess.Popen(base + extra, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT), msg)
        for extra, msg in cases
    ]
    for proc, msg in procs:
        _, err = proc.communicate(timeout=300)
        assert proc.returncode == 2, err
        assert msg in err and "Traceback" not in err
        assert len(err.strip().splitlines()) == 1, err
    assert not (tmp_path / "x").exists()
