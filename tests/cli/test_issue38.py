"""Issue 38's fault probe, each case against the real ``ghostsearch`` entry point (in process) or
the run directory's readers: every file a run reads is validated as it is read (a foreign or
damaged file is one line, or moved aside and recomputed, never a traceback and never a wrong
answer), and every file a command writes is checked against the run's own files. None of these
needs Ray or a model (each is refused or answered before either)."""

from __future__ import annotations

import json
import math

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import yaml

from ghostsearch.cli.main import main
from ghostsearch.rundir.ledger import QUARANTINE, SCHEMA, Ledger, LedgerRow, compact, read_ledger


def _row(removed, value, **kw) -> dict:
    return dict(
        cell="greedy-perplexity-k2-s0",
        searcher="greedy",
        objective="perplexity",
        objective_key="ppl-key",
        removed=list(removed),
        k=len(removed),
        fidelity=1.0,
        value=value,
        cached=False,
        **kw,
    )


@pytest.fixture
def run(tmp_path, tiny_model_dir):
    """A finished-looking run directory: config.yaml, result.json and a ledger of three rows."""
    from ghostsearch.config import load_config, save_config

    d = tmp_path / "run"
    (d / "ledger").mkdir(parents=True)
    cfg = {
        "model": tiny_model_dir,
        "dtype": "fp32",
        "device": "cpu",
        "k": 2,
        "searcher": "greedy",
        "calibration": {"dataset": "lambada", "n_seq": 2, "seq_len": 32},
        "out": str(d),
        "pool": {"actors": 1, "dashboard": False},
    }
    (tmp_path / "c.yaml").write_text(yaml.safe_dump(cfg))
    save_config(load_config(str(tmp_path / "c.yaml")), d / "config.yaml")
    (d / "result.json").write_text(
        json.dumps({"cells": {"greedy-perplexity-k2-s0": {"removed": [1, 2], "value": 9.0}}})
    )
    led = Ledger(d)
    for removed, value in (([1], 5.0), ([1, 2], 9.0), ([2, 3], 12.0)):
        led.append(_row(removed, value))
    led.close()
    compact(d)
    return d


def _files(root):
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def _one_line(capsys, code, message):
    err = capsys.readouterr().err
    assert code == 2, err
    assert message in err, err
    assert err.count("\n") == 1 and err.startswith("ghostsearch: error: ") and "Traceback" not in err, err


# --- every file a command writes is checked against the run's own files ------------------------


@pytest.mark.parametrize("target", ["config.yaml", "result.json", "identity.json", "ledger/x.csv", "env.json"])
def test_ledger_csv_never_writes_over_a_run_file(run, target, capsys):
    """Before: `ledger RUN --csv RUN/config.yaml` wrote the CSV over the run's config (rc 0); the
    run could then neither resume nor be recovered."""
    (run / "identity.json").write_text("{}")
    (run / "env.json").write_text("{}")
    before = _files(run)
    _one_line(capsys, main(["ledger", str(run), "--csv", str(run / target)]), "of the run directory")
    assert _files(run) == before


def test_ledger_csv_never_writes_over_another_programs_file(run, tmp_path, capsys):
    mine = tmp_path / "notes.csv"
    mine.write_text("my,own\n1,2\n")
    _one_line(capsys, main(["ledger", str(run), "--csv", str(mine)]), "was not written by this command")
    assert mine.read_text() == "my,own\n1,2\n"


def test_ledger_csv_replaces_its_own_csv_and_may_go_beside_the_run_files(run, tmp_path, capsys):
    out = tmp_path / "ledger.csv"
    assert main(["ledger", str(run), "--csv", str(out)]) == 0
    assert main(["ledger", str(run), "--csv", str(out)]) == 0  # a rerun replaces its own output
    assert len(out.read_text().splitlines()) == 4
    assert main(["ledger", str(run), "--csv", str(run / "ledger.csv")]) == 0  # a new file in the run dir


def test_check_output_refuses_export_files(tmp_path):
    from ghostsearch.core.errors import GhostsearchError
    from ghostsearch.core.io import check_output

    (tmp_path / "exp").mkdir()
    (tmp_path / "exp" / ".ghostsearch-export").write_text("{}")
    with pytest.raises(GhostsearchError, match="inside the exported model directory"):
        check_output(tmp_path / "exp" / "x.parquet", "--out")
    with pytest.raises(GhostsearchError, match="is a directory"):
        check_output(tmp_path / "exp", "--out")


# --- every file a run reads is validated as it is read ----------------------------------------


def test_a_parquet_part_of_another_schema_is_quarantined_not_read_as_a_row(run, capsys):
    """Before: a valid Parquet file with one column ``x`` was folded in as an all-null row;
    compaction then deleted it and `ledger` failed every time (TypeError in ledger.py)."""
    foreign = run / "ledger" / "part-00000000000000000001-foreign.parquet"
    pq.write_table(pa.table({"x": [1, 2]}), foreign)
    assert len(read_ledger(run)) == 3
    compact(run)
    assert not foreign.exists() and (run / "ledger" / QUARANTINE / foreign.name).exists()  # moved, not deleted
    assert pq.read_table(run / "ledger" / QUARANTINE / foreign.name).column("x").to_pylist() == [1, 2]
    assert main(["ledger", str(run), "--csv", "-"]) == 0
    assert len(capsys.readouterr().out.splitlines()) == 4


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf])
def test_a_non_finite_value_in_a_part_is_left_out_and_the_good_rows_kept(run, bad):
    """Before: a NaN value in a part changed the answer silently ([16, 17] at 47.78 instead of [5, 17]
    at 47.35): non-finite values passed the row check and parts were not checked at all."""
    rows = [{**_row([4, 5], bad), "eval_id": "bad"}, {**_row([0, 5], 3.0), "eval_id": "good"}]
    part = run / "ledger" / "part-00000000000000000002-nan.parquet"
    pq.write_table(pa.Table.from_pylist(rows, schema=SCHEMA), part)
    values = read_ledger(run).column("value").to_pylist()
    assert all(math.isfinite(v) for v in values) and 3.0 in values and len(values) == 4
    compact(run)
    assert (run / "ledger" / QUARANTINE / part.name).exists()  # the original kept, aside
    assert sorted(read_ledger(run).column("value").to_pylist()) == [3.0, 5.0, 9.0, 12.0]


def test_a_non_finite_value_in_a_journal_line_is_left_out(run):
    j = run / "ledger" / "_journal" / "journal-x-1.jsonl"
    j.write_text(json.dumps({**_row([4, 5], 1.0), "eval_id": "n", "value": float("nan")}) + "\n")
    assert len(read_ledger(run)) == 3


def test_a_journal_line_of_a_ledgered_candidate_under_a_new_eval_id_is_one_evaluation(run):
    """Before: a copied journal line (same cell, objective, set, fidelity; another eval_id) was kept
    as a second row."""
    row = read_ledger(run).to_pylist()[0]
    j = run / "ledger" / "_journal" / "journal-x-2.jsonl"
    j.write_text(json.dumps({**row, "eval_id": "another"}) + "\n")
    assert len(read_ledger(run)) == 3
    cached = {**row, "eval_id": "a-cache-hit", "cached": True}  # a cache hit is a row of its own
    j.write_text(json.dumps({**row, "eval_id": "another"}) + "\n" + json.dumps(cached) + "\n")
    assert len(read_ledger(run)) == 4


def test_a_journal_folder_that_is_a_file_is_moved_aside(run):
    """Before: `ledger/_journal` as a file was a traceback on every resume (FileExistsError)."""
    (run / "ledger" / "_journal").rmdir() if (run / "ledger" / "_journal").is_dir() else None
    (run / "ledger" / "_journal").write_text("not a folder")
    led = Ledger(run)
    led.append(LedgerRow.from_dict(_row([0], 7.0)))
    led.close()
    assert len(read_ledger(run)) == 4
    assert [p.read_text() for p in (run / "ledger" / QUARANTINE).glob("_journal-*")] == ["not a folder"]


def test_a_lock_file_holding_a_bare_number_is_taken_over(run):
    """Before: a `.lock` holding `12345` was a traceback (AttributeError in lock.py)."""
    from ghostsearch.rundir import lock

    (run / ".lock").write_text("12345")
    lock.acquire(run)
    lock.release(run)


@pytest.mark.parametrize("text", ["{not json", "[1, 2]", "\xff"])
def test_identity_json_that_is_not_a_json_object_is_one_line(run, text):
    """Before: a traceback in layout.py (json.loads) on every resume."""
    from ghostsearch.config import load_config
    from ghostsearch.core.errors import GhostsearchError
    from ghostsearch.rundir.layout import check_identity, resumed_dtype

    (run / "identity.json").write_text(text)
    with pytest.raises(GhostsearchError, match="identity.json is not a JSON object"):
        check_identity(run, {"model": "m"})
    with pytest.raises(GhostsearchError, match="identity.json is not a JSON object"):
        resumed_dtype(load_config(str(run / "config.yaml"), ["dtype=auto"]), run)


@pytest.mark.parametrize(
    "cell",
    [{"removed": "1,2", "value": 9.0}, {"removed": [1, "2"], "value": 9.0}, {"removed": [1, 2], "value": "nan"}],
    ids=["removed-string", "removed-mixed", "value-string"],
)
@pytest.mark.parametrize("command", ["recover", "export", "eval"])
def test_result_json_of_the_wrong_shape_is_one_line_before_any_work(run, cell, command, tmp_path, capsys):
    """Before: `removed` as a string reached check_removed as characters (TypeError, stack.py:348)."""
    (run / "result.json").write_text(json.dumps({"cells": {"greedy-perplexity-k2-s0": cell}}))
    argv = {
        "recover": ["recover", str(run)],
        "export": ["export", str(run), "--method", "none", "--out", str(tmp_path / "exp")],
        "eval": ["eval", str(run)],
    }[command]
    _one_line(capsys, main(argv), "is not a ghostsearch result")


def test_a_config_with_a_duplicate_key_is_one_line(tmp_path, capsys):
    """Before: `k: 2` ... `k: 6` silently took the last."""
    (tmp_path / "dup.yaml").write_text("k: 2\nsearcher: greedy\nk: 6\n")
    _one_line(capsys, main(["search", str(tmp_path / "dup.yaml")]), "key 'k' appears twice (lines 1 and 3)")
    (tmp_path / "dup2.yaml").write_text("calibration:\n  n_seq: 4\n  n_seq: 8\n")
    _one_line(capsys, main(["plan", str(tmp_path / "dup2.yaml")]), "key 'n_seq' appears twice")


# --- export: concurrent writers, killed writers, a full disk ----------------------------------


def _tiny(tiny_model_dir):
    from transformers import AutoModelForCausalLM

    return AutoModelForCausalLM.from_pretrained(tiny_model_dir)


def test_a_second_export_to_one_out_without_force_fails_and_keeps_the_first(tiny_model_dir, tmp_path, monkeypatch):
    """Before: two concurrent exports to one --out (no --force) both exited 0 and both reported the
    directory, which held only one of them. Now the directory appears by one atomic rename, which
    fails for the second (simulated: its check_target ran before the first finished)."""
    from ghostsearch.core.errors import GhostsearchError
    from ghostsearch.recovery import export as ex

    model, out = _tiny(tiny_model_dir), tmp_path / "exp"
    ex.export(model, [1], "none", None, out)
    first = (out / ".ghostsearch-export").read_text()
    monkeypatch.setattr(ex, "check_target", lambda out_dir, force=False: out)
    with pytest.raises(GhostsearchError, match="written by another process while this export ran"):
        ex.export(model, [2], "none", None, out)
    assert (out / ".ghostsearch-export").read_text() == first
    assert [p.name for p in tmp_path.iterdir()] == ["exp"]  # its temporary directory is gone too


def test_an_export_removes_what_a_killed_export_left(tiny_model_dir, tmp_path):
    """Before: SIGKILL during export left a hidden temporary directory (255 MB for SmolLM2) that later
    exports never removed. A temporary of a live process (this one) is left alone."""
    import os

    from ghostsearch.recovery.export import export

    dead = tmp_path / ".exp.tmp-999999999-abc"  # no such pid
    live = tmp_path / f".exp.tmp-{os.getpid()}-xyz"
    for d in (dead, live):
        d.mkdir()
        (d / "model.safetensors").write_bytes(b"x" * 100)
    export(_tiny(tiny_model_dir), [1], "none", None, tmp_path / "exp")
    assert not dead.exists() and live.exists()


def test_an_export_onto_a_full_disk_is_one_line(tiny_model_dir, tmp_path, monkeypatch, capsys):
    """Before: `SafetensorError ... os error 28` as a traceback. Now the OSError it is, which the CLI
    prints in one line (simulated: save_pretrained raises safetensors' message)."""
    import errno

    from ghostsearch.recovery import export as ex

    model = _tiny(tiny_model_dir)

    def full(*a, **k):
        raise RuntimeError("Error while serializing: IoError(Os { code: 28, kind: StorageFull, message: ... })")

    monkeypatch.setattr(type(ex.physically_prune(model, [1])), "save_pretrained", full)
    with pytest.raises(OSError) as e:
        ex.export(model, [1], "none", None, tmp_path / "exp")
    assert e.value.errno == errno.ENOSPC and list(tmp_path.iterdir()) == []


# --- eval and export refuse early; eval evaluates something -------------------------------------


@pytest.mark.parametrize(
    "argv, message",
    [
        (["eval", "{cfg}", "--remove", "3,3"], "repeats block"),
        (["eval", "{cfg}", "--remove", "99"], "out of range"),
        (["export", "{cfg}", "--remove", "1,1", "--method", "none", "--out", "{w}/exp"], "repeats block"),
        (["export", "{cfg}", "--remove", "0,1,2,3,4,5", "--method", "none", "--out", "{w}/exp"], "removes all 6"),
        (["eval", "{run}", "--tasks", "", "eval.perplexity=[]"], "nothing to evaluate"),
        (["eval", "{cfg}", "--remove", "1", "--tasks", "", "eval.perplexity=[]"], "nothing to evaluate"),
        (["eval", "{run}", "--out", "{run}/config.yaml"], "would write over config.yaml"),
        (["eval", "{run}", "--out", "{run}/result.json"], "would write over result.json"),
        (["eval", "{cfg}", "--remove", "1", "--out", "{w}/c.yaml"], "was not written by this command"),
    ],
    ids=[
        "eval-repeat",
        "eval-range",
        "export-repeat",
        "export-all",
        "eval-nothing-run",
        "eval-nothing-config",
        "eval-out-config",
        "eval-out-result",
        "eval-out-foreign",
    ],
)
def test_eval_and_export_refuse_before_the_data_and_the_model(argv, message, run, tmp_path, capsys, monkeypatch):
    """Before: `export --remove 1,1` and `eval --remove 3,3` refused only after the data plan and the
    model load; `eval --tasks '' eval.perplexity=[]` evaluated nothing and wrote a row of nulls."""
    from ghostsearch.model import models

    def no_load(*a, **k):
        raise AssertionError("the model was loaded before the input was checked")

    monkeypatch.setattr(models, "load_configured", no_load)
    monkeypatch.setattr("ghostsearch.data.dataplan.plan", no_load)
    argv = [a.format(cfg=tmp_path / "c.yaml", run=run, w=tmp_path) for a in argv]
    before = _files(tmp_path)
    _one_line(capsys, main(argv), message)
    assert _files(tmp_path) == before


def test_eval_on_a_read_only_run_directory_refuses_before_any_work(run, capsys, monkeypatch):
    """Before: eval computed everything, then failed with a message about the ledger keeping what it
    holds, which is not true of eval."""
    import os

    from ghostsearch.model import models

    monkeypatch.setattr(models, "load_configured", lambda *a, **k: pytest.fail("model loaded"))
    real = os.access
    monkeypatch.setattr(os, "access", lambda p, m: False if str(p) == str(run.absolute()) else real(p, m))
    _one_line(capsys, main(["eval", str(run)]), "eval: the output directory")


def test_recover_moves_a_damaged_recovery_parquet_aside_before_the_work(run):
    """Before: recover computed its rows, printed them, then failed on the old file (ArrowInvalid:
    Parquet magic bytes not found) and saved nothing."""
    from ghostsearch.run.recover import recover

    (run / "recovery.parquet").write_bytes(b"PAR1 damaged")
    rows = recover(run, "none", 1)
    assert pq.read_table(run / "recovery.parquet").num_rows == len(rows) == 1
    assert [p.read_bytes() for p in run.glob("recovery.parquet.damaged-*")] == [b"PAR1 damaged"]


# --- one thread count and dtype rule for every command that scores a run's sets ----------------


def test_recover_eval_export_score_with_the_searchs_threads_and_dtype(run, caplog):
    """Before: recover, eval and export of a run scored in the driver with torch's thread count (all
    cores) while the search's actors used pool.threads (1): bf16 values moved (69.945 vs the search's
    69.824). Now: identity.json's cpu_threads, else pool.threads, and identity.json's dtype for auto."""
    from ghostsearch.config import load_config
    from ghostsearch.rundir import scoring_settings

    cfg = load_config(str(run / "config.yaml"), ["pool.threads=3", "dtype=auto", "device=cpu"])
    assert scoring_settings(run, cfg)[1] == 3  # nothing recorded: the pool's count
    (run / "identity.json").write_text(json.dumps({"dtype": "bfloat16", "device": "cpu", "cpu_threads": 1}))
    got, threads = scoring_settings(run, cfg)
    assert (got.dtype, threads) == ("bfloat16", 1)  # what the values were computed with
    assert scoring_settings(run, cfg, 2)[1] == 2 and "move with the thread count" in caplog.text


# --- a rerun that the ledger fully answers: no Ray, no model ------------------------------------


def _finished(run, tiny_model_dir):
    """``run`` as a finished greedy search: result.json's answer, identity.json of this model."""
    from ghostsearch.model.models import model_identity
    from ghostsearch.rundir.cell import CellResult

    res = CellResult(
        cell="greedy-perplexity-k2-s0",
        searcher="greedy",
        objective="perplexity",
        k=2,
        seed=0,
        removed=(1, 2),
        value=9.0,
        evaluations=3,
        budget_used=3,
        cache_hits=0,
        wall_seconds=1.0,
        dense_value=4.0,
        relative_change=1.25,
    )
    (run / "result.json").write_text(json.dumps({"cells": {res.cell: res.to_dict()}}))
    ident = {"model": tiny_model_dir, "model_id": model_identity(tiny_model_dir), "dtype": "float32", "device": "cpu"}
    (run / "identity.json").write_text(json.dumps(ident))


def test_a_rerun_the_ledger_fully_answers_starts_no_ray_and_loads_no_model(run, tiny_model_dir, monkeypatch, capsys):
    """Before: a rerun of a finished quick search still started Ray and loaded the model (71 s)."""
    from ghostsearch.model import models
    from ghostsearch.pool import cluster

    _finished(run, tiny_model_dir)
    monkeypatch.setattr(cluster, "connect", lambda *a, **k: pytest.fail("Ray started"))
    monkeypatch.setattr(models, "load_configured", lambda *a, **k: pytest.fail("model loaded"))
    before = _files(run)
    assert main(["search", str(run / "config.yaml"), "--no-progress"]) == 0
    out = json.loads(capsys.readouterr().out.splitlines()[-1])
    assert (out["removed"], out["value"], out["dense_value"]) == ([1, 2], 9.0, 4.0)
    assert _files(run) == before  # read only


@pytest.mark.parametrize("damage", ["ledger-lost-the-answer", "other-model-content", "other-value"])
def test_a_rerun_the_ledger_does_not_answer_goes_the_usual_way(run, tiny_model_dir, damage, monkeypatch):
    from ghostsearch.pool import cluster

    _finished(run, tiny_model_dir)
    if damage == "ledger-lost-the-answer":
        for p in (run / "ledger").glob("part-*"):
            p.unlink()
    elif damage == "other-model-content":
        ident = json.loads((run / "identity.json").read_text())
        (run / "identity.json").write_text(json.dumps({**ident, "model_id": "dir:sha256=0000"}))
    else:
        res = json.loads((run / "result.json").read_text())
        res["cells"]["greedy-perplexity-k2-s0"]["value"] = 8.5
        (run / "result.json").write_text(json.dumps(res))

    class Started(Exception):
        pass

    def connect(*a, **k):
        raise Started

    monkeypatch.setattr(cluster, "connect", connect)
    monkeypatch.setattr(cluster, "check_local_capacity", lambda *a, **k: None)
    with pytest.raises(Started):
        main(["search", str(run / "config.yaml"), "--no-progress"])


# --- the smaller items ------------------------------------------------------------------------


def test_the_two_k_errors_name_one_range():
    """Before: k=40 said "set k to 1..29", then k=29 said "larger than the 28 unprotected blocks"."""
    from ghostsearch.core.errors import GhostsearchError
    from ghostsearch.search import Space

    for k in (40, 30, 29, 0):
        with pytest.raises(GhostsearchError, match=r"set k to 1\.\.28") as e:
            Space(30, k, frozenset({0, 29}))
        assert "search.protected keeps 2" in str(e.value) or k == 0
    with pytest.raises(GhostsearchError, match=r"would remove all 30 blocks; set k to 1\.\.29"):
        Space(30, 30, frozenset())


def test_searching_an_export_or_a_model_without_whole_weights_is_one_line(tiny_model_dir, tmp_path, capsys):
    """Before: searching an export gave transformers' "model type ghostsearch_pruned ... your version
    of Transformers is out of date"; a model directory without weights or with a truncated
    safetensors file was an OSError / SafetensorError traceback (66 lines on search)."""
    import shutil

    (tmp_path / "c.yaml").write_text(yaml.safe_dump({"k": 1, "pool": {"dashboard": False}}))
    exp, bare, cut = tmp_path / "exp", tmp_path / "bare", tmp_path / "cut"
    shutil.copytree(tiny_model_dir, exp)
    (exp / ".ghostsearch-export").write_text("{}")
    bare.mkdir()
    shutil.copy(f"{tiny_model_dir}/config.json", bare)
    shutil.copytree(tiny_model_dir, cut)
    (f,) = cut.glob("*.safetensors")
    f.write_bytes(f.read_bytes()[: f.stat().st_size // 2])
    cases = [(exp, "is a ghostsearch export"), (bare, "has no weights"), (cut, "is truncated")]
    for model, message in cases:
        _one_line(capsys, main(["search", str(tmp_path / "c.yaml"), f"model={model}", f"out={tmp_path}/o"]), message)


def test_the_progress_bar_never_shows_inf():
    """Before: `best=inf` after evaluations 2-4, while result.json's history had a value after the first."""
    from ghostsearch.run.runner import Progress

    bar = Progress(10, "cell", enabled=False)
    assert bar.shown() == "-"
    bar.told(84.29)
    assert bar.shown() == "84.29"


def test_python_m_ghostsearch_cli_runs():
    """Before: `python -m ghostsearch.cli` did not run (only `python -m ghostsearch`)."""
    import subprocess
    import sys

    r = subprocess.run([sys.executable, "-m", "ghostsearch.cli", "--version"], capture_output=True, text=True)
    assert r.returncode == 0 and r.stdout.startswith("ghostsearch "), r.stderr


def test_setup_sh_is_quiet_and_says_it_is_done_and_what_to_run_next():
    """Before: setup printed ~200 lines (pip's, the editable-install notice among them) and no closing
    line. Checked on the script's text (running it is CI's first step, .ci/run)."""
    from pathlib import Path

    text = (Path(__file__).resolve().parents[2] / "scripts" / "setup.sh").read_text()
    installs = [line for line in text.replace("\\\n", " ").splitlines() if "pip install" in line]
    assert installs and all(line.lstrip().startswith("step ") for line in installs), installs
    assert '>>"$LOG" 2>&1' in text and "setup: done" in text and "ghostsearch search" in text


def test_weights_that_cannot_be_mapped_are_one_line(run, tmp_path, monkeypatch, capsys):
    """Before: `score` under a small address-space limit was torch's `RuntimeError: unable to mmap`
    traceback (simulated: the model load raises it)."""
    import ghostsearch.scoring as scoring

    def fail(*a, **k):
        raise RuntimeError("unable to mmap 538090408 bytes from file <model.safetensors>: Cannot allocate memory (12)")

    monkeypatch.setattr(scoring, "scorer_from_config", fail)
    _one_line(capsys, main(["score", str(tmp_path / "c.yaml"), "--remove", "1"]), "unable to mmap")


@pytest.mark.slow
def test_pool_json_best_after_a_resume_counts_the_ledgers_values(tiny_model_dir, tmp_path, ray_local):
    """Before: after a resume, pool.json's per-cell ``best`` counted only the values that invocation
    computed (63.32 instead of 62.19). A real search (Ray, tiny model), then a resume that replays the
    best pair from the ledger and computes one worse pair again: pool.json's best is the run's best.
    Both searches run in this process on one local Ray (each starts and ends its own pool on it)."""
    from ghostsearch.config import load_config
    from ghostsearch.run.runner import search
    from tests.cli.test_faults import _config

    out = tmp_path / "run"
    cfg = load_config(str(_config(tmp_path / "c.yaml", tiny_model_dir, out, k=2, searcher="greedy")))
    cell = "greedy-perplexity-k2-s0"

    def answer() -> tuple[list[int], float]:
        c = search(cfg, progress=False)["cells"][cell]
        return list(c["removed"]), c["value"]

    first = answer()
    assert json.loads((out / "pool.json").read_text())["cells"][cell]["best"] == first[1]
    rows = read_ledger(out).to_pylist()
    pairs = sorted((r["value"], r["removed"]) for r in rows if r["k"] == 2)
    worse = pairs[-1][1]  # a pair the resume computes again: the broker's own best would be its value
    assert pairs[0] == (first[1], first[0]) and pairs[-1][0] > first[1]
    (part,) = (out / "ledger").glob("part-*.parquet")  # compacted at the end of the search
    kept = [r for r in rows if r["removed"] != worse]
    pq.write_table(pa.Table.from_pylist(kept, schema=SCHEMA), part)
    (out / "result.json").unlink()  # the run resumes from its ledger

    assert answer() == first
    pool = json.loads((out / "pool.json").read_text())
    assert pool["searchers"]["greedy"]["computed"] == 1  # only the removed pair was computed again
    assert (pool["cells"][cell]["best"], pool["cells"][cell]["best_removed"]) == (first[1], first[0])
