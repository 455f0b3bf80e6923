"""The native evaluator (ghostsearch.evaluation.native): packed items equal one sequence per
request, finalists start at their first removed block over dense states bounded by
eval.cache_gib, per-item rows to Parquet; and parity with lm-eval's HFLM on all eight tasks
(identical per-item predictions and accuracies, log-likelihoods equal to 1e-4 relative): a tiny
random Llama and SmolLM2, each dense, pruned and pruned + ghosted."""

from __future__ import annotations

import dataclasses
import math

import pytest
import torch

from ghostsearch.config import Config
from ghostsearch.core.errors import GhostsearchError
from ghostsearch.data import corpora as data
from ghostsearch.evaluation.evaluate import loglikelihoods, task_config, zero_shot_finalists
from ghostsearch.evaluation.native import (
    evaluate_finalists_native,
    loglikelihoods_finalists,
    make_batch,
    pack_doc,
    pack_docs,
    plans,
    resolve_max_length,
    shared_head,
    state_bytes,
    task_docs,
    write_item_rows,
)
from ghostsearch.model.stack import Stack, physically_prune
from ghostsearch.recovery.export import pruned_model
from ghostsearch.recovery.repair import fit
from tests.conftest import tiny_model
from tests.corpora import PROSE

TASKS = list(data.MC_TASKS)


@pytest.fixture(scope="module")
def tiny(smollm2_tokenizer_dir):
    from transformers import AutoTokenizer

    torch.set_num_threads(2)
    return tiny_model("llama", 6), AutoTokenizer.from_pretrained(smollm2_tokenizer_dir)


def eval_cfg(limit, tasks=TASKS, **kw):
    """The first ``limit`` documents of each task (eval.sample=first: lm-eval's ``limit``, which the
    parity tests compare against; the default random draw is tests/data/test_items.py's)."""
    cfg = Config()
    cfg.eval.tasks, cfg.eval.limit, cfg.eval.batch_size, cfg.eval.sample = list(tasks), limit, 4, "first"
    for k, v in kw.items():
        setattr(cfg.eval, k, v)
    return cfg.eval


def ghosted(model, tok, removed, data_dir):
    cfg = Config(data_dir=data_dir)
    cfg.recovery.n_seq, cfg.recovery.seq_len = 8, 64
    return fit(model, tok, list(removed), cfg, "ghosted")


def reference_model(model, removed, ops):
    return pruned_model(model, ops) if ops else physically_prune(model, removed) if removed else model


def rows_of(rows, f, task):
    return [r for r in rows if r.finalist == f and r.task == task]


def test_packed_items_equal_one_sequence_per_request(tiny, data_dir):
    """Every task, dense / pruned / pruned + ghosted: the packed, prefix-cached log-likelihoods equal
    evaluate.loglikelihoods on the physically pruned (and repaired) model, one sequence per request."""
    model, tok = tiny
    finalists = [((), None), ((2, 3), None), ((2, 3), ghosted(model, tok, (2, 3), data_dir))]
    _, rows = evaluate_finalists_native(model, tok, finalists, eval_cfg(3), data_dir, progress=False)
    for f, (removed, ops) in enumerate(finalists):
        ref_model = reference_model(model, removed, ops)
        for task in TASKS:
            docs = task_docs(task, data_dir, 3)
            ref = loglikelihoods(ref_model, tok, [r for d in docs for r in d.requests])
            ours = [ll for r in rows_of(rows, f, task) for ll in r.lls]
            assert len(ours) == len(ref)
            for a, (b, _) in zip(ours, ref):
                assert a == pytest.approx(b, rel=1e-5, abs=1e-5), (task, removed, ops is not None)


def test_packing_layouts(tiny, data_dir):
    """BoolQ's one-token answers share one input (the prompt, once); WinoGrande shares the sentence
    start, each option's branch holds its own (identical) continuation, scored inside the branch."""
    model, tok = tiny
    max_len = resolve_max_length(model, tok)
    boolq = task_docs("boolq", data_dir, 1)[0]
    p = pack_doc(tok, boolq, 0, max_len)
    assert p.ids == tok.encode(boolq.requests[0][0]) and set(p.seg) == {0}
    assert p.target == [tok.encode(boolq.requests[0][0] + " no")[-1], tok.encode(boolq.requests[0][0] + " yes")[-1]]
    wino = task_docs("winogrande", data_dir, 1)[0]
    (c1, rest), (c2, _) = wino.requests
    p = pack_doc(tok, wino, 0, max_len)
    shared = p.seg.count(0)
    assert tok.encode(c1)[:shared] == tok.encode(c2)[:shared] and tok.encode(c1)[shared] != tok.encode(c2)[shared]
    assert set(p.seg) == {0, 1, 2} and all(p.seg[i] == 1 + r for i, r in zip(p.pred, p.req))
    assert len(p.ids) < sum(len(tok.encode(c + rest)) - 1 for c in (c1, c2))


def test_finalists_start_at_their_first_removed_block(tiny, data_dir):
    """Block calls counted: every block runs once per micro-batch for the dense states; a finalist
    runs only its blocks after its first removed one (ghosted: the same start)."""
    model, tok = tiny
    calls = [0] * 6
    hooks = [
        b.register_forward_pre_hook(lambda m, a, i=i: calls.__setitem__(i, calls[i] + 1))
        for i, b in enumerate(model.model.layers)
    ]
    try:
        finalists = [((4, 5), None), ((2,), None), ((3,), ghosted(model, tok, (3,), data_dir))]
        calls[:] = [0] * 6
        evaluate_finalists_native(model, tok, finalists, eval_cfg(8, ["arc_easy"]), data_dir, progress=False)
    finally:
        for h in hooks:
            h.remove()
    mb = 2  # 8 items in micro-batches of 4
    assert calls == [mb, mb, mb, 2 * mb, 3 * mb, 3 * mb]


def test_merged_rows_give_every_item_its_own_values_with_less_padding(tiny, data_dir):
    """Items of unequal lengths merged into rows (each sees only itself, at its own positions) give the
    log-likelihoods one item per row gives, from fewer computed tokens (issue 49: the padding of a
    micro-batch of unequal items ran every block)."""
    model, tok = tiny
    docs = [d for t in ("hellaswag", "boolq") for d in task_docs(t, data_dir, 3)]
    stack, max_len = Stack(model), resolve_max_length(model, tok)
    finals = plans(stack, [((2, 3), None)])
    one, n = pack_docs(tok, docs, max_len, 6)
    many, n2 = pack_docs(tok, docs, max_len, 6, pair_cost=0.0)

    def tokens(mbs):  # every row padded to its micro-batch's longest
        return sum(len(mb) * max(len(p.ids) for p in mb) for mb in mbs)

    assert n == n2 and len(many) == len(one) and tokens(many) < 0.85 * tokens(one)
    assert any(p.part for mb in many for p in mb)
    a, top_a = loglikelihoods_finalists(stack, one, n, finals, 1 << 30)
    b, top_b = loglikelihoods_finalists(stack, many, n, finals, 1 << 30)
    assert torch.allclose(a, b, rtol=1e-5, atol=1e-6), (a - b).abs().max()
    assert torch.equal(top_a, top_b)


def test_lm_head_runs_once_per_predicting_position(tiny, data_dir):
    """Every choice of a document predicts its first answer token from the same position: the LM head runs
    once per distinct position (boolq's two one-token answers: one row), with the values and greedy flags
    of one row per answer token (issue 49: the head was 10% of native's time)."""
    model, tok = tiny
    docs = [d for t in ("boolq", "arc_easy") for d in task_docs(t, data_dir, 2)]
    stack, max_len = Stack(model), resolve_max_length(model, tok)
    mb = pack_docs(tok, docs, max_len, 8)[0][0]
    batch = make_batch(mb, torch.float32)
    pred, target = batch.extra["pred"], batch.extra["target"]
    x = torch.randn(len(mb) * max(len(p.ids) for p in mb), model.config.hidden_size)  # the rows' final states
    seen = []
    head = stack.logits

    def counted(x, normed=False):
        seen.append(x.shape[0])
        return head(x, normed=normed)

    stack.logits = counted  # type: ignore[method-assign]
    try:
        lp, top = shared_head(stack, x, pred, target)
    finally:
        del stack.logits
    ref_lp, ref_top = stack.token_logprobs_top(x[pred], target)
    assert sum(seen) == len(set(pred.tolist())) < len(pred)
    assert torch.allclose(lp, ref_lp, rtol=1e-5, atol=1e-5) and torch.equal(top, ref_top)


def test_cache_cap_is_respected_and_changes_nothing(tiny, data_dir):
    model, tok = tiny
    finalists = [((1,), None), ((4,), None)]
    big, small = {}, {}
    r_big, rows_big = evaluate_finalists_native(
        model, tok, finalists, eval_cfg(12, ["hellaswag"]), data_dir, progress=False, stats=big
    )
    batches, _ = pack_docs(tok, task_docs("hellaswag", data_dir, 12), resolve_max_length(model, tok), 4)
    cap = max(state_bytes(mb, Stack(model), 2) for mb in batches)  # room for the largest micro-batch only
    r_small, rows_small = evaluate_finalists_native(
        model, tok, finalists, eval_cfg(12, ["hellaswag"], cache_gib=cap / 2**30), data_dir, progress=False, stats=small
    )
    assert 0 < small["cache_bytes_peak"] <= cap < big["cache_bytes_peak"]
    assert r_small == r_big and [r.lls for r in rows_small] == [r.lls for r in rows_big]


def test_input_errors_are_one_line_before_any_work(tiny, data_dir, tmp_path):
    model, tok = tiny
    ops = ghosted(model, tok, (2,), data_dir)
    calls = [0]
    hook = model.model.layers[0].register_forward_pre_hook(lambda m, a: calls.__setitem__(0, calls[0] + 1))
    try:
        for finalists, cfg, message in [
            ([((1,), None)], eval_cfg(8, ["piqa"], cache_gib=1e-9), "over eval.cache_gib"),
            ([((2, 3), ops)], eval_cfg(2, ["piqa"]), r"operators are for \(2,\)"),
            ([((9,), None)], eval_cfg(2, ["piqa"]), "out of range"),
            ([((1,), None)], eval_cfg(2, ["piqa", "lambada"]), "no native evaluator"),
        ]:
            with pytest.raises(GhostsearchError, match=message) as e:
                evaluate_finalists_native(model, tok, finalists, cfg, data_dir, progress=False)
            assert "\n" not in str(e.value)
    finally:
        hook.remove()
    assert calls == [0]
    from ghostsearch.config import load_config

    for override, message in [
        ("eval.engine=hflm", "eval.engine='hflm'; use native"),
        ("eval.cache_gib=0", "eval.cache_gib=0"),
    ]:
        with pytest.raises(GhostsearchError, match=message):
            load_config(None, [override])


def test_item_rows_to_parquet(tiny, data_dir, tmp_path):
    import pyarrow.parquet as pq

    model, tok = tiny
    _, rows = evaluate_finalists_native(
        model, tok, [((), None), ((1, 2), None)], eval_cfg(3, ["piqa", "boolq"]), data_dir, progress=False
    )
    write_item_rows([dataclasses.replace(r, key="c0") for r in rows], tmp_path / "items.parquet")
    back = pq.read_table(tmp_path / "items.parquet").to_pylist()
    assert len(back) == 2 * 2 * 3 and back[0]["key"] == "c0"
    assert [(r["finalist"], r["task"], r["doc"], r["pred"], r["lls"]) for r in back] == [
        (r.finalist, r.task, r.doc, r.pred, list(r.lls)) for r in rows
    ]
    assert all(r["pred_norm"] is None for r in back if r["task"] == "boolq")


# ---------------------------------------------------------------- parity with lm-eval (HFLM)
def assert_lm_eval_parity(model, tok, finalists, n, data_dir):
    """Native (eval.engine=native through evaluate.zero_shot_finalists) against lm-eval's
    simple_evaluate on each physically pruned (and repaired) model, the same first n documents."""
    from lm_eval import simple_evaluate
    from lm_eval.models.huggingface import HFLM
    from lm_eval.tasks import TaskManager

    numbers, rows = zero_shot_finalists(model, tok, finalists, eval_cfg(n), data_dir)
    results = [r.to_dict() for r in numbers]
    for f, (removed, ops) in enumerate(finalists):
        ref = simple_evaluate(
            model=HFLM(pretrained=reference_model(model, removed, ops), tokenizer=tok, batch_size=4),
            tasks=[task_config(t, data_dir) for t in TASKS],
            limit=n,
            num_fewshot=0,
            task_manager=TaskManager(include_defaults=False),
            bootstrap_iters=0,
            log_samples=True,
        )
        for task in TASKS:
            for metric in ("acc", "acc_norm"):
                if f"{metric},none" in ref["results"][task]:
                    assert results[f][f"{task}_{metric}"] == ref["results"][task][f"{metric},none"], (task, f)
            mine = rows_of(rows, f, task)
            assert results[f][f"{task}_n"] == len(mine) == n
            for s in ref["samples"][task]:
                lls = [x[0] for x in s["filtered_resps"]]
                assert mine[s["doc_id"]].lls == pytest.approx(lls, rel=1e-4), (task, s["doc_id"], f)
                assert mine[s["doc_id"]].pred == max(range(len(lls)), key=lambda j: (lls[j], -j))  # np.argmax
                assert mine[s["doc_id"]].correct == bool(s["acc"])
    return results


@pytest.mark.slow
def test_lm_eval_parity_tiny(tiny, data_dir):
    model, tok = tiny
    assert_lm_eval_parity(
        model, tok, [((), None), ((2, 3), None), ((2, 3), ghosted(model, tok, (2, 3), data_dir))], 6, data_dir
    )


@pytest.mark.slow
def test_lm_eval_parity_smollm2(smollm2, data_dir):
    model, tok = smollm2
    removed = (20, 21, 22, 23)
    assert_lm_eval_parity(
        model, tok, [((), None), (removed, None), (removed, ghosted(model, tok, removed, data_dir))], 4, data_dir
    )  # (4 items a task: too few for an accuracy check of its own)


def test_finalist_perplexities_equal_perplexity_suite(tiny, data_dir):
    """Window perplexities and LAMBADA last-word accuracy/perplexity of finalists over the dense
    prefix cache equal perplexity_suite on each physically pruned (and repaired) model."""
    from ghostsearch.evaluation.evaluate import perplexity_finalists, perplexity_suite

    model, tok = tiny
    cfg = eval_cfg(6, perplexity=sorted({PROSE, "lambada"}), ppl_seq_len=64, ppl_max_seq=5)
    finalists = [((), None), ((1, 4), None), ((1, 4), ghosted(model, tok, (1, 4), data_dir))]
    ours = [r.to_dict() for r in perplexity_finalists(model, tok, finalists, cfg, data_dir)]
    for (removed, ops), got in zip(finalists, ours):
        ref = perplexity_suite(
            reference_model(model, removed, ops),
            tok,
            tuple(sorted({PROSE, "lambada"})),
            64,
            5,
            data_dir,
            limit=6,
            batch_size=4,
        ).to_dict()
        windows = {k: got.pop(k) for k in list(got) if k.endswith("_window_nll")}
        assert got.keys() == ref.keys()
        for k in ref:
            assert got[k] == pytest.approx(ref[k], rel=1e-5), (k, removed, ops is not None)
        for k, nll in windows.items():  # each window's mean NLL: their mean is the perplexity's log
            assert len(nll) == 5 and got[k.removesuffix("_window_nll")] == pytest.approx(
                math.exp(sum(nll) / 5), rel=1e-5
            )


@pytest.mark.slow
def test_finalists_on_the_pool_equal_local(tiny_model_dir, data_dir, ray_local):
    """Finalists split over two scorer actors (Broker.with_model -> ScorerActor.with_model ->
    evaluate.evaluate_finalist_specs) give the numbers of the same evaluation run here."""
    from ghostsearch.config import load_config
    from ghostsearch.evaluation.evaluate import evaluate_finalist_specs
    from ghostsearch.model.models import load_model
    from ghostsearch.pool.pool import start_pool

    cfg = load_config(
        None,
        [
            f"model={tiny_model_dir}",
            "pool.actors=2",
            "pool.threads=1",
            "pool.dashboard=false",
            "eval.tasks=[arc_easy,winogrande]",
            "eval.limit=4",
            f"eval.perplexity=[{PROSE}]",
            "eval.ppl_seq_len=64",
            "eval.ppl_max_seq=2",
            "recovery.n_seq=4",
            "recovery.seq_len=64",
        ]
        + ([f"data_dir={data_dir}"] if data_dir else []),
    )
    specs = [([], "none"), ([2, 3], "none"), ([2, 3], "ghosted"), ([4], "ghosted")]
    broker = start_pool(cfg)
    shares = ray_local.get([broker.with_model.remote(evaluate_finalist_specs, cfg, specs[i::2]) for i in (0, 1)])
    remote = [None] * len(specs)
    for i, (res, _) in enumerate(shares):
        remote[i::2] = res
    model, tok = load_model(cfg.model, dtype=cfg.dtype)
    local, _ = evaluate_finalist_specs(model, tok, cfg, specs)
    for r, l in zip((x.to_dict() for x in remote), (x.to_dict() for x in local)):
        assert r.keys() == l.keys() and r["recovery"] == l["recovery"]
        for k, v in l.items():
            if isinstance(v, float):
                assert r[k] == pytest.approx(v, rel=1e-5, nan_ok=True), k
