"""eval.protocol: paper = non-overlapping windows of min(2048, the model's context) over the whole
set; its perplexity equals a direct full forward of the Hugging Face model on the same windows."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from ghostsearch.core.errors import GhostsearchError
from ghostsearch.data import corpora as data
from ghostsearch.evaluation.evaluate import protocol_windows, window_perplexity
from tests.conftest import tiny_model
from tests.corpora import PROSE


def test_protocol_windows():
    m = tiny_model("llama", 2, vocab=512)  # max_position_embeddings 512
    assert protocol_windows(m, "paper", 512, 64) == (512, None)
    assert protocol_windows(m, "quick", 256, 8) == (256, 8)
    with pytest.raises(GhostsearchError, match="eval.protocol='fast'"):
        protocol_windows(m, "fast", 256, 8)


@pytest.mark.slow
def test_paper_windows_equal_a_direct_full_forward(smollm2, data_dir):
    model, tok = smollm2
    seq_len, _ = protocol_windows(model, "paper", 512, 64)
    assert seq_len == 2048  # SmolLM2's context is 8192: the papers' 2048
    ids = data.tokenize_corpus(tok, data.load_texts(PROSE, None, data_dir))
    ours = window_perplexity(model, ids, seq_len, max_seq=2, batch_size=1)
    nll, n = 0.0, 0
    with torch.no_grad():
        for w in data.chunk_windows(ids, seq_len, 2):
            logits = model(w[None]).logits[0].float()
            nll += F.cross_entropy(logits[:-1], w[1:], reduction="sum").item()
            n += seq_len - 1
    assert ours == pytest.approx(math.exp(nll / n), rel=1e-4)
