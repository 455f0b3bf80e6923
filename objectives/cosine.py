"""An example user objective: 1 - cosine similarity between the pruned and the dense model's final
hidden state (after the final norm), token-weighted; lower is better, 0 for the dense model.

It needs no LM head, so a candidate costs only the blocks it runs (the head is a large fixed cost
of perplexity on small-vocabulary-heavy models such as SmolLM2). Use it with
``objective: objectives.cosine:Cosine`` (any text calibration set: ``calibration.dataset``).
"""

from __future__ import annotations

import torch

from ghostsearch.data import corpora as data
from ghostsearch.model.stack import Batch, Stack
from ghostsearch.objectives import Objective
from ghostsearch.objectives.perplexity import text_windows


class Cosine(Objective):
    name = "cosine"
    default_dataset = "c4"
    datasets = data.TEXT_DATASETS

    def build(self, tokenizer, dtype: torch.dtype = torch.float32) -> list[Batch]:
        x = text_windows(self.spec, tokenizer)
        return [Batch(input_ids=x[i : i + self.spec.micro_batch]) for i in range(0, x.shape[0], self.spec.micro_batch)]

    @torch.no_grad()
    def attach(self, stack: Stack, batches: list[Batch], caps) -> None:
        for b, cap in zip(batches, caps):
            b.extra["dense"] = stack.norm(cap.states[-1]).float()

    def loss(self, stack: Stack, h: torch.Tensor, batch: Batch, rows: int) -> tuple[float, float]:
        cos = torch.nn.functional.cosine_similarity(stack.norm(h[:rows]).float(), batch.extra["dense"][:rows], dim=-1)
        return float((1 - cos).double().sum()), float(cos.numel())
