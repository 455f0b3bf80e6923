"""KL(dense || pruned) per token, in nats; lower is better (0 for the dense model).

Dense targets are cached once as the top-K log-probs of every position (K >= 256, default 256).
The KL is computed on the distribution coarse-grained to those K tokens plus one "rest" bucket:
sum_k p_k (log p_k - log q_k) + p_rest (log p_rest - log q_rest). It is exact for the dense model
(0), a lower bound of the full KL, and needs K numbers per position instead of the vocabulary.
"""

from __future__ import annotations

import torch

from ghostsearch.core.errors import GhostsearchError
from ghostsearch.data import corpora as data
from ghostsearch.model.stack import Batch, Stack
from ghostsearch.objectives.base import Objective, split_rows
from ghostsearch.objectives.perplexity import text_windows


def _topk_kl(lq: torch.Tensor, lp: torch.Tensor, idx: torch.Tensor) -> torch.Tensor:
    """KL for rows: dense top-K log-probs lp [n,K] at idx, pruned full log-probs lq [n,V]."""
    lq_k = lq.gather(1, idx)
    p = lp.exp()
    p_rest = (1 - p.sum(1)).clamp_min(1e-12)
    q_rest = (1 - lq_k.exp().sum(1)).clamp_min(1e-12)
    return (p * (lp - lq_k)).sum(1) + p_rest * (p_rest.log() - q_rest.log())


class KL(Objective):
    name = "kl"
    default_dataset = "c4"
    datasets = data.TEXT_DATASETS
    rows_stack = True  # a row's loss reads its own state and tokens only

    def __init__(self, spec, **params):
        super().__init__(spec, **params)
        self.top_k = int(params.get("top_k", 256))
        if self.top_k < 256:
            raise GhostsearchError(f"kl top_k={self.top_k} is too small to approximate the KL; use 256 or more")
        self.chunk = int(params.get("head_chunk", 1024))

    def build(self, tokenizer, dtype: torch.dtype = torch.float32) -> list[Batch]:
        return [Batch(input_ids=x) for x in split_rows(text_windows(self.spec, tokenizer), self.spec.micro_batch)]

    @torch.no_grad()
    def attach(self, stack, batches, caps):
        for b, cap in zip(batches, caps):
            x = cap.states[-1].reshape(-1, cap.states[-1].shape[-1])
            vals, idxs = [], []
            for s in range(0, x.shape[0], self.chunk):
                lp = torch.log_softmax(stack.logits(x[s : s + self.chunk]), -1)
                v, i = lp.topk(self.top_k, dim=-1)
                vals.append(v)
                idxs.append(i)
            T = b.input_ids.shape[1]
            b.extra["lp"] = torch.cat(vals).view(b.rows, T, self.top_k)
            b.extra["idx"] = torch.cat(idxs).view(b.rows, T, self.top_k)

    def row_losses(self, stack: Stack, h: torch.Tensor, batch: Batch, rows: torch.Tensor):
        x = h.reshape(-1, h.shape[-1])
        lp = batch.extra["lp"][rows].reshape(-1, self.top_k)
        idx = batch.extra["idx"][rows].reshape(-1, self.top_k)
        kl = torch.cat(
            [
                _topk_kl(
                    torch.log_softmax(stack.logits(x[s : s + self.chunk]), -1),
                    lp[s : s + self.chunk],
                    idx[s : s + self.chunk],
                ).double()
                for s in range(0, x.shape[0], self.chunk)
            ]
        )
        sums = kl.view(len(rows), -1).sum(1).cpu()
        return sums, torch.full_like(sums, h.shape[1])
