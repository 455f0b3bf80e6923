"""The Stack: blocks skipped by masking equal the physically pruned model's own HF forward (8 families)."""
from __future__ import annotations

import random

import pytest
import torch

from ghostsearch.errors import GhostsearchError
from ghostsearch.stack import Batch, Stack, physically_prune
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
