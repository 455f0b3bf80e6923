"""The Stack: blocks skipped by masking equal the physically pruned model's own HF forward (8 families)."""

from __future__ import annotations

import random

import pytest
import torch

from ghostsearch.core.errors import GhostsearchError
from ghostsearch.model.stack import Batch, Stack, check_removed, physically_prune, run_start
from tests.conftest import FAMILIES, tiny_model


def _ref_logits(model, removed, ids, **kw):
    with torch.no_grad():
        return physically_prune(model, removed)(ids, **kw).logits.float()


@pytest.mark.parametrize("family", FAMILIES)
def test_masked_equals_physically_pruned(family):
    model = tiny_model(family, n_layers=6, vocab=512)
    stack = Stack(model)
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(0, 512, (2, 24), generator=g)
    cap = stack.capture(Batch(input_ids=ids))
    rng = random.Random(family)
    for _ in range(4):
        removed = sorted(rng.sample(range(6), rng.randint(1, 4)))
        first = removed[0]
        with torch.no_grad():  # from the cached dense state entering the first removed block
            h = stack.run(cap.states[first], cap, first, removed)
            ours = stack.logits(h)
        ref = _ref_logits(model, removed, ids)
        torch.testing.assert_close(ours, ref, rtol=1e-4, atol=1e-4)


def test_no_block_list_is_a_clear_error():
    from transformers import BertConfig, BertModel

    m = BertModel(BertConfig(hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=32))
    with pytest.raises(GhostsearchError, match="no decoder block list"):
        Stack(m)


def test_the_chunked_head_equals_one_pass():
    """Stack.token_logprobs(_top), the one LM-head loop of scoring and evaluation: any chunk size gives
    log_softmax(logits)[target] and the argmax test of one pass over all rows; ``normed`` skips the norm."""
    stack = Stack(tiny_model("llama", n_layers=2, vocab=512))
    g = torch.Generator().manual_seed(0)
    x, t = torch.randn(50, 64, generator=g), torch.randint(0, 512, (50,), generator=g)
    with torch.no_grad():
        full = stack.logits(x)
        want = full.log_softmax(-1).gather(1, t[:, None])[:, 0]
        for chunk in (1, 7, 50, 1024):
            lp, top = stack.token_logprobs_top(x, t, chunk=chunk)
            torch.testing.assert_close(lp, want, rtol=1e-5, atol=1e-5)
            assert torch.equal(top, full.argmax(-1) == t)
            assert torch.equal(stack.token_logprobs(x, t, chunk=chunk), lp)
        t[:5] = full[:5].argmax(-1)  # some greedy targets, so the test sees both answers
        assert stack.token_logprobs_top(x, t, chunk=3)[1][:5].all()
        assert torch.equal(
            stack.token_logprobs(stack.norm(x), t, chunk=7, normed=True), stack.token_logprobs(x, t, chunk=7)
        )


def test_run_start_is_the_first_removed_block_or_before_a_patch():
    assert run_start((3, 5), None, 8) == 3
    assert run_start((), {}, 8) == 8
    assert run_start((3, 5), {6: abs}, 8) == 3  # a patch after the first cut changes nothing
    assert run_start((3, 5), {3: abs}, 8) == 2  # a patch at boundary 3 reads block 2's output
    assert run_start((), {0: abs}, 8) == 0  # never before the first block
    assert run_start((5, 3), {}, 8) == 3  # in any order


def test_removed_sets_are_checked_once():
    """check_removed: the one removed-set check (the CLI, finalists, scoring and pruning use it)."""
    assert check_removed([5, 1], 6) == (1, 5)
    assert check_removed({1, 5}, 6, what="the scored set") == (1, 5)
    with pytest.raises(GhostsearchError, match=r"^--remove repeats block\(s\) \[1\]"):
        check_removed([1, 1], 6)
    with pytest.raises(GhostsearchError, match=r"^the scored set has block\(s\) \[-1, 6\] out of range; .* 0\.\.5"):
        check_removed([-1, 2, 6], 6, what="the scored set")
    with pytest.raises(GhostsearchError, match="^the pruned set removes all 2 blocks"):
        physically_prune(tiny_model("llama", n_layers=2, vocab=512), [0, 1, 1])
    assert len(physically_prune(tiny_model("llama", n_layers=3, vocab=512), [2, 2]).model.layers) == 2


@pytest.mark.parametrize("family", FAMILIES)
def test_capture_upto_runs_no_block_past_it_and_changes_nothing(family):
    """Stack.capture(upto=j): states up to j and every block's call arguments are those of the full
    capture, the states past it are None, and a finalist run from any start <= j gives bit-identical
    outputs (the ones the masked model gives from the full capture). Each block's forward is
    restored afterwards. (That the blocks past j do not run: the next test.)"""
    model = tiny_model(family, n_layers=6, vocab=512)
    stack = Stack(model)
    ids = torch.randint(0, 512, (2, 24), generator=torch.Generator().manual_seed(1))
    full = stack.capture(Batch(input_ids=ids))
    real = [type(b).forward for b in stack.blocks]
    for upto in (0, 2, 4):
        part = stack.capture(Batch(input_ids=ids), upto=upto)
        # block 0 always runs: its output's structure tells the pass-through what to return
        assert all(s is None for s in part.states[max(upto, 1) + 1 :])
        for i in range(max(upto, 1) + 1):
            assert torch.equal(part.states[i], full.states[i])
        for i in range(6):
            assert len(part.block_args[i]) == len(full.block_args[i])
            assert part.block_kwargs[i].keys() == full.block_kwargs[i].keys()
        for removed in ([upto], [upto, 5], list(range(upto, 6))):
            with torch.no_grad():
                a = stack.logits(stack.run(full.states[upto], full, upto, removed))
                b = stack.logits(stack.run(part.states[upto], part, upto, removed))
            assert torch.equal(a, b), (family, upto, removed)
    assert all("forward" not in b.__dict__ for b in stack.blocks)
    assert [type(b).forward for b in stack.blocks] == real


def test_capture_upto_skips_the_work(monkeypatch):
    """The blocks past ``upto`` do not run their real forward (a counting wrapper on the class's
    forward): capture(upto=2) of a 6-block model computes blocks 0 and 1 only."""
    model = tiny_model("llama", n_layers=6, vocab=512)
    stack = Stack(model)
    cls = type(stack.blocks[0])
    real, ran = cls.forward, []

    def counted(self, *a, **kw):
        ran.append(next(i for i, b in enumerate(stack.blocks) if b is self))
        return real(self, *a, **kw)

    monkeypatch.setattr(cls, "forward", counted)
    ids = torch.randint(0, 512, (1, 8), generator=torch.Generator().manual_seed(2))
    stack.capture(Batch(input_ids=ids), upto=2)
    assert ran == [0, 1]
    ran.clear()
    stack.capture(Batch(input_ids=ids))
    assert ran == list(range(6))
