"""Task log-likelihood margin on multiple-choice items (Commonsense-170k style). Lower is better.

For an item with prompt x, answers a_1..a_n and gold g:
    m = log p(a_g | x) - max_{j != g} log p(a_j | x)
and the objective is -mean(m) over items. ``normalize='sum'`` (default) uses the summed token
log-probs of an answer; ``normalize='mean'`` divides by the answer's token count (length-normalised).

Each item is packed into ONE sequence: the prompt once, then every answer, each answer attending
to the prompt and to itself only (a 4D mask) with positions restarting after the prompt. So the
prompt runs once per item instead of once per answer, and only the positions that predict answer
tokens go through the LM head.
"""

from __future__ import annotations

import torch

from ghostsearch.core.errors import GhostsearchError
from ghostsearch.data import corpora as data
from ghostsearch.model.stack import Batch, Stack
from ghostsearch.objectives.base import Objective


def tokenize_item(tokenizer, item: data.MCItem) -> tuple[list[int], list[list[int]]]:
    prompt = tokenizer(item.prompt, add_special_tokens=True).input_ids
    answers = [tokenizer(c, add_special_tokens=False).input_ids for c in item.choices]
    if any(len(a) == 0 for a in answers):
        raise GhostsearchError("an answer tokenises to nothing; check the dataset's choices")
    return prompt, answers


def pack(
    items: list[tuple[list[int], list[list[int]]]], dtype: torch.dtype, pad_id: int = 0, max_prompt: int | None = None
) -> Batch:
    """Pack tokenised items (one per row) into one micro-batch with a 4D additive mask."""
    items = [(p[-max_prompt:] if max_prompt else p, a) for p, a in items]
    T = max(len(p) + sum(len(x) for x in a) for p, a in items)
    b = len(items)
    ids = torch.full((b, T), pad_id, dtype=torch.long)
    pos = torch.zeros((b, T), dtype=torch.long)
    allow = torch.zeros((b, T, T), dtype=torch.bool)
    weight = torch.zeros((b, T))
    pred: list[int] = []
    tgt: list[int] = []
    pair: list[int] = []
    pair_item: list[int] = []
    pair_len: list[int] = []
    for r, (p, answers) in enumerate(items):
        P = len(p)
        ids[r, :P] = torch.tensor(p)
        pos[r, :P] = torch.arange(P)
        allow[r, :P, :P] = torch.tril(torch.ones(P, P, dtype=torch.bool))
        s = P
        for a in answers:
            n = len(a)
            ids[r, s : s + n] = torch.tensor(a)
            pos[r, s : s + n] = torch.arange(P, P + n)
            allow[r, s : s + n, :P] = True
            allow[r, s : s + n, s : s + n] = torch.tril(torch.ones(n, n, dtype=torch.bool))
            pid = len(pair_len)
            for t in range(n):
                pred.append(r * T + (P - 1 if t == 0 else s + t - 1))
                tgt.append(a[t])
                pair.append(pid)
            pair_item.append(r)
            pair_len.append(n)
            s += n
        weight[r, :s] = 1
        for q in range(s, T):  # padding rows attend to themselves only (no NaN rows)
            allow[r, q, q] = True
    mask = torch.zeros((b, 1, T, T), dtype=dtype)
    mask.masked_fill_(~allow[:, None], torch.finfo(dtype).min)
    return Batch(
        input_ids=ids,
        attention_mask=mask,
        position_ids=pos,
        weight=weight,
        extra={
            "pred": torch.tensor(pred),
            "target": torch.tensor(tgt),
            "pair": torch.tensor(pair),
            "pair_item": torch.tensor(pair_item),
            "pair_len": torch.tensor(pair_len, dtype=torch.float32),
        },
    )


def margins(pair_lp: torch.Tensor, pair_item: torch.Tensor, gold_pair: torch.Tensor, n_items: int) -> torch.Tensor:
    """m per item from per-pair log-probs; gold_pair[i] is the pair index of item i's gold answer."""
    other = pair_lp.clone()
    other[gold_pair] = -torch.inf
    best_other = torch.full((n_items,), -torch.inf, dtype=pair_lp.dtype).scatter_reduce(
        0, pair_item, other, reduce="amax"
    )
    return pair_lp[gold_pair] - best_other


class Margin(Objective):
    name = "margin"
    default_dataset = "commonsense"
    datasets = data.MC_DATASETS

    def __init__(self, spec, **params):
        super().__init__(spec, **params)
        self.normalize = params.get("normalize", "sum")
        if self.normalize not in ("sum", "mean"):
            raise GhostsearchError(f"margin normalize={self.normalize!r}; use 'sum' or 'mean'")
        self.max_prompt = params.get("max_prompt", spec.seq_len)

    def build(self, tokenizer, dtype: torch.dtype = torch.float32) -> list[Batch]:
        items = data.sample_items(
            data.mc_items(self.spec.dataset, self.spec.data_dir), self.spec.n_seq, self.spec.seed, self.spec.dataset
        )
        toks = [tokenize_item(tokenizer, it) for it in items]
        pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
        batches = []
        mb = self.spec.micro_batch
        for i in range(0, len(toks), mb):
            b = pack(toks[i : i + mb], dtype, pad, self.max_prompt)
            golds = items[i : i + mb]
            first_pair = torch.cat(
                [torch.zeros(1, dtype=torch.long), torch.bincount(b.extra["pair_item"]).cumsum(0)[:-1]]
            )
            b.extra["gold_pair"] = first_pair + torch.tensor([it.gold for it in golds])
            batches.append(b)
        return batches

    def row_losses(self, stack: Stack, h: torch.Tensor, batch: Batch, rows: torch.Tensor):
        """-m per item of ``rows``: the answer positions of those items only go through the head."""
        e, T = batch.extra, batch.input_ids.shape[1]
        rows = rows.cpu()
        at = torch.full((batch.rows,), -1, dtype=torch.long)
        at[rows] = torch.arange(len(rows))  # micro-batch row -> row of h
        keep = at[e["pred"] // T] >= 0
        pred = at[e["pred"][keep] // T] * T + e["pred"][keep] % T
        pairs = at[e["pair_item"]] >= 0
        new_pair = torch.cumsum(pairs.long(), 0) - 1  # old pair index -> index among kept pairs
        lp = stack.token_logprobs(h.reshape(-1, h.shape[-1])[pred.to(h.device)], e["target"][keep].to(h.device))
        pair_lp = torch.zeros(int(pairs.sum()), dtype=torch.float64).index_add_(
            0, new_pair[e["pair"][keep]], lp.double().cpu()
        )
        if self.normalize == "mean":
            pair_lp = pair_lp / e["pair_len"][pairs].double()
        m = margins(pair_lp, at[e["pair_item"][pairs]], new_pair[e["gold_pair"][rows]], len(rows))
        return -m, torch.ones(len(rows), dtype=torch.float64)
