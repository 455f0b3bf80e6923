"""`ghostsearch export` of a `ghostsearch target` run directory (issue 46): the certified set, repaired
with the certified repair, and the certificate in a model card the hub library parses. The run
directory is a tiny random Llama's config.yaml and a result.json in the format study/target.py writes
(a real target run takes minutes; tests/target covers writing it)."""

from __future__ import annotations

import json

import pytest
import yaml

from ghostsearch.cli import main
from tests.conftest import tiny_model

pytestmark = pytest.mark.slow  # a model load and a repair fit per export (seconds)

STATEMENT = (
    "Certified: remove k=2 blocks [2, 4] with ghosted; ppl_lambada ratio 1.104 (0.95 upper bound 1.187) <= "
    "target 1.25; k=3 failed (est 1.31, upper bound 1.45). P(true drop > target) <= 0.05, for this repair fit "
    "and these data."
)


@pytest.fixture
def target_run(tmp_path, smollm2_tokenizer_dir):
    from transformers import AutoTokenizer

    model = tmp_path / "tiny"
    tiny_model("llama", 6).save_pretrained(model)
    AutoTokenizer.from_pretrained(smollm2_tokenizer_dir).save_pretrained(model)
    (model / "README.md").write_text("---\nlicense: mit\n---\n\nA tiny random Llama.\n")  # the base's own card
    run = tmp_path / "run"
    run.mkdir()
    cfg = {
        "model": str(model),
        "dtype": "fp32",
        "k": 3,
        "calibration": {"dataset": "lambada", "n_seq": 2, "seq_len": 32},
        "recovery": {"dataset": "lambada", "n_seq": 8, "seq_len": 64},
    }
    (run / "config.yaml").write_text(yaml.safe_dump(cfg))
    block = {
        "statement": STATEMENT,
        "metric": "ppl_lambada",
        "target": {"max_ratio": 1.25},
        "level": 0.95,
        "recovery": "ghosted",
        "certified_k": 2,
        "removed": [2, 4],
        "estimate_shown": "1.104",
        "upper_shown": "1.187",
        "items_used": 64,
        "looks": [16, 32, 64],
        "spending": "obrien-fleming",
    }
    cells = {"greedy-perplexity-k3-s0": {"removed": [1, 2, 4], "value": 9.0}}  # the search's largest k
    (run / "result.json").write_text(json.dumps({"cells": cells, "data": {"held_out": ["lambada"]}, "target": block}))
    return run


def test_export_of_a_target_run_is_the_certified_model(target_run, tmp_path, capsys):
    from huggingface_hub import ModelCard

    out = tmp_path / "model"
    assert main(["export", str(target_run), "--out", str(out)]) == 0  # --method: the certified repair
    line = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert line["removed"] == [2, 4] and line["method"] == "ghosted" and line["certified"] is True
    assert "trust_remote_code=True" in line["load"]
    card = ModelCard((out / "README.md").read_text())
    assert card.data.license == "mit" and card.data.library_name == "transformers"  # carried from the base
    assert getattr(card.data, "base_model", None) is None and "local model" in card.text  # no hub id for a local dir
    for s in ("k: 2 blocks removed, [2, 4]", "upper bound 1.187", "Level: 0.95", "Items: 64", "from lambada"):
        assert s in card.text, s
    assert "> " + STATEMENT in card.text and "None" not in card.text

    # another repair than the certified one: exported, said to be outside the certificate
    other = tmp_path / "other"
    assert main(["export", str(target_run), "--method", "none", "--out", str(other)]) == 0
    captured = capsys.readouterr()
    assert json.loads(captured.out.strip().splitlines()[-1])["certified"] is False
    assert "not covered" in captured.err
    text = (other / "README.md").read_text()
    assert "not covered" in text and "## Certificate (`ghostsearch target`)" not in text

    # nothing certified: one line naming the way out, nothing written
    res = json.loads((target_run / "result.json").read_text())
    res["target"].update(certified_k=0, removed=[], statement="Not certified: no k meets ppl_lambada ratio")
    (target_run / "result.json").write_text(json.dumps(res))
    assert main(["export", str(target_run), "--out", str(tmp_path / "none")]) == 2
    err = capsys.readouterr().err
    assert "certified no k" in err and "--remove" in err and not (tmp_path / "none").exists()
    assert main(["export", str(target_run), "--remove", "2", "--out", str(tmp_path / "none")]) == 2
    assert "needs --method" in capsys.readouterr().err
