"""Every bad input a user can give: exit code 2, one line on stderr naming the problem, no
traceback, and nothing written (the working folder, the run directories and export targets are
byte-for-byte as before). Each case runs the real `ghostsearch` entry point in process, against a
real tiny model directory; none needs Ray (every check comes before Ray starts)."""

from __future__ import annotations

import json
import os

import pytest
import yaml

from ghostsearch.cli.main import main

C, T, W = "{cfg}", "{tiny}", "{w}"

CASES = [
    # config files
    ("config-missing", ["search", f"{W}/missing.yaml"], "does not exist"),
    ("config-is-directory", ["search", f"{W}/cfgdir"], "is not a file"),
    ("config-not-utf8", ["search", f"{W}/latin1.yaml"], "not UTF-8"),
    ("config-invalid-yaml", ["search", f"{W}/bad.yaml"], "not valid YAML"),
    ("config-top-not-mapping", ["search", f"{W}/list.yaml"], "must be a mapping"),
    # overrides and validation
    ("unknown-key", ["search", C, "nope=1"], "unknown config key nope"),
    ("key-typo", ["search", C, "calibration.nseq=4"], "did you mean calibration.n_seq"),
    ("not-key-value", ["search", C, "just-a-word"], "is not key=value"),
    ("k-wrong-type", ["search", C, "k=six"], "k='six' has the wrong type"),
    ("k-zero", ["search", C, "k=0"], "must remove at least one block"),
    ("k-negative", ["search", C, "k=-2"], "must remove at least one block"),
    ("objective-typo", ["search", C, "objective=perplexty"], "unknown objective"),
    ("searcher-typo", ["search", C, "searcher=gredy"], "unknown searcher"),
    ("dtype-unknown", ["search", C, "dtype=fp64"], "dtype='fp64'"),
    ("yaml11-bool-yes", ["search", C, "trust_remote_code=yes"], "write true or false"),
    ("yaml11-bool-off", ["search", C, "pool.dashboard=off"], "write true or false"),
    ("override-unclosed", ["search", C, "search.protected=[0,1"], "unclosed bracket"),
    ("override-section-zero", ["search", C, "calibration=0"], "whole calibration section"),
    ("override-section-empty", ["search", C, "search="], "whole search section"),
    ("compare-empty", ["search", C, "compare.seeds=[]"], "compare.seeds is empty"),
    ("compare-k-zero", ["search", C, "compare.ks=[0]"], "every k must be >= 1"),
    ("compare-concurrent", ["search", C, "compare.concurrent=0"], "compare.concurrent=0 must be >= 1"),
    ("n-seq-zero", ["search", C, "calibration.n_seq=0"], "calibration.n_seq must be positive"),
    ("seq-len-zero", ["search", C, "calibration.seq_len=0"], "calibration.seq_len must be positive"),
    ("micro-batch-zero", ["search", C, "calibration.micro_batch=0"], "micro_batch must be positive"),
    ("per-objective-typo", ["search", C, "calibration.per_objective.margn.n_seq=4"], "unknown objective"),
    ("per-objective-key", ["search", C, "calibration.per_objective.margin.n_sq=4"], "did you mean"),
    (
        "per-objective-dataset",
        ["search", C, "objective=margin", "calibration.per_objective.margin.dataset=c4"],
        "does not suit objective 'margin'",
    ),
    ("dataset-unsuitable", ["search", C, "calibration.dataset=imagenet"], "does not suit objective"),
    ("pool-actors-zero", ["search", C, "pool.actors=0"], "pool.actors and pool.threads must be >= 1"),
    ("pool-threads-zero", ["search", C, "pool.threads=0"], "pool.actors and pool.threads must be >= 1"),
    ("pool-gpus-negative", ["search", C, "pool.gpus_per_actor=-1"], "pool.gpus_per_actor=-1 must be >= 0"),
    ("cache-every-zero", ["search", C, "cache.every=0"], "cache.every=0 must be >= 1"),
    ("cache-prefix-negative", ["search", C, "cache.prefix_runs=-1"], "cache.prefix_runs=-1 must be >= 0"),
    ("time-budget-negative", ["search", C, "search.time_budget=-5"], "search.time_budget=-5 must be positive"),
    ("budget-negative", ["search", C, "search.budget=-1"], "search.budget=-1 must be positive"),
    ("eval-limit-negative", ["search", C, "eval.limit=-3"], "eval.limit=-3 must be >= 1"),
    ("recovery-method", ["search", C, "recovery.method=magic"], "recovery.method='magic'"),
    ("recovery-top-zero", ["search", C, "recovery.top=0"], "recovery.top=0 must be >= 1"),
    ("recovery-ridge-negative", ["search", C, "recovery.ridge=-1"], "recovery.ridge=-1.0 must be >= 0"),
    ("recovery-aware-method", ["search", C, "search.recovery_aware=linearpatch"], "supports ghosted"),
    ("aware-window-zero", ["search", C, "search.aware_window=0"], "search.aware_window=0"),
    ("objective-params-recovery", ["search", C, "objective_params.recovery=ghosted"], "search.recovery_aware"),
    ("data-dir-missing", ["search", C, f"data_dir={W}/nodata"], "does not exist"),
    ("params-unknown-searcher", ["search", C, "search.params.nosuch.x=1"], "unknown searcher"),
    ("params-bad-parameter", ["search", C, "search.params.beam.widht=4"], "searcher 'beam'"),
    # models
    ("model-path-missing", ["search", C, f"model={W}/nomodel"], "does not exist"),
    ("model-dir-no-config", ["search", C, f"model={W}/cfgdir"], "has no config.json"),
    ("gguf-random-bytes", ["search", C, f"model={W}/random.gguf"], "is not a GGUF file"),
    ("gguf-truncated", ["search", C, f"model={W}/truncated.gguf"], "damaged or truncated"),
    ("gguf-missing", ["search", C, f"model={W}/missing.gguf"], "does not exist"),
    ("model-dir-no-tokenizer", ["search", C, f"model={W}/notokenizer"], "has no tokenizer"),
    ("model-dir-no-tokenizer-score", ["score", C, f"model={W}/notokenizer", "--remove", "1"], "has no tokenizer"),
    ("seq-len-beyond-context", ["search", C, "calibration.seq_len=4096"], "longer than the model's context"),
    ("k-all-blocks", ["search", C, "k=6"], "would remove all 6 blocks"),
    ("protected-out-of-range", ["search", C, "search.protected=[10]"], "out of range"),
    # score
    ("remove-not-ints", ["score", C, "--remove", "1,x"], "not a comma-separated list"),
    ("remove-repeats", ["score", C, "--remove", "1,1"], "repeats block"),
    ("remove-out-of-range", ["score", C, "--remove", "99"], "out of range"),
    ("remove-negative", ["score", C, "--remove", "-1,3"], "out of range"),
    ("remove-all", ["score", C, "--remove", "0,1,2,3,4,5"], "removes all 6 blocks"),
    ("remove-missing", ["score", C], "--remove"),
    ("threads-negative", ["score", C, "--remove", "1", "--threads", "-1"], "must be 1 or more"),
    ("threads-not-int", ["score", C, "--remove", "1", "--threads", "x"], "is not an integer"),
    ("score-seq-len-beyond-context", ["score", C, "calibration.seq_len=1024", "--remove", "1"], "model's context"),
    # run directories and the pool
    ("out-is-file", ["search", C, f"out={W}/afile"], "is a file"),
    ("out-under-file", ["search", C, f"out={W}/afile/run"], "which is a file"),
    ("out-foreign-dir", ["search", C, f"out={W}/foreign"], "is not a ghostsearch run directory"),
    ("out-other-config", ["search", C, "k=3", f"out={W}/run"], "written by a different config"),
    ("pool-larger-than-machine", ["search", C, "pool.actors=512"], "CPUs but this machine has"),
    ("jobs-address", ["search", C, "--address", "http://127.0.0.1:8265"], "Jobs (dashboard) address"),
    ("compare-jobs-address", ["compare", C, "pool.address=http://10.0.0.1:8265"], "--address 10.0.0.1:6379"),
    # export
    (
        "export-onto-run-dir",
        ["export", f"{W}/run", "--method", "none", "--out", f"{W}/run", "--force"],
        "is a ghostsearch run directory",
    ),
    (
        "export-onto-foreign-dir",
        ["export", f"{W}/run", "--method", "none", "--out", f"{W}/foreign", "--force"],
        "was not written by ghostsearch export",
    ),
    ("export-onto-file", ["export", f"{W}/run", "--method", "none", "--out", f"{W}/afile"], "is a file"),
    ("export-exists-no-force", ["export", f"{W}/run", "--method", "none", "--out", f"{W}/export"], "--force"),
    ("export-config-no-remove", ["export", C, "--method", "none", "--out", f"{W}/new"], "needs --remove"),
    ("export-bad-method", ["export", f"{W}/run", "--method", "magic", "--out", f"{W}/new"], "invalid choice"),
    # recover, eval, ledger, pool, the command itself
    ("recover-not-run-dir", ["recover", f"{W}/foreign"], "has no config.yaml"),
    ("recover-top-zero", ["recover", f"{W}/run", "--top", "0"], "must be 1 or more"),
    ("eval-run-dir-with-remove", ["eval", f"{W}/run", "--remove", "1"], "drop --remove"),
    ("eval-config-no-remove", ["eval", C], "needs --remove"),
    ("eval-nothing", ["eval", f"{W}/nowhere"], "neither a run directory"),
    ("ledger-not-run-dir", ["ledger", f"{W}/foreign"], "has no ledger"),
    ("pool-up-no-address", ["pool", "up", C, "pool.name=x"], "needs a running Ray cluster"),
    ("pool-status-no-address", ["pool", "status"], "needs the cluster's address"),
    ("unknown-command", ["serch", C], "invalid choice"),
    # issue 22's fault probe: each of these was a traceback, a hang or silently wrong
    ("searcher-budget-not-number", ["search", C, "search.params.ga.budget=abc"], "search.params.ga.budget='abc' must"),
    ("greedy-budget-not-number", ["search", C, "search.params.greedy.budget=abc"], "must be a positive number"),
    ("searcher-budget-nan", ["search", C, "search.params.greedy.budget=.nan"], "must be a positive number"),
    ("searcher-params-not-mapping", ["search", C, "search.params.ga=3"], "must be a mapping of ga's parameters"),
    ("config-list-with-override", ["search", f"{W}/list.yaml", "k=2"], "got a YAML list"),
    ("config-scalar-with-override", ["search", f"{W}/scalar.yaml", "k=2"], "got a YAML int"),
    ("config-string-with-override", ["search", f"{W}/string.yaml", "k=2"], "got a YAML str"),
    ("config-zero-is-not-empty", ["search", f"{W}/scalar0.yaml"], "got a YAML int 0"),
    ("head-chunk-zero", ["search", C, "objective_params.head_chunk=0"], "head_chunk=0 must be an integer >= 1"),
    ("head-chunk-zero-score", ["score", C, "objective_params.head_chunk=0", "--remove", "1"], "head_chunk=0"),
    ("budget-nan", ["search", C, "search.budget=.nan"], "search.budget=nan is not a finite number"),
    ("budget-inf", ["search", C, "search.budget=.inf"], "search.budget=inf is not a finite number"),
    ("lr-nan", ["search", C, "recovery.lr=.nan"], "recovery.lr=nan is not a finite number"),
    ("eval-limit-flag-negative", ["eval", f"{W}/run", "--limit", "-5"], "-5 must be 1 or more"),
    ("eval-limit-flag-zero", ["eval", f"{W}/run", "--limit", "0"], "0 must be 1 or more"),
    (
        "compare-searchers-twice",
        ["compare", C, "compare.searchers=[fastblock,fastblock]"],
        "'fastblock' more than once",
    ),
    ("compare-ks-twice", ["compare", C, "compare.ks=[2,2]"], "compare.ks lists 2 more than once"),
    ("objective-params-deep", ["search", C, "objective_params.a.b.c=1"], "objective_params.a is a mapping"),
    (
        "objective-params-unknown",
        ["search", C, "objective_params.head_chnk=5"],
        "did you mean objective_params.head_chunk",
    ),
    (
        "objective-params-kl-top-k",
        ["search", C, "objective=kl", "objective_params.top_k=x"],
        "top_k='x' must be an integer",
    ),
    ("model-path-is-file", ["search", C, f"model={W}/afile"], "is a file, not a model directory"),
    ("long-list-one-bad-value", ["search", C, "compare.ks=[" + "1," * 999 + "x]"], "has 'x' at position 999 (of 1000)"),
    ("long-override-not-key-value", ["search", C, "x" * 3000], "chars) is not key=value"),
    ("closed-ray-address", ["search", C, "--address", "127.0.0.1:1"], "cannot reach the Ray cluster at 127.0.0.1:1"),
    # a repair the model's blocks cannot take (ReplaceMe on Gemma-3's normed MLP output): refused before any
    # search, data or weights, not at the fit (study 3 met it there, after hours of evaluation)
    (
        "compare-replaceme-gemma3",
        ["compare", C, f"model={W}/gemma3", "compare.ks=[2]", "compare.recovery=[none,ghosted,replaceme]"],
        "compare.recovery has 'replaceme', which cannot repair",
    ),
    (
        "target-replaceme-gemma3",
        [
            "target",
            C,
            f"model={W}/gemma3",
            "target.recovery=replaceme",
            "target.quality.max_drop=null",
            "target.quality.max_ratio=1.25",
            "target.ks=[1,2]",
        ],
        "target.recovery has 'replaceme', which cannot repair",
    ),
    (
        "export-replaceme-gemma3",
        ["export", C, f"model={W}/gemma3", "--remove", "2", "--method", "replaceme", "--out", f"{W}/new"],
        "--method has 'replaceme', which cannot repair",
    ),
    (
        "eval-replaceme-gemma3",
        ["eval", C, f"model={W}/gemma3", "--remove", "2", "--recovery", "replaceme", "--tasks", ""],
        "--recovery has 'replaceme', which cannot repair",
    ),
    ("recover-replaceme-gemma3", ["recover", f"{W}/run-gemma3", "--method", "replaceme"], "post_feedforward_layernorm"),
    ("pool-status-closed-address", ["pool", "status", "--address", "127.0.0.1:1"], "cannot reach the Ray cluster"),
    # issue 48: paths, model files, run-directory files and target settings refused before any work
    ("ledger-csv-device", ["ledger", f"{W}/run", "--csv", "/dev/zero"], "is not a regular file"),
    ("ledger-csv-fifo", ["ledger", f"{W}/run", "--csv", f"{W}/fifo"], "is not a regular file"),
    ("ledger-csv-missing-folder", ["ledger", f"{W}/run", "--csv", f"{W}/nofolder/l.csv"], "does not exist"),
    ("ledger-csv-in-run-ledger", ["ledger", f"{W}/run", "--csv", f"{W}/run/ledger/l.csv"], "would write over"),
    ("ledger-csv-directory", ["ledger", f"{W}/run", "--csv", f"{W}/cfgdir"], "is a directory"),
    ("out-dangling-symlink", ["search", C, f"out={W}/dangling"], "which does not exist"),
    ("model-bad-tokenizer-json", ["search", C, f"model={W}/badtok"], "tokenizer.json is not a tokenizer"),
    ("model-bad-tokenizer-config", ["search", C, f"model={W}/badtokcfg"], "tokenizer_config.json is not a JSON"),
    ("seq-len-one-perplexity", ["search", C, "calibration.seq_len=1"], "is too short"),
    ("identity-garbage", ["search", C, f"out={W}/run-ident"], "identity.json is not a JSON object"),
    ("result-garbage", ["search", C, f"out={W}/run-result"], "result.json is not a JSON object"),
    ("target-metric-bleu-speedup", ["target", C, "target.quality.metric=bleu", "target.speedup=1000"], "bleu"),
    (
        "target-looks-beyond-draw",
        ["target", C, "target.looks=[16,100000]", "target.quality.max_ratio=1.5", "eval.perplexity=[lambada]"]
        + ["target.ks=[1]", "target.recovery=none"],
        "target.looks ends at 100000 but the held-out draw has",
    ),
]


@pytest.fixture(scope="module")
def work(tmp_path_factory, tiny_model_dir):
    """A working folder with every kind of bad target, built once for the module (each case checks that
    it leaves the folder as it found it); the tests chdir into it."""
    with pytest.MonkeyPatch.context() as monkeypatch:
        yield _work(tmp_path_factory.mktemp("bad-input"), tiny_model_dir, monkeypatch)


def _work(tmp_path, tiny_model_dir, monkeypatch):
    from ghostsearch.config import load_config, save_config

    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    w = tmp_path / "w"
    w.mkdir()
    base = {
        "model": tiny_model_dir,
        "dtype": "fp32",
        "device": "cpu",
        "k": 2,
        "searcher": "oneshot",
        "calibration": {"dataset": "lambada", "n_seq": 2, "seq_len": 32},
        "out": str(w / "out"),
        "pool": {"actors": 1, "dashboard": False},
    }
    (w / "c.yaml").write_text(yaml.safe_dump(base))
    (w / "cfgdir").mkdir()
    (w / "latin1.yaml").write_bytes("model: caf\xe9\n".encode("latin-1"))
    (w / "bad.yaml").write_text("k: [1, 2\n")
    (w / "list.yaml").write_text("- k\n- 2\n")
    (w / "scalar.yaml").write_text("3\n")
    (w / "scalar0.yaml").write_text("0\n")
    (w / "string.yaml").write_text("hello\n")
    (w / "random.gguf").write_bytes(os.urandom(4096))
    (w / "truncated.gguf").write_bytes(b"GGUF\x03\x00\x00\x00\x07")
    (w / "afile").write_text("not a directory")
    (w / "foreign").mkdir()
    (w / "foreign" / "notes.txt").write_text("mine")
    run = w / "run"
    (run / "ledger").mkdir(parents=True)
    save_config(load_config(str(w / "c.yaml"), [f"out={run}"]), run / "config.yaml")
    (run / "result.json").write_text(
        json.dumps({"searchers": {"oneshot-perplexity-k2-s0": {"removed": [1, 2], "value": 9.0}}})
    )
    from tests.conftest import tiny_model

    tiny_model("gemma3", 6, vocab=49152).save_pretrained(w / "gemma3", safe_serialization=True)
    from transformers import AutoTokenizer

    AutoTokenizer.from_pretrained(tiny_model_dir).save_pretrained(w / "gemma3")  # SmolLM2's, as the tiny Llama's
    tiny_model("llama", 4).save_pretrained(w / "notokenizer", safe_serialization=True)
    run3 = w / "run-gemma3"
    (run3 / "ledger").mkdir(parents=True)
    save_config(load_config(str(w / "c.yaml"), [f"out={run3}", f"model={w / 'gemma3'}"]), run3 / "config.yaml")
    (run3 / "result.json").write_text((run / "result.json").read_text())
    os.mkfifo(w / "fifo")
    (w / "dangling").symlink_to(w / "gone")
    for name, bad in (("badtok", "tokenizer.json"), ("badtokcfg", "tokenizer_config.json")):
        (w / name).mkdir()
        for f in os.listdir(tiny_model_dir):
            (w / name / f).symlink_to(os.path.join(tiny_model_dir, f))
        (w / name / bad).unlink()
        (w / name / bad).write_text('{"model": {"type": "BPE", "vocab"')  # cut short
    for name, f, text in (("run-ident", "identity.json", "garbage"), ("run-result", "result.json", "[1, 2")):
        (w / name / "ledger").mkdir(parents=True)
        save_config(load_config(str(w / "c.yaml"), [f"out={w / name}"]), w / name / "config.yaml")
        (w / name / f).write_text(text)
    (w / "export").mkdir()
    (w / "export" / ".ghostsearch-export").write_text("{}")
    (w / "export" / "config.json").write_text("{}")
    monkeypatch.chdir(w)
    return w


def _snapshot(root):
    return {
        str(p.relative_to(root)): (p.stat().st_size, p.stat().st_mtime_ns) if p.is_file() else None
        for p in root.rglob("*")
    }


def test_the_table_is_large_enough():
    assert len(CASES) >= 60 and len({c[0] for c in CASES}) == len(CASES)


@pytest.mark.parametrize("argv, message", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_bad_input_is_one_line_exit_2_nothing_written(argv, message, work, tiny_model_dir, capsys):
    argv = [a.replace(W, str(work)).replace(C, str(work / "c.yaml")).replace(T, tiny_model_dir) for a in argv]
    before = _snapshot(work)
    try:
        code = main(argv)
    except SystemExit as e:  # argparse's own errors
        code = e.code
    err = capsys.readouterr().err
    assert code == 2, err
    assert message in err, err
    assert err.count("\n") == 1 and err.startswith("ghostsearch: error: ") and "Traceback" not in err, err
    assert len(err) <= 420, f"{len(err)} characters: {err[:200]}"  # a long list or override is not echoed whole
    assert _snapshot(work) == before
