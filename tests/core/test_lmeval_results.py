"""lm-eval interop: `ghostsearch eval` writes lm-eval's own results file for the evaluated model,
and lm-eval's own code finds it (results file names, latest file) and renders it (make_table)."""

import json

import pytest
import yaml

from ghostsearch.cli import main

pytestmark = pytest.mark.slow


def test_eval_writes_lm_eval_results(tiny_model_dir, data_dir, tmp_path, capsys):
    from lm_eval.utils import get_latest_filename, get_results_filenames, make_table

    cfg = tmp_path / "c.yaml"
    cfg.write_text(
        yaml.safe_dump(
            {
                "model": tiny_model_dir,
                "dtype": "fp32",
                "data_dir": data_dir,
                "calibration": {"dataset": "lambada", "n_seq": 2, "seq_len": 32},
                "eval": {"perplexity": [], "tasks": ["arc_easy", "piqa"], "limit": 6},
            }
        )
    )
    assert main(["-q", "eval", str(cfg), "--remove", "1,2", "--json", "--out", str(tmp_path / "e.parquet")]) == 0
    row = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    files = [str(p) for p in (tmp_path / "lm_eval").rglob("*.json")]
    latest = get_latest_filename(get_results_filenames(files))
    assert latest.endswith(".json") and "drop-1.2" in latest
    res = json.loads(open(latest).read())
    for key in ("results", "versions", "n-shot", "configs", "n-samples", "higher_is_better", "config", "model_name"):
        assert key in res, key
    for task in ("arc_easy", "piqa"):
        r = res["results"][task]
        assert r["acc,none"] == pytest.approx(row[f"{task}_acc"])
        p = r["acc,none"]  # lm-eval's binomial standard error over the 6 documents (0 when all agree)
        assert isinstance(r["acc_stderr,none"], float) and r["acc_stderr,none"] == pytest.approx(
            (p * (1 - p) / 5) ** 0.5
        )
        assert res["n-shot"][task] == 0 and res["n-samples"][task]["effective"] == 6
    table = rendered(make_table(res))
    for task in ("arc_easy", "piqa"):
        r = res["results"][task]
        assert table[(task, "acc")] == pytest.approx((r["acc,none"], r["acc_stderr,none"]), abs=6e-4)


def rendered(table: str) -> dict:
    """lm-eval's markdown table -> {(task, metric): (value, stderr or None)}."""
    out, task = {}, None
    for line in table.splitlines()[2:]:
        cells = [c.strip() for c in line.strip("|").split("|")]
        task = cells[0] or task
        out[(task, cells[4])] = (float(cells[6]), None if cells[8] in ("", "N/A") else float(cells[8]))
    return out
