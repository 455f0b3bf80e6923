"""The ``ghostsearch`` command itself: the command list, help for every flag, one-line errors, and
``score`` equal to the Scorer it wraps."""

from __future__ import annotations

import json

import pytest
import torch
import yaml

from ghostsearch.cli.main import COMMANDS, build_parser, main
from tests.corpora import CALIB


def test_every_command_module_is_listed_described_and_documented(capsys):
    """A module of ghostsearch/cli/ with ``add`` and ``run`` is a command only once it is in COMMANDS:
    none is forgotten, each has a one-line description in ``ghostsearch --help``, and README's
    Commands block shows it."""
    import importlib
    import pkgutil
    import re
    from pathlib import Path

    import ghostsearch.cli

    modules = [
        importlib.import_module(f"ghostsearch.cli.{m.name}") for m in pkgutil.iter_modules(ghostsearch.cli.__path__)
    ]
    commands = {m for m in modules if hasattr(m, "add") and hasattr(m, "run")}
    assert commands == set(COMMANDS.values())
    with pytest.raises(SystemExit) as e:
        main(["--help"])
    assert e.value.code == 0
    out = capsys.readouterr().out
    assert [n for n in COMMANDS if not re.search(rf"^\s+{n}\s+\S", out, re.M)] == []
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    block = readme.split("## Commands", 1)[1].split("```", 2)[1]
    assert [n for n in COMMANDS if not re.search(rf"^ghostsearch {n}\b", block, re.M)] == []


@pytest.mark.parametrize("command", list(COMMANDS))
def test_every_flag_has_help(command):
    sub = next(a for a in build_parser()._actions if a.dest == "cmd").choices[command]  # noqa: SLF001
    missing = [a.dest for a in sub._actions if a.dest != "help" and not a.help]  # noqa: SLF001
    assert missing == []


@pytest.mark.parametrize(
    "argv, message",
    [
        (["score", "configs/smollm2-quick.yaml", "--remove", "1,x"], "not a comma-separated list"),
        (["score", "configs/smollm2-quick.yaml", "nope=1", "--remove", "1"], "unknown config key nope"),
        (["search", "configs/missing.yaml"], "does not exist"),
        (
            ["score", "configs/smollm2-quick.yaml", "objective_params.recovery=ghosted", "--remove", "1"],
            "search.recovery_aware",
        ),
    ],
)
def test_bad_input_is_one_line_exit_2(argv, message, capsys):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1 and "Traceback" not in err


@pytest.mark.slow
def test_score_equals_the_scorer(tiny_model_dir, tmp_path, data_dir, capsys):
    from ghostsearch.config import load_config
    from ghostsearch.scoring import scorer_from_config

    cfg_file = tmp_path / "c.yaml"
    cfg_file.write_text(
        yaml.safe_dump(
            {
                "model": tiny_model_dir,
                "dtype": "fp32",
                "data_dir": data_dir,
                "calibration": {"dataset": CALIB, "n_seq": 2, "seq_len": 32},
            }
        )
    )
    assert main(["score", str(cfg_file), "--remove", "3,1"]) == 0
    row = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert row["removed"] == [1, 3] and row["objective"] == "perplexity" and row["tokens"] == 2 * 32
    cfg = load_config(str(cfg_file))
    sc = scorer_from_config(cfg)
    direct = sc.score(sc.prepare(cfg.objective_spec()), (1, 3)).value
    assert row["value"] == pytest.approx(direct, rel=1e-6)
    torch.set_num_threads(2)
