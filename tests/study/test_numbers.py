"""The compare path's typed records against the committed data: a finalist's numbers
(eval_numbers.FinalistNumbers, RUN_DIR/evals/<key>.json) and the contrast rows of looks.json
(looks.ContrastRow). Every committed file reads back and is written again byte for byte; a key that
is not a field fails with one line."""

from __future__ import annotations

import dataclasses
import json
import math
import subprocess
from pathlib import Path

import pytest

from ghostsearch.core.errors import GhostsearchError
from ghostsearch.core.eval_numbers import FinalistNumbers, TaskNumbers
from ghostsearch.core.io import write_json_atomic
from ghostsearch.stats.certify import Certification
from ghostsearch.stats.looks import ContrastRow

ROOT = Path(__file__).resolve().parents[2]


def committed(pattern: str) -> list[Path]:
    out = subprocess.run(["git", "ls-files", pattern], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    return [ROOT / p for p in out.split()]


EVALS = committed("docs/results/**/evals/*.json")
# compare's looks files (contrast rows); a target run's RUN_DIR/target/looks.json is a Certification
LOOKS = [p for p in committed("docs/results/**/looks.json") if p.parent.name != "target"]
TARGET_LOOKS = committed("docs/results/**/target/looks.json")


def test_the_committed_data_is_there():
    assert len(EVALS) >= 15 and len(LOOKS) >= 3  # both write paths: fresh (study-cpu-2) and merged looks
    assert len(TARGET_LOOKS) >= 1  # the SmolLM2 target benchmark (docs/results/bench-target)


@pytest.mark.parametrize("path", EVALS, ids=lambda p: str(p.relative_to(ROOT / "docs" / "results")))
def test_every_committed_evals_file_round_trips_byte_for_byte(path, tmp_path):
    text = path.read_text()
    numbers = FinalistNumbers.from_dict(json.loads(text))
    write_json_atomic(tmp_path / "again.json", numbers.to_dict())  # as compare's _Evaluator.save writes it
    assert (tmp_path / "again.json").read_text() == text
    d = json.loads(text)
    # the fields hold what the keys say
    assert numbers.recovery == d["recovery"] and numbers.items_used == d["items_used"] > 0
    assert numbers.mean_acc == d["mean_acc"] and not numbers.mean_acc_lo > numbers.mean_acc  # NaN at n = 1
    assert set(numbers.tasks) == {k[: -len("_n")] for k in d if k.endswith("_n")}
    for t, x in numbers.tasks.items():
        assert (x.n, x.acc, x.acc_norm, x.acc_stderr) == (
            d[f"{t}_n"],
            d[f"{t}_acc"],
            d.get(f"{t}_acc_norm"),
            d[f"{t}_acc_stderr"],
        )
        assert not x.other  # the native engine's tasks: nothing but acc, acc_norm, stderr, n
    assert {f"ppl_{s}" for s in numbers.perplexity} == {k for k in d if k.startswith("ppl_") and "window" not in k}
    for s, nll in numbers.window_nll.items():
        assert list(nll) == d[f"ppl_{s}_window_nll"] and math.isclose(
            numbers.perplexity[s], math.exp(sum(nll) / len(nll)), rel_tol=1e-4
        )
    # equality is of the numbers, not of the key order
    assert dataclasses.replace(numbers, key_order=()) == numbers


def test_an_unknown_or_misspelt_key_fails_with_one_line():
    d = json.loads(EVALS[0].read_text())
    for bad in ("mean_accc", "items_usd", "hellaswag_acc_nrom", "piqa_accuracy", "recovry", "piqa-acc", "ppl"):
        with pytest.raises(GhostsearchError, match=f"unknown key '{bad}'") as e:
            FinalistNumbers.from_dict({**d, bad: 1.0})
        assert "\n" not in str(e.value)
    with pytest.raises(TypeError):
        FinalistNumbers(mean_accc=0.5)  # type: ignore[call-arg]
    with pytest.raises(dataclasses.FrozenInstanceError):
        FinalistNumbers().mean_acc = 0.5  # type: ignore[misc]


def test_a_record_built_from_fields_writes_the_fresh_evaluations_key_order():
    """Without a key order (built from its fields), to_dict gives evaluate_finalist_specs's order:
    perplexities (LAMBADA's last word after its perplexity), each task's metrics and n, every task's
    stderr, the mean, recovery, items_used; and eval_key where compare hands the numbers on."""
    n = FinalistNumbers(
        tasks={
            "piqa": TaskNumbers(n=4, acc=0.5, acc_norm=0.75, acc_stderr=0.29),
            "boolq": TaskNumbers(n=4, acc=0.25, acc_stderr=0.25),
        },
        mean_acc=0.375,
        mean_acc_stderr=0.19,
        mean_acc_lo=0.0,
        mean_acc_hi=0.75,
        perplexity={"wikitext2": 30.0, "lambada": 40.0},
        window_nll={"wikitext2": (3.4, 3.4)},
        lambada_acc=0.3,
        lambada_lastword_ppl=50.0,
        recovery="none",
        items_used=8,
        eval_key="abc",
    )
    assert list(n.to_dict()) == [
        "ppl_wikitext2",
        "ppl_wikitext2_window_nll",
        "ppl_lambada",
        "lambada_acc",
        "lambada_lastword_ppl",
        "piqa_acc",
        "piqa_acc_norm",
        "piqa_n",
        "boolq_acc",
        "boolq_n",
        "piqa_acc_stderr",
        "boolq_acc_stderr",
        "mean_acc",
        "mean_acc_stderr",
        "mean_acc_lo",
        "mean_acc_hi",
        "recovery",
        "items_used",
        "eval_key",
    ]
    assert FinalistNumbers.from_dict(n.to_dict()) == n and n.to_dict()["ppl_wikitext2_window_nll"] == [3.4, 3.4]


def test_merged_is_the_merge_of_the_flat_forms():
    """merged = {**a, **b}: b's numbers win, every key keeps its first place (compare's merges of
    new rows and later perplexities rely on it to write the same files as before)."""
    a, b = (json.loads(p.read_text()) for p in EVALS[:2])
    b = {k: v for k, v in b.items() if not k.startswith("ppl_")}
    got = FinalistNumbers.from_dict(a).merged(FinalistNumbers.from_dict(b), FinalistNumbers(items_used=99))
    assert got.to_dict() == {**a, **b, "items_used": 99} and list(got.to_dict()) == list({**a, **b})
    ppl = FinalistNumbers.from_dict(a).perplexities().to_dict()
    assert ppl == {k: v for k, v in a.items() if k.startswith(("ppl_", "lambada_"))}
    kept = FinalistNumbers.from_dict(a).without_accuracies(["piqa", "boolq"]).to_dict()
    assert "piqa_acc" not in kept and "mean_acc" not in kept and "items_used" not in kept and "hellaswag_n" in kept


def test_lm_evals_other_metrics_are_kept_under_their_names():
    d = {"wikitext_word_perplexity": 20.5, "wikitext_n": 62, "arc_easy_acc": 0.5, "arc_easy_n": 2}
    n = FinalistNumbers.from_dict(d)
    assert n.tasks["wikitext"].other == {"word_perplexity": 20.5} and n.tasks["arc_easy"].acc == 0.5
    assert n.to_dict() == d and list(n.to_dict()) == list(d)


@pytest.mark.parametrize("path", LOOKS, ids=lambda p: str(p.relative_to(ROOT / "docs" / "results")))
def test_every_committed_looks_file_round_trips_byte_for_byte(path, tmp_path):
    text = path.read_text()
    data = json.loads(text)
    rows = [ContrastRow.from_dict(r) for r in data["contrasts"]]
    assert all(r.verdict in ("differs", "within margin", "open") for r in rows)
    write_json_atomic(tmp_path / "looks.json", {**data, "contrasts": [r.to_dict() for r in rows]})
    assert (tmp_path / "looks.json").read_text() == text


@pytest.mark.parametrize("path", TARGET_LOOKS, ids=lambda p: str(p.relative_to(ROOT / "docs" / "results")))
def test_every_committed_target_looks_file_round_trips_byte_for_byte(path, tmp_path):
    text = path.read_text()
    c = Certification.from_dict(json.loads(text))
    assert all(v.k >= 1 and v.stop in ("certified", "futility", "last look", "not tested") for v in c.ks)
    write_json_atomic(tmp_path / "looks.json", c.to_dict())
    assert (tmp_path / "looks.json").read_text() == text


def test_a_contrast_row_with_a_foreign_or_missing_key_fails_with_one_line():
    row = json.loads(LOOKS[0].read_text())["contrasts"][0]
    with pytest.raises(GhostsearchError, match=r"unknown keys \['verdcit'\]") as e:
        ContrastRow.from_dict({**row, "verdcit": "open"})
    assert "\n" not in str(e.value)
    with pytest.raises(GhostsearchError, match=r"missing keys \['z'\]"):
        ContrastRow.from_dict({k: v for k, v in row.items() if k != "z"})
