"""identity.json: what determines a value must match on resume, or the run is refused in one line
and the file is left as it was (check_identity; the end-to-end thread-count case is in
tests/cli/test_faults.py)."""

from __future__ import annotations

import json

import pytest

from ghostsearch.core.errors import GhostsearchError
from ghostsearch.rundir.layout import check_identity

FP32 = {"model": "smollm2-135m", "dtype": "float32", "device": "cpu", "calibration": {"ppl|c4": "ab" * 32}}


def test_a_machine_that_resolves_auto_otherwise_is_refused_with_why(tmp_path):
    check_identity(tmp_path, FP32)
    before = (tmp_path / "identity.json").read_text()
    with pytest.raises(GhostsearchError, match=r"dtype 'float32', this run has 'bfloat16' \(dtype auto is bf16 on"):
        check_identity(tmp_path, {**FP32, "dtype": "bfloat16", "cpu_threads": 1})
    assert (tmp_path / "identity.json").read_text() == before


def test_cpu_threads_are_checked_where_recorded_and_new_data_is_added(tmp_path):
    bf16 = {**FP32, "dtype": "bfloat16", "cpu_threads": 2}
    check_identity(tmp_path, bf16)
    with pytest.raises(GhostsearchError, match=r"2-thread CPU scorers, this run's have 1.*pool\.threads=2"):
        check_identity(tmp_path, {**bf16, "cpu_threads": 1})
    check_identity(tmp_path, {**bf16, "calibration": {"margin|cs": "cd" * 32}})  # same threads, another objective
    saved = json.loads((tmp_path / "identity.json").read_text())
    assert saved["cpu_threads"] == 2 and set(saved["calibration"]) == {"ppl|c4", "margin|cs"}


def test_auto_resumes_in_the_recorded_dtype_and_an_explicit_one_is_left_to_the_check(tmp_path):
    from ghostsearch.config import load_config
    from ghostsearch.rundir.layout import resumed_dtype

    auto, fp32 = load_config(None, ["dtype=auto", "device=cpu"]), load_config(None, ["dtype=fp32", "device=cpu"])
    assert resumed_dtype(auto, tmp_path) is None  # a new run directory: auto resolves here
    check_identity(tmp_path, {**FP32, "dtype": "bfloat16", "cpu_threads": 1})
    assert resumed_dtype(auto, tmp_path) == "bfloat16"
    assert resumed_dtype(fp32, tmp_path) is None  # explicit: check_identity refuses a mismatch
