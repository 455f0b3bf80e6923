"""Perplexity: exp(token-weighted mean next-token NLL) over calibration windows. Lower is better.

The LM head and the loss run in chunks of ``head_chunk`` tokens, so [tokens x vocab] logits are
never materialised at once.
"""

from __future__ import annotations

import math

import torch

from ghostsearch.data import corpora as data
from ghostsearch.model.stack import Batch, Stack
from ghostsearch.objectives.base import Objective, split_rows


def text_windows(spec, tokenizer) -> torch.Tensor:
    ids = data.tokenize_corpus(tokenizer, data.calibration_texts(spec.dataset, spec.data_dir))
    return data.sample_windows(ids, spec.n_seq, spec.seq_len, spec.seed, name=spec.dataset)


class Perplexity(Objective):
    name = "perplexity"
    default_dataset = "c4"
    datasets = data.TEXT_DATASETS
    rows_stack = True  # a row's loss reads its own state and tokens only
    min_seq_len = 2  # a window of one token predicts nothing: 0 tokens, no value

    def build(self, tokenizer, dtype: torch.dtype = torch.float32) -> list[Batch]:
        return [Batch(input_ids=x) for x in split_rows(text_windows(self.spec, tokenizer), self.spec.micro_batch)]

    def row_losses(self, stack: Stack, h: torch.Tensor, batch: Batch, rows: torch.Tensor):
        x = h[:, :-1].reshape(-1, h.shape[-1])
        tgt = batch.input_ids[rows, 1:].reshape(-1).to(h.device)
        lp = stack.token_logprobs(x, tgt, chunk=self.params.get("head_chunk", 1024))
        sums = -lp.double().view(len(rows), -1).sum(1).cpu()
        return sums, torch.full_like(sums, h.shape[1] - 1)

    def value(self, total: float, count: float) -> float:
        return math.exp(total / count)
