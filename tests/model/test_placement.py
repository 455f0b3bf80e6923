"""Placement (ghostsearch/model/placement.py): a model split by blocks over devices gives the values of
one device, and every tensor reaching block i is on block i's device.

On this CPU the "devices" are labels over the CPU: ``Tagged.move`` copies a tensor and tags it with
the label it was moved to, so a block that received a tensor that was never moved to its device
(an untagged output of the previous block, or one tagged for another device) fails the check.
``GHOSTSEARCH_TEST_DEVICE_MAP=cuda:0,cpu`` (scripts/gpu-check.sh) runs the exactness tests over
real devices."""

from __future__ import annotations

import copy
import dataclasses
import math
import os

import pytest
import torch
import torch.nn.functional as F

from ghostsearch.core.errors import GhostsearchError
from ghostsearch.model.placement import Placement, devices_for, split_blocks
from ghostsearch.model.stack import Batch, Stack, physically_prune
from ghostsearch.objectives import OBJECTIVES, CalibrationSpec, ObjectiveSpec
from ghostsearch.objectives.perplexity import Perplexity
from ghostsearch.scoring import Scorer
from tests.conftest import FAMILIES, tiny_model

DEVICE_MAP = os.environ.get("GHOSTSEARCH_TEST_DEVICE_MAP", "cpu,cpu").split(",")


class Tagged(Placement):
    """Labels over the CPU; every move is a copy tagged with its label (recorded in ``moves``)."""

    moves: list

    def move(self, x, label):
        if getattr(x, "ghost_label", None) == label:
            return x
        y = x.clone()
        y.ghost_label = label
        self.moves.append(label)
        return y


def _tagged(model, labels):
    stack = Stack(model)
    p = Tagged.split(stack.n_blocks, labels, real={lb: "cpu" for lb in labels})
    p.moves = []
    p.apply(model, stack.blocks, stack.norm, stack.lm_head)
    return Stack(model), p


def _check_hooks(stack, p, seen):
    """Pre-hooks after the placement's: every tensor reaching block i (hidden state, masks, rotary
    tables) carries block i's label; the norm and head get the last label."""

    def check(name, label):
        def hook(module, args, kwargs):
            tensors = [t for t in list(args) + list(kwargs.values()) if isinstance(t, torch.Tensor)]
            tensors += [
                t
                for v in list(args) + list(kwargs.values())
                if isinstance(v, tuple)
                for t in v
                if isinstance(t, torch.Tensor)
            ]
            assert tensors, name
            for t in tensors:
                assert getattr(t, "ghost_label", None) == label, (name, getattr(t, "ghost_label", None), label)
            seen.append(name)

        return hook

    for i, blk in enumerate(stack.blocks):
        blk.register_forward_pre_hook(check(f"block{i}", p.blocks[i]), with_kwargs=True)
    stack.norm.register_forward_pre_hook(check("norm", p.last), with_kwargs=True)
    stack.lm_head.register_forward_pre_hook(check("head", p.last), with_kwargs=True)


@pytest.mark.parametrize("family", ["llama", "gemma3", "qwen3", "phi3"])
def test_every_tensor_reaching_block_i_is_on_its_device(family):
    model = tiny_model(family, n_layers=6, vocab=512)
    stack, p = _tagged(model, ["a", "b", "c"])
    assert p.blocks == ("a", "a", "b", "b", "c", "c")
    seen: list[str] = []
    _check_hooks(stack, p, seen)
    ids = torch.randint(0, 512, (2, 16), generator=torch.Generator().manual_seed(0))
    cap = stack.capture(Batch(input_ids=ids))  # the model's own forward crosses a->b->c
    assert seen == [f"block{i}" for i in range(6)] + ["norm"]
    # the states entering blocks were moved there; the last is block 5's own output (computed on c)
    assert [getattr(s, "ghost_label", None) for s in cap.states] == list(p.blocks) + [None]
    seen.clear()
    rec: dict = {}
    h = stack.run(cap.states[1], cap, 1, [2, 3], record=rec)  # Stack.run: a at 1, b skipped, c at 4
    assert seen == ["block1", "block4", "block5"]
    assert {i: rec[i].ghost_label for i in rec} == {1: "a", 2: "b", 3: "b", 4: "c", 5: "c", 6: "c"}
    stack.token_logprobs(h.reshape(-1, h.shape[-1]), ids.reshape(-1))
    assert seen[-2:] == ["norm", "head"]
    pruned = Stack(physically_prune(model, [1, 2]))  # the kept blocks keep their labels
    assert pruned.placement.blocks == ("a", "b", "c", "c")
    seen.clear()
    pruned.model(ids)
    assert seen == ["block0", "block3", "block4", "block5", "norm", "head"]


def test_a_block_given_a_tensor_of_another_device_fails_the_check():
    """The check above can fail: a placement that does not move the state into block i is caught."""
    model = tiny_model("llama", n_layers=4, vocab=512)
    stack, p = _tagged(model, ["a", "b"])
    _check_hooks(stack, p, [])
    ids = torch.randint(0, 512, (1, 8), generator=torch.Generator().manual_seed(0))
    cap = stack.capture(Batch(input_ids=ids))
    for blk in stack.blocks:  # a broken placement: its moving hooks gone
        blk._forward_pre_hooks.popitem(last=False)
    with pytest.raises(AssertionError, match="block2"):
        stack.blocks[2](cap.states[1], *cap.block_args[2], **cap.block_kwargs[2])


@pytest.mark.parametrize("family", FAMILIES)
def test_split_gives_the_values_of_one_device(family):
    """Over two devices (cpu twice here; cuda:0,cpu on a GPU) and over labels: the masked run from
    a cached state equals the one-device stack and the physically pruned model."""
    model = tiny_model(family, n_layers=6, vocab=512)
    one = Stack(model)
    ids = torch.randint(0, 512, (2, 24), generator=torch.Generator().manual_seed(0))
    cap1 = one.capture(Batch(input_ids=ids))
    for devices in (DEVICE_MAP, ["a", "b", "c"]):
        m2 = copy.deepcopy(model)
        if devices == DEVICE_MAP:
            two = Stack(m2)
            two.place(devices)
        else:
            two, _ = _tagged(m2, devices)
        cap2 = two.capture(Batch(input_ids=ids))
        for removed in ([1, 4], [0, 2, 3], [5]):
            first = removed[0]
            with torch.no_grad():
                ours = two.logits(two.run(cap2.states[first], cap2, first, removed)).cpu()
                ref = one.logits(one.run(cap1.states[first], cap1, first, removed))
                pruned = physically_prune(model, removed)(ids).logits.float()
            torch.testing.assert_close(ours, ref, rtol=1e-5, atol=1e-5)
            torch.testing.assert_close(ours, pruned, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("offload", [False, True])
def test_scorer_on_a_split_model_equals_one_device(offload):
    """Prefix runs, a sparse cache (every=2) and offloaded states on a split model: the values of
    the one-device scorer."""
    model = tiny_model("gemma3", n_layers=6, vocab=512)
    ids = torch.randint(0, 512, (4, 32), generator=torch.Generator().manual_seed(1))

    class Fixed(Perplexity):
        name = "_ppl_fixed_split"

        def build(self, tokenizer, dtype=None):
            return [Batch(input_ids=ids[:2]), Batch(input_ids=ids[2:])]

    OBJECTIVES.add(Fixed.name, Fixed)
    try:
        spec = ObjectiveSpec.make(Fixed.name, CalibrationSpec("c4", 4, 32, 0))
        one = Scorer(Stack(model), None)
        m2 = copy.deepcopy(model)
        s2 = Stack(m2)
        s2.place(DEVICE_MAP)
        two = Scorer(s2, None, cache_every=2, offload=offload)
        k1, k2 = one.prepare(spec), two.prepare(spec)
        for removed, prefix in [((2, 4), (2,)), ((1, 2, 4), (2,)), ((3,), None), ((5,), (2,))]:
            v1 = one.score(k1, removed, prefix=prefix).value
            v2 = two.score(k2, removed, prefix=prefix).value
            assert v2 == pytest.approx(v1, rel=1e-5), removed
            lg = physically_prune(model, removed)(ids).logits.float()
            ref = math.exp(F.cross_entropy(lg[:, :-1].reshape(-1, 512), ids[:, 1:].reshape(-1)).item())
            assert v2 == pytest.approx(ref, rel=1e-5)
    finally:
        OBJECTIVES.remove(Fixed.name)


def test_recovery_fit_on_a_split_model_equals_one_device():
    from ghostsearch.recovery.base import Activations, get_recovery

    model = tiny_model("llama", n_layers=6, vocab=512)
    ids = torch.randint(0, 512, (2, 32), generator=torch.Generator().manual_seed(2))
    m2 = copy.deepcopy(model)
    s2 = Stack(m2)
    s2.place(DEVICE_MAP)
    ops = []
    for stack in (Stack(model), s2):
        data = Activations(stack, [Batch(input_ids=ids)])
        ops.append(get_recovery("ghosted").fit(stack, [2, 3], data))
    for b in ops[0].mats:
        torch.testing.assert_close(ops[1].mats[b].cpu(), ops[0].mats[b], rtol=1e-6, atol=1e-8)


def test_split_balances_parameters_and_rejects_bad_maps():
    assert split_blocks(6, 2) == [0, 0, 0, 1, 1, 1]
    assert split_blocks(7, 3) == [0, 0, 0, 1, 1, 2, 2]
    # Llama-3.1-70B-like: embeddings and head ~1.2 blocks each, 80 blocks over 4 GPUs
    idx = split_blocks(80, 4, (1.05, 0.856, 1.05))
    loads = [sum(0.856 for i in idx if i == d) + (1.05 if d in (0, 3) else 0) for d in range(4)]
    assert idx == sorted(idx) and set(idx) == {0, 1, 2, 3}
    assert max(loads) - min(loads) <= 0.86 + 1e-9  # within one block of balanced
    assert idx.count(0) < idx.count(1)
    with pytest.raises(GhostsearchError, match="cannot split 2 blocks over 3 devices"):
        split_blocks(2, 3)
    with pytest.raises(GhostsearchError, match="pool.gpus_per_actor=2.5: a model is split over whole GPUs"):
        devices_for("cuda", 2.5, None)
    assert devices_for("cuda", 2, None) == ["cuda:0", "cuda:1"]
    assert devices_for("cuda", 0.5, None) is None
    assert devices_for("cpu", None, ["cuda:0", "cpu"]) == ["cuda:0", "cpu"]


def test_native_evaluation_and_repair_on_a_split_model_equal_one_device(smollm2_tokenizer_dir, data_dir):
    """The native evaluation engine (packed items over a dense prefix cache) and a ghosted repair fit
    on a split model: the same per-item log-likelihoods as on one device."""
    from transformers import AutoTokenizer

    from ghostsearch.config import Config
    from ghostsearch.evaluation.native import evaluate_finalists_native
    from ghostsearch.recovery.repair import fit

    tok = AutoTokenizer.from_pretrained(smollm2_tokenizer_dir)
    model = tiny_model("llama", 6)
    m2 = copy.deepcopy(model)
    Stack(m2).place(DEVICE_MAP)
    cfg = Config(data_dir=data_dir)
    cfg.recovery.n_seq, cfg.recovery.seq_len = 4, 32
    cfg.eval.tasks, cfg.eval.limit, cfg.eval.batch_size, cfg.eval.sample = ["arc_easy"], 4, 4, "first"
    rows = []
    for m in (model, m2):
        finalists = [((2,), None), ((3, 4), fit(m, tok, [3, 4], cfg, "ghosted"))]
        rows.append(evaluate_finalists_native(m, tok, finalists, cfg.eval, data_dir, progress=False)[1])
    assert len(rows[0]) == len(rows[1]) > 0
    for a, b in zip(*rows):  # same items, predictions and per-choice log-likelihoods
        assert dataclasses.replace(a, lls=()) == dataclasses.replace(b, lls=())
        assert len(a.lls) > 1 and b.lls == pytest.approx(a.lls, rel=1e-5, abs=1e-6)
