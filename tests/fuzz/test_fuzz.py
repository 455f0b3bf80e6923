"""A fuzzer of bad input by class (issue 48), so that the next bad input is found here, not by a user.

Generated, not listed: every config key (walked from the ``Config`` dataclasses, so a new key is covered
without touching this file) x a class of bad value (wrong type, zero, negative, huge, NaN/inf, empty,
duplicate, unknown name, and Hypothesis's own values of every JSON type); every path argument x a class of
bad path (missing parent, dangling symlink, a device, a FIFO, a directory where a file is wanted, inside a
run directory); every run-directory file x a damage (truncated, garbage, wrong schema, NaN, empty). Each
runs the real ``ghostsearch`` entry point in process, before any Ray (RAY_ADDRESS names a closed port, so
a run that passes every check stops at once, in one line): the property is exit 0 or 2, on exit 2 exactly
one line and no traceback, and the working folder byte for byte as before.

The fast lane runs a bounded number of examples (``FAST``); the slow lane a larger sweep (``SWEEP``).
Hypothesis prints the failing example and ``@reproduce_failure`` blob (``print_blob``); its seed is fixed
per run by ``derandomize`` in the fast lane, so a failure there reproduces exactly.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os

import pytest
import yaml

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from ghostsearch.cli.main import main  # noqa: E402
from ghostsearch.config import Config  # noqa: E402

FAST = settings(
    max_examples=25,
    deadline=None,
    derandomize=True,
    database=None,
    print_blob=True,
    suppress_health_check=list(HealthCheck),
)
SWEEP = settings(
    max_examples=300, deadline=None, database=None, print_blob=True, suppress_health_check=list(HealthCheck)
)


def config_keys(cls=Config, prefix: str = "") -> list[str]:
    """Every leaf key of the config, from its dataclasses (a new field is fuzzed without a change here)."""
    out = []
    for f in dataclasses.fields(cls):
        if f.default is not dataclasses.MISSING:
            default = f.default
        elif f.default_factory is not dataclasses.MISSING:
            default = f.default_factory()
        else:
            default = None
        if dataclasses.is_dataclass(default):
            out += config_keys(type(default), f"{prefix}{f.name}.")
        else:
            out.append(prefix + f.name)
    return out


KEYS = config_keys()
# one YAML text per class of bad value (the override's right-hand side, as a user types it)
CLASSES = {
    "wrong-type-str": "x",
    "wrong-type-list": "[1, x]",
    "wrong-type-map": "{a: 1}",
    "wrong-type-bool": "true",
    "zero": "0",
    "negative": "-3",
    "huge": "1e300",
    "huge-int": str(10**30),
    "nan": ".nan",
    "inf": ".inf",
    "minus-inf": "-.inf",
    "empty-str": "''",
    "empty-list": "[]",
    "empty-map": "{}",
    "null": "null",
    "duplicate": "[1, 1]",
    "duplicate-names": "[greedy, greedy]",
    "unknown-name": "nosuchname",
    "unknown-key": None,  # key.nosuch=1: a key that does not exist below this one
}
# values Hypothesis makes up: any JSON-like value, written as YAML flow
JSONISH = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=12),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
    max_leaves=6,
)


def flow(value) -> str:
    if isinstance(value, float) and not math.isfinite(value):
        return ".nan" if math.isnan(value) else (".inf" if value > 0 else "-.inf")
    return yaml.safe_dump(value, default_flow_style=True, width=10**6).strip().removesuffix("...").strip()


@pytest.fixture(scope="module")
def work(tmp_path_factory, tiny_model_dir):
    """A folder with a config on the tiny random Llama and a run directory of it."""
    from ghostsearch.config import load_config, save_config

    w = tmp_path_factory.mktemp("fuzz")
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
    run = w / "run"
    (run / "ledger").mkdir(parents=True)
    save_config(load_config(str(w / "c.yaml"), [f"out={run}"]), run / "config.yaml")
    (run / "result.json").write_text(
        json.dumps({"cells": {"oneshot-perplexity-k2-s0": {"removed": [1, 2], "value": 9.0}}})
    )
    (w / "afile").write_text("a file")
    (w / "adir").mkdir()
    os.mkfifo(w / "fifo")
    (w / "dangling").symlink_to(w / "gone")
    return w


def snapshot(root):
    return {
        str(p.relative_to(root)): (p.stat().st_size, p.stat().st_mtime_ns) if p.is_file() else None
        for p in sorted(root.rglob("*"))
        if not p.is_fifo()
    }


def run_cli(argv, work, capsys, monkeypatch) -> tuple[int, str]:
    monkeypatch.setenv("RAY_ADDRESS", "127.0.0.1:1")  # any Ray: one line at once, never a real start
    monkeypatch.chdir(work)
    before = snapshot(work)
    try:
        code = main(argv)
    except SystemExit as e:  # argparse's own errors
        code = e.code
    err = capsys.readouterr().err
    assert code in (0, 2), f"{argv}: exit {code}\n{err[-3000:]}"
    if code == 2:
        lines = [x for x in err.replace("\r", "\n").splitlines() if x.startswith("ghostsearch: error:")]
        assert len(lines) == 1 and "Traceback" not in err, f"{argv}:\n{err[-3000:]}"
        assert len(lines[0]) <= 420, lines[0][:300]
    assert snapshot(work) == before, f"{argv} wrote into the working folder"
    return code, err


def key_type(key: str, cls=Config):
    """The annotated type of a config key (``calibration.seed`` -> int)."""
    import typing

    head, _, rest = key.partition(".")
    tp = typing.get_type_hints(cls)[head]
    return key_type(rest, tp) if rest else tp


def takes_float(key: str) -> bool:
    import typing

    tp = key_type(key)
    return tp is float or float in typing.get_args(tp)


# classes no key can hold, so that every one is refused by the checks, before Ray or any other work: a NaN
# or infinity, and an integer beyond 64 bits (no seed or count holds one; issue 48: seed=10**30 passed every
# check, ran the whole search and ended in an OverflowError traceback from the ledger, exit 1, its rows lost).
# A float key takes 10**30 as the float 1e30 (a large number, not a bad one)
REFUSED_FIRST = {".nan", ".inf", "-.inf", str(10**30)}


def check_config(key: str, text: str | None, work, capsys, monkeypatch) -> None:
    """``search`` with one bad override: stops before Ray in one line (or at Ray's closed address); a value
    of a class in REFUSED_FIRST always before Ray."""
    over = f"{key}.nosuch=1" if text is None else f"{key}={text}"
    code, err = run_cli(["search", str(work / "c.yaml"), over, "--no-progress"], work, capsys, monkeypatch)
    if text in REFUSED_FIRST and not (text == str(10**30) and takes_float(key)):
        assert code == 2 and "cannot reach the Ray cluster" not in err, f"{over} was not refused before Ray"


def config_cases():
    return st.tuples(st.sampled_from(KEYS), st.sampled_from(list(CLASSES.values())))


@FAST
@given(case=config_cases())
def test_every_config_key_x_every_bad_class(case, work, capsys, monkeypatch):
    check_config(*case, work, capsys, monkeypatch)


@FAST
@given(key=st.sampled_from(KEYS), value=JSONISH)
def test_every_config_key_x_made_up_values(key, value, work, capsys, monkeypatch):
    check_config(key, flow(value), work, capsys, monkeypatch)


@FAST
@given(key=st.sampled_from(KEYS), text=st.sampled_from(sorted(REFUSED_FIRST)))
def test_every_config_key_x_a_value_no_key_holds_is_refused_before_any_work(key, text, work, capsys, monkeypatch):
    check_config(key, text, work, capsys, monkeypatch)


@pytest.mark.slow
@SWEEP
@given(case=config_cases())
def test_sweep_config_keys_x_bad_classes(case, work, capsys, monkeypatch):
    check_config(*case, work, capsys, monkeypatch)


@pytest.mark.slow
@SWEEP
@given(key=st.sampled_from(KEYS), value=JSONISH)
def test_sweep_config_keys_x_made_up_values(key, value, work, capsys, monkeypatch):
    check_config(key, flow(value), work, capsys, monkeypatch)


# ---------------------------------------------------------------- paths
PATHS = {
    "missing-parent": "{w}/nofolder/x",
    "dangling-symlink": "{w}/dangling",
    "device": "/dev/zero",
    "fifo": "{w}/fifo",
    "directory": "{w}/adir",
    "file": "{w}/afile",
    "inside-run-dir": "{w}/run/ledger/new.csv",
    "run-dir-file": "{w}/run/result.json",
}
# every path argument a command takes: argv with {p} where the path goes
PATH_ARGS = {
    "ledger --csv": ["ledger", "{w}/run", "--csv", "{p}"],
    "ledger RUN_DIR": ["ledger", "{p}"],
    "search out=": ["search", "{w}/c.yaml", "out={p}"],
    "search model=": ["search", "{w}/c.yaml", "model={p}"],
    "search data_dir=": ["search", "{w}/c.yaml", "data_dir={p}"],
    "search CONFIG": ["search", "{p}"],
    "export --out": ["export", "{w}/run", "--method", "none", "--out", "{p}"],
    "recover RUN_DIR": ["recover", "{p}"],
}


VALID = {("export --out", "missing-parent")}  # export makes the folders it is told to: a good path, not a bad one


def check_path(arg: str, cls: str, work, capsys, monkeypatch) -> None:
    if (arg, cls) in VALID:
        return
    p = PATHS[cls].format(w=work)
    if arg == "ledger --csv" and cls == "file":
        p = str(work / "afile")  # not written by ledger: refused
    argv = [a.format(w=work, p=p) for a in PATH_ARGS[arg]]
    run_cli(argv, work, capsys, monkeypatch)


@FAST
@given(arg=st.sampled_from(sorted(PATH_ARGS)), cls=st.sampled_from(sorted(PATHS)))
def test_every_path_argument_x_every_bad_path(arg, cls, work, capsys, monkeypatch):
    check_path(arg, cls, work, capsys, monkeypatch)


# ---------------------------------------------------------------- run-directory files
DAMAGES = {
    "truncated": lambda text: text[: max(1, len(text) // 2)],
    "garbage": lambda text: "\x00\x01 not json at all {{{",
    "wrong-schema": lambda text: json.dumps(["a", "list", "not", "an", "object"]),
    "nan": lambda text: text.replace("9.0", "NaN") if "9.0" in text else json.dumps({"value": float("nan")}),
    "empty": lambda text: "",
}
RUN_FILES = {
    "identity.json": '{"model_id": "x", "dtype": "float32"}',
    "result.json": None,  # the fixture's own
    "pool.json": '{"actors": 1}',
    ".lock": '{"pid": 1, "host": "h"}',
    "config.yaml": None,
    "target/looks.json": '{"ks": []}',
}


BEFORE_RAY = ("identity.json", "result.json")  # read by a resumed run: a damaged one refused before any work


def check_run_file(name: str, damage: str, work, capsys, monkeypatch, tmp_path) -> None:
    import shutil

    run = tmp_path / "run"
    if run.exists():
        shutil.rmtree(run)
    shutil.copytree(work / "run", run)
    f = run / name
    f.parent.mkdir(parents=True, exist_ok=True)
    text = f.read_text() if f.exists() else RUN_FILES[name]
    f.write_text(DAMAGES[damage](text))

    def files():  # .lock is the lock's: a stale one is taken over and released (rundir/lock.py)
        return {k: v for k, v in snapshot(tmp_path).items() if not k.endswith(".lock")}

    before = files()
    for argv in (
        ["search", str(work / "c.yaml"), f"out={run}", "--no-progress"],
        ["ledger", str(run)],
    ):
        code, err = run_cli(argv, work, capsys, monkeypatch)
        if argv[0] == "search" and name in BEFORE_RAY and damage in ("truncated", "garbage", "wrong-schema", "empty"):
            assert code == 2 and "cannot reach the Ray cluster" not in err, f"{name} ({damage}) was not refused first"
        assert files() == before, f"{argv} changed the damaged run directory ({name}, {damage})"


@FAST
@given(name=st.sampled_from(sorted(RUN_FILES)), damage=st.sampled_from(sorted(DAMAGES)))
def test_every_run_file_x_every_damage(name, damage, work, capsys, monkeypatch, tmp_path_factory):
    check_run_file(name, damage, work, capsys, monkeypatch, tmp_path_factory.mktemp("damaged"))
