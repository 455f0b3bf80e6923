"""Faults of the environment (issue 22's probe), against the real ``ghostsearch`` entry point:
SIGTERM and SIGHUP end a search like Ctrl-C (one line, lock released, journal checkpointed, the
local Ray and its agents gone; while it ran, it listened on loopback only); rerunning a finished search adds no
ledger rows; a read-only run
directory or lock is one line before any work. The read-only cases make directories immutable
(``chattr +i``) when running as root, where ``chmod`` does not stop writes, and use ``chmod``
otherwise."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest
import yaml

from ghostsearch.cli.main import main
from ghostsearch.rundir.ledger import read_ledger
from tests.processes import CMD, descendants, run_search, search_process
from tests.processes import env as _env


@pytest.fixture(scope="module")
def deep_model_dir(tmp_path_factory, smollm2_tokenizer_dir) -> str:
    """A tiny random Llama with 24 blocks: C(24, 8) sets, so a long search is still running when
    the signal comes."""
    from transformers import AutoTokenizer

    from tests.conftest import tiny_model

    d = tmp_path_factory.mktemp("tiny-llama-24")
    tiny_model("llama", 24).save_pretrained(d, safe_serialization=True)
    AutoTokenizer.from_pretrained(smollm2_tokenizer_dir).save_pretrained(d)
    return str(d)


def _config(path: Path, model: str, out: Path, **over) -> Path:
    cfg = {
        "model": model,
        "dtype": "fp32",
        "device": "cpu",
        "k": 2,
        "searcher": "greedy",
        "calibration": {"dataset": "lambada", "n_seq": 4, "seq_len": 32},
        "out": str(out),
        "pool": {"actors": 1, "dashboard": False},
        **over,
    }
    path.write_text(yaml.safe_dump(cfg))
    return path


def _wait_rows(run_dir: Path, n: int, proc, timeout: float = 240) -> None:
    t0 = time.time()
    while time.time() - t0 < timeout:
        assert proc.poll() is None, f"the search ended early: {proc.stderr.read()[-2000:]}"
        if (run_dir / "ledger").is_dir() and len(read_ledger(run_dir)) >= n:
            return
        time.sleep(0.1)
    raise TimeoutError(f"fewer than {n} ledger rows after {timeout} s")


@pytest.mark.slow
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP, signal.SIGKILL], ids=["SIGTERM", "SIGHUP", "SIGKILL"])
def test_sigterm_and_sighup_end_a_search_like_ctrl_c(sig, deep_model_dir, tmp_path):
    """Before: SIGTERM printed Ray's C++ stack lines and no ghostsearch line; SIGHUP exited
    silently with a stale lock and an uncompacted journal; after SIGKILL, Ray's two agents lived
    on for about 64 s. Now every process of the local Ray is gone within 10 s of the driver."""
    import psutil
    import pyarrow.parquet as pq

    from ghostsearch.rundir import lock

    out = tmp_path / "run"
    cfg = _config(
        tmp_path / "c.yaml", deep_model_dir, out, k=8, searcher="ga", search={"budget": 100000, "time_budget": 300}
    )
    with search_process(cfg) as p:
        _wait_rows(out, 3, p)
        ray_processes = descendants(p.pid)  # the local Ray this driver started
        assert ray_processes
        # a local Ray listens on loopback only (GCS, raylet, workers, agents; before: all interfaces)
        pids = {p.pid} | {q.pid for q in ray_processes}
        listening = {
            (c.laddr.ip, c.laddr.port)
            for c in psutil.net_connections(kind="inet")
            if c.status == psutil.CONN_LISTEN and c.pid in pids
        }
        assert len(listening) >= 3 and all(ip in ("127.0.0.1", "::ffff:127.0.0.1") for ip, _ in listening), listening
        p.send_signal(sig)
        _, err = p.communicate(timeout=120)
    if sig == signal.SIGKILL:  # nothing of the driver's runs: its local Ray (agents included) ends anyway
        assert p.returncode == -sig
        _, alive = psutil.wait_procs(ray_processes, timeout=10)
        assert alive == [], [" ".join(a.cmdline())[:80] for a in alive]
        lock.acquire(out)  # the kernel released the flock with the driver
        lock.release(out)
        return
    lines = [line for line in err.splitlines() if line.strip()]
    assert p.returncode == 128 + sig, err[-2000:]
    assert lines[-1] == "ghostsearch: interrupted", err[-2000:]
    assert "Traceback" not in err and "*** SIG" not in err and "Token authentication" not in err, err[-2000:]
    # the lock is released (empty: no holder) and free
    assert (out / lock.LOCK_FILE).read_text() == ""
    lock.acquire(out)
    lock.release(out)
    # the journal's rows are in Parquet parts, nothing left in a journal, nothing lost
    journals = [j for j in (out / "ledger" / "_journal").glob("journal-*.jsonl") if j.stat().st_size]
    assert journals == []
    in_parts = sum(pq.read_metadata(f).num_rows for f in (out / "ledger").glob("part-*.parquet"))
    assert in_parts == len(read_ledger(out)) >= 3
    # the local Ray (GCS, raylet, agents, the scorer) ended with the driver
    _, alive = psutil.wait_procs(ray_processes, timeout=10)
    assert alive == [], [" ".join(a.cmdline())[:80] for a in alive]


def all_read_only(path: Path, on: bool) -> None:
    """Every file and folder under ``path`` (and itself) unwritable (immutable as root), or writable again."""
    if os.geteuid() == 0:
        r = subprocess.run(["chattr", "-R", "+i" if on else "-i", str(path)], capture_output=True, text=True)
        if r.returncode != 0:
            pytest.skip(f"running as root and chattr +i is not available here: {r.stderr.strip()}")
    else:
        subprocess.run(["chmod", "-R", "a-w" if on else "u+w", str(path)], check=True)


def journal_lines(run_dir: Path) -> int:
    """Evaluations the ledger's journals hold so far (a line each), cheaper to count than to read the ledger."""
    journal = run_dir / "ledger" / "_journal"
    return sum(f.read_bytes().count(b"\n") for f in journal.glob("*.jsonl")) if journal.is_dir() else 0


def greedy_reference(cfg: Path, n_blocks: int, k: int) -> tuple[list[int], float]:
    """Greedy's answer with every value computed in this process, without Ray: an undisturbed run's."""
    from ghostsearch.config import load_config
    from ghostsearch.recovery.aware import prepare
    from ghostsearch.scoring import scorer_from_config

    c = load_config(str(cfg))
    sc = scorer_from_config(c, threads=1)
    key = prepare(sc, c.objective_spec())
    path: tuple = ()
    for _ in range(k):
        sets = [tuple(sorted((*path, b))) for b in range(n_blocks) if b not in path]
        values = {s: sc.score(key, s).value for s in sets}
        path = min(sets, key=values.__getitem__)
    return list(path), values[path]


@pytest.mark.slow
def test_rerun_of_a_finished_search_adds_no_ledger_rows(deep_model_dir, tmp_path):
    """Before: every rerun appended a cached row per replayed evaluation (136 rows for 106 sets
    after one resume). The answer comes from the ledger, identical. The rerun has another
    pool.threads: fp32 values do not move with the thread count, so an fp32 run records none and
    resumes with any (the bf16 case, refused, is the next test).

    The first run is stopped by its run directory made read-only midway (issue 48: every file and
    folder in it, a search's evaluations still to come): one line, exit 2, no traceback, the
    evaluations ledgered before it kept. Made writable again, the rerun replays them from the ledger
    (no row added for them) and finishes with the answer of an undisturbed run."""
    out = tmp_path / "run"
    cfg = _config(tmp_path / "c.yaml", deep_model_dir, out, k=3)  # 24 + 23 + 22 evaluations
    with search_process(cfg, "pool.threads=1") as p:
        try:
            t0 = time.monotonic()
            while journal_lines(out) < 1:  # cheap to count: the read-only stop lands early in the search
                assert p.poll() is None and time.monotonic() - t0 < 240, p.communicate()[1][-2000:]
                time.sleep(0.01)
            all_read_only(out, True)
            _, err = p.communicate(timeout=240)
        finally:
            all_read_only(out, False)
    lines = [x for x in err.splitlines() if x.strip()]
    assert p.returncode == 2 and "Traceback" not in err, err[-3000:]
    assert lines[-1].startswith("ghostsearch: error: ") and "rerun the same command" in lines[-1], err[-3000:]
    kept = read_ledger(out).to_pylist()
    assert 1 <= len(kept) < 24 + 23 + 22, len(kept)  # stopped midway, what was ledgered before it kept
    r = run_search(cfg, "pool.threads=2")
    assert r.returncode == 0, r.stderr[-2000:]
    assert "cpu_threads" not in json.loads((out / "identity.json").read_text())
    rows = read_ledger(out).to_pylist()
    assert len(rows) == 24 + 23 + 22  # greedy k=3 of 24 blocks, each evaluation ledgered once
    assert {x["eval_id"] for x in kept} <= {x["eval_id"] for x in rows}  # the kept ones not computed again
    answer = json.loads(r.stdout.splitlines()[-1])
    removed, value = greedy_reference(cfg, 24, 3)
    assert answer["removed"] == removed and answer["value"] == pytest.approx(value, rel=1e-5)


@pytest.mark.slow
def test_resume_with_another_thread_count_is_refused_in_bf16_only(tiny_model_dir, tmp_path):
    """A bf16 value on a CPU moves with the thread count (bench/dtype.py: up to 1.3% on SmolLM2), so
    a bf16 run directory resumed by scorers with another pool.threads would mix values: refused in
    one line, nothing written. fp32 values do not move, so an fp32 run resumes with any count: the
    rerun in the test above has another pool.threads than its first run."""
    out = tmp_path / "bf16"
    rows, outputs = [], []
    for threads in (1, 2):
        cfg = _config(tmp_path / f"bf16-{threads}.yaml", tiny_model_dir, out, dtype="bf16")
        r = run_search(cfg, f"pool.threads={threads}")
        rows.append(len(read_ledger(out)))
        outputs.append(r)
    first, second = outputs
    assert first.returncode == 0, first.stderr[-2000:]
    identity = json.loads((out / "identity.json").read_text())
    assert identity.get("cpu_threads") == 1
    errors = [line for line in second.stderr.splitlines() if line.startswith("ghostsearch: error: ")]
    assert second.returncode == 2 and len(errors) == 1 and "Traceback" not in second.stderr, second.stderr
    assert "1-thread CPU scorers" in errors[0] and "pool.threads=1" in errors[0]
    assert json.loads((out / "identity.json").read_text()) == identity
    assert rows == [11, 11]


@pytest.mark.slow
def test_auto_dtype_resumes_in_the_dtype_the_run_was_computed_in(tiny_model_dir, tmp_path):
    """A run directory started where `dtype: auto` is one dtype (fp32 on an AVX2-only CPU) and resumed
    where it is the other (bf16 with AVX512-BF16 or AMX): the scorers load the recorded dtype, said in
    one line, and the run resumes from its ledger. Before, identity.json refused it, and with
    dtype= set explicitly the config's fingerprint did: such a run could not be resumed there at all.
    The other machine is simulated by rewriting identity.json's dtype."""
    from ghostsearch.model.models import resolve_dtype

    out = tmp_path / "run"
    cfg = _config(tmp_path / "c.yaml", tiny_model_dir, out, dtype="auto")
    runs = []
    for _ in range(2):
        r = run_search(cfg)
        assert r.returncode == 0, r.stderr[-2000:]
        runs.append((r, len(read_ledger(out))))
        if len(runs) == 1:
            here = str(resolve_dtype("auto", "cpu")).replace("torch.", "")
            other = "bfloat16" if here == "float32" else "float32"
            identity = json.loads((out / "identity.json").read_text())
            assert identity["dtype"] == here
            identity = {k: v for k, v in identity.items() if k != "cpu_threads"} | {"dtype": other}
            (out / "identity.json").write_text(json.dumps(identity))
            # a finished run is answered from its run directory without loading a model (issue 38):
            # without its result.json the second run resumes from the ledger, which is what this tests
            (out / "result.json").unlink()
    (first, n1), (second, n2) = runs
    assert f"resuming {out} in {other}, the dtype its values were computed in (dtype auto is {here} here)" in (
        second.stderr
    )
    assert n1 == n2 == 11
    assert json.loads((out / "identity.json").read_text())["dtype"] == other
    assert json.loads(second.stdout.splitlines()[-1])["removed"] == json.loads(first.stdout.splitlines()[-1])["removed"]


@contextlib.contextmanager
def read_only(path: Path):
    """``path`` cannot be written to while the block runs: immutable as root, else mode 0555."""
    if os.geteuid() == 0:
        r = subprocess.run(["chattr", "+i", str(path)], capture_output=True, text=True)
        if r.returncode != 0:
            pytest.skip(f"running as root and chattr +i is not available here: {r.stderr.strip()}")
        try:
            yield
        finally:
            subprocess.run(["chattr", "-i", str(path)], check=True)
    else:
        mode = path.stat().st_mode
        path.chmod(0o555 if path.is_dir() else 0o444)
        try:
            yield
        finally:
            path.chmod(mode)


@pytest.fixture
def made_run(tmp_path, tiny_model_dir, monkeypatch):
    """A config and a run directory it wrote (config.yaml, an empty ledger, a released lock)."""
    from ghostsearch.config import load_config, save_config

    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    cfg = _config(tmp_path / "c.yaml", tiny_model_dir, tmp_path / "run")
    run = tmp_path / "run"
    (run / "ledger" / "_journal").mkdir(parents=True)
    save_config(load_config(str(cfg)), run / "config.yaml")
    (run / ".lock").write_text("")
    (run / "result.json").write_text(
        json.dumps({"searchers": {"greedy-perplexity-k2-s0": {"removed": [1, 2], "value": 9.0}}})
    )
    monkeypatch.chdir(tmp_path)
    return cfg, run


def _snapshot(root: Path) -> dict:
    return {
        str(p.relative_to(root)): (p.stat().st_size, p.stat().st_mtime_ns) if p.is_file() else None
        for p in root.rglob("*")
    }


@pytest.mark.parametrize(
    "what, argv, message",
    [
        ("run", ["search", "{cfg}"], "is not writable"),  # resume into a read-only run dir
        ("parent", ["search", "{cfg}", "out={parent}/new"], "is not writable"),  # a new run under a read-only dir
        ("journal", ["search", "{cfg}"], "ledger/_journal is not writable"),  # the ledger's journals read-only
        ("lock", ["search", "{cfg}"], "cannot open the lock of run directory"),  # an unwritable .lock (resume)
        ("run", ["recover", "{run}"], "run directory"),  # recover: before any repair
        ("parent", ["ledger", "{run}", "--csv", "{parent}/ledger.csv"], "--csv"),  # ledger --csv
        ("parent", ["export", "{run}", "--method", "none", "--out", "{parent}/model"], "--out"),  # before loading
    ],
    ids=["resume", "new-run", "journal", "lock", "recover", "ledger-csv", "export"],
)
def test_read_only_is_one_line_before_any_work(what, argv, message, made_run, tmp_path, capsys):
    """Before: OSError 30 tracebacks on a new run, on resume (from .lock), on ledger --csv and on
    export, and recover lost all its work at its last write."""
    cfg, run = made_run
    parent = tmp_path / "ro"
    parent.mkdir()
    target = {"run": run, "parent": parent, "journal": run / "ledger" / "_journal", "lock": run / ".lock"}[what]
    argv = [a.format(cfg=cfg, run=run, parent=parent) for a in argv]
    before = _snapshot(tmp_path)
    with read_only(target):
        code = main(argv)
    err = capsys.readouterr().err
    assert code == 2, err
    assert message in err and err.count("\n") == 1 and err.startswith("ghostsearch: error: "), err
    assert _snapshot(tmp_path) == before


def test_a_write_the_disk_refuses_mid_way_is_one_line(tmp_path):
    """A write that fails after the checks (a disk filling up mid-run: ENOSPC, EFBIG...) is one line
    saying to rerun, not a traceback; nothing half-written is left. The fault is real: the kernel's
    file-size limit (RLIMIT_FSIZE) refuses the CSV's bytes beyond 4 KiB with EFBIG."""
    import resource

    from ghostsearch.rundir.ledger import Ledger

    run = tmp_path / "run"
    run.mkdir()
    ledger = Ledger(run)
    for i in range(200):
        ledger.append(
            {
                "cell": "greedy-perplexity-k2-s0",
                "searcher": "greedy",
                "objective": "perplexity",
                "objective_key": "perplexity|c4",
                "removed": [i % 20, 20 + i % 7],
                "k": 2,
                "fidelity": 1.0,
                "value": 10.0 + i,
                "tokens": 512,
                "seconds": 0.25,
                "cached": False,
                "actor": "a",
                "node": "f" * 56,
                "seed": 0,
                "time": 1_700_000_000.0 + i,
            }
        )
    ledger.close()

    def limit():
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # the write fails with EFBIG instead of killing
        resource.setrlimit(resource.RLIMIT_FSIZE, (4096, 4096))

    out = tmp_path / "ledger.csv"
    r = subprocess.run(
        [*CMD, "ledger", str(run), "--csv", str(out)],
        env=dict(_env(), PYTHONDONTWRITEBYTECODE="1"),
        capture_output=True,
        text=True,
        timeout=300,
        preexec_fn=limit,
    )
    assert r.returncode == 2, r.stderr[-2000:]
    assert r.stderr.count("\n") == 1 and r.stderr.startswith("ghostsearch: error: File too large (EFBIG)"), r.stderr
    assert "rerun the same command" in r.stderr and "Traceback" not in r.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run"]  # no CSV, no temporary file left
