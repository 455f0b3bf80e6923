"""Native downstream evaluation: lm-eval's eight commonsense tasks at the scoring engine's speed.

The requests, tokens and metrics are lm-eval's (HFLM's ``encode_pair`` and left truncation;
``acc`` = argmax of the summed continuation log-likelihoods, ``acc_norm`` = argmax of them per
character of the choice, first index on ties as numpy; ``acc_norm`` only where the task's YAML
lists it). The computation differs in two ways:

* **Packing.** An item's requests become ONE sequence: the longest token prefix all its inputs
  share runs once, then each distinct input's remainder follows as a branch attending to the
  shared prefix and to itself (a 4D mask), at the positions it would have alone. The LM head runs
  only on positions that predict continuation tokens. For most items the shared prefix is the
  prompt (and any first tokens the answers share), the branches the answers. WinoGrande is packed
  by the same rule: lm-eval's requests are (sentence up to the blank + option_j, " " + the rest of
  the sentence), so the shared prefix is the sentence start until the options differ and each
  branch is option_j's tokens followed by the (identical) rest, whose tokens are scored inside the
  branch: the context changes, not the continuation, and nothing special is needed.
* **Dense prefix cache across finalists.** For finalists (removed set, optional repair
  ``Operators``) of one model, each micro-batch runs the dense model once (``Stack.capture``) and
  keeps the hidden state at every finalist's start: its first removed block, or, repaired, the
  first boundary its repair reads (``Scorer.score``'s rule). Every finalist runs only from there,
  skipping blocks, with the repair as patches. States are kept for a chunk of micro-batches at a
  time, as many as fit in ``eval.cache_gib`` (on the CPU with ``offload``).

Per finalist the result is an ``eval_numbers.FinalistNumbers`` (``<task>_acc``, ``<task>_acc_norm``,
``<task>_n`` in its flat form, as ``evaluate.zero_shot``'s); per item one ``eval_numbers.ItemRow``.
"""

from __future__ import annotations

import functools
import math
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Sequence

import numpy as np
import torch
import yaml

from ghostsearch.core.errors import GhostsearchError
from ghostsearch.core.eval_numbers import FinalistNumbers, ItemRow, items_to_arrow
from ghostsearch.data import corpora as data
from ghostsearch.model.stack import Batch, Stack, check_removed, run_start

if TYPE_CHECKING:
    from ghostsearch.recovery.base import Operators

NATIVE_TASKS = data.MC_TASKS
GIB = 1 << 30


# ---------------------------------------------------------------- lm-eval's requests
@dataclass(frozen=True)
class Doc:
    requests: tuple[tuple[str, str], ...]  # (context, continuation) exactly as lm-eval sends them
    choice_chars: tuple[int, ...]  # len() of each choice string (acc_norm's divisor)
    gold: int


def encode_pair(tokenizer, context: str, continuation: str) -> tuple[list[int], list[int]]:
    """Context and continuation tokens as lm-eval's HFLM makes them: trailing context spaces move to
    the continuation, whose tokens are those of the whole text after the context's."""
    n = len(context) - len(context.rstrip())
    if n:
        context, continuation = context[:-n], context[-n:] + continuation
    c, whole = tokenizer.encode(context), tokenizer.encode(context + continuation)
    return c, whole[len(c) :]


def reports_norm(task: str) -> bool:
    """Whether lm-eval reports acc_norm for the task (its YAML's metric_list)."""
    cfg = yaml.safe_load((Path(__file__).parent / "tasks" / f"{task}.yaml").read_text())
    return any(m["metric"] == "acc_norm" for m in cfg["metric_list"])


@functools.lru_cache(maxsize=32)
def _all_docs(task: str, data_dir: str | None, part: str | None) -> tuple[Doc, ...]:
    if task == "winogrande":  # lm-eval's preprocess_winogrande: the option fills the context
        docs = []
        for r in data.task_rows(task, data_dir, part):
            i = r["sentence"].index("_")
            ctxs = [r["sentence"][:i] + r[k] for k in ("option1", "option2")]
            rest = " " + r["sentence"][i + 1 :].strip()
            docs.append(Doc(tuple((c, rest) for c in ctxs), tuple(map(len, ctxs)), int(r["answer"]) - 1))
        return tuple(docs)
    # data.task_items: lm-eval's prompts, the choices carrying its target delimiter " "
    return tuple(
        Doc(tuple((it.prompt, c) for c in it.choices), tuple(len(c) - 1 for c in it.choices), it.gold)
        for it in data.task_items(task, data_dir, part)
    )


def task_docs(
    task: str, data_dir: str | None = None, limit: int | float | None = None, part: str | None = None
) -> list[Doc]:
    """The first documents of a task (lm-eval's ``limit``: a count, or a fraction when < 1);
    ``part``: only that content-hash half (data.part_of), as ``evaluate.task_config`` gives lm-eval."""
    if task not in NATIVE_TASKS:
        raise GhostsearchError(
            f"task {task!r} has no native evaluator; use eval.engine=lm-eval or one of: {', '.join(NATIVE_TASKS)}"
        )
    docs = list(_all_docs(task, data_dir, part))
    if limit is not None:
        docs = docs[: int(math.ceil(len(docs) * limit)) if limit < 1.0 else int(limit)]
    return docs


def resolve_max_length(model, tokenizer) -> int:
    """HFLM's context length for the model (lm-eval's own resolution: config, then tokenizer, then 2048)."""
    from lm_eval.models.utils import resolve_max_length as lm_eval_max_length

    return lm_eval_max_length(model.config, tokenizer)


# ---------------------------------------------------------------- packing
@dataclass
class Packed:
    """One item as one sequence: ids, positions, segment (0 = shared prefix, j = branch j), and
    for every scored token its row index, target and request number."""

    ids: list[int]
    pos: list[int]
    seg: list[int]
    pred: list[int] = field(default_factory=list)
    target: list[int] = field(default_factory=list)
    req: list[int] = field(default_factory=list)
    part: list[int] = field(default_factory=list)  # a row of several items (``merged``): each token's item; [] one


def joined(items: Sequence[Packed]) -> Packed:
    """Several packed items as one row, one after another: each keeps its positions, segments, scored
    tokens and requests, and (``part``) sees only its own tokens."""
    if len(items) == 1:
        return items[0]
    out = Packed([], [], [], part=[])
    for k, p in enumerate(items):
        at = len(out.ids)
        out.ids += p.ids
        out.pos += p.pos
        out.seg += p.seg
        out.part += [k] * len(p.ids)
        out.pred += [at + i for i in p.pred]
        out.target += p.target
        out.req += p.req
    return out


def merged(items: Sequence[Packed], width: int) -> list[Packed]:
    """``items`` put together into rows of at most ``width`` tokens (first fit, longest first; an item
    longer than ``width`` gets a row alone), each row ``joined``."""
    rows: list[list[Packed]] = []
    used: list[int] = []
    for p in sorted(items, key=lambda p: -len(p.ids)):
        r = next((r for r, u in enumerate(used) if u + len(p.ids) <= width), None)
        if r is None:
            rows.append([p])
            used.append(len(p.ids))
        else:
            rows[r].append(p)
            used[r] += len(p.ids)
    return [joined(r) for r in rows]


def row_work(rows: Sequence[Packed], pair_cost: float) -> float:
    """A micro-batch's compute in token-block units: every row padded to the longest, each token one
    unit of the blocks' matrix products, each attention pair (query, key) ``pair_cost`` of one."""
    T = max(len(p.ids) for p in rows)
    return len(rows) * T * (1 + pair_cost * T)


def least_work(items: Sequence[Packed], pair_cost: float) -> list[Packed]:
    """A micro-batch's items as the rows that compute the least (``row_work``): one row each (padded
    to the longest), or merged into rows of 1, 2 or 4 times the longest item, or into one row. Items of
    unequal lengths, one per row, leave padding that runs every block (36% of the tokens at bench/eval.py's
    5 documents per task); merged rows trade it for longer attention rows."""
    longest, total = max(len(p.ids) for p in items), sum(len(p.ids) for p in items)
    options = [list(items)] + [merged(items, w) for w in sorted({longest, 2 * longest, 4 * longest, total})]
    return min(options, key=lambda rows: row_work(rows, pair_cost))


def pair_cost(stack: Stack) -> float:
    """``row_work``'s price of an attention pair in tokens through a block's matrix products: a pair's
    query-key and weighted-value products (2 x 2 x the attention width FLOPs) over a token's (2 x the
    block's weights)."""
    c = stack.config
    heads = int(getattr(c, "num_attention_heads", 0) or 1)
    head_dim = getattr(c, "head_dim", None) or c.hidden_size // heads
    weights = sum(p.numel() for p in stack.blocks[0].parameters())
    return 4 * heads * head_dim / (2 * weights)


def pack_doc(tokenizer, doc: Doc, first_req: int, max_len: int) -> Packed:
    inputs, conts = [], []
    for ctx, cont in doc.requests:
        c, w = encode_pair(tokenizer, ctx, cont)
        if not c or not w or len(w) > max_len:
            raise GhostsearchError(
                f"request ({ctx[-40:]!r}, {cont[:40]!r}) tokenises to an empty part or a "
                f"continuation longer than {max_len} tokens; check the task data"
            )
        full = (c + w)[-(max_len + 1) :]  # HFLM: left-truncated, the last token is not an input
        inputs.append(tuple(full[:-1]))
        conts.append(w)
    distinct = list(dict.fromkeys(inputs))  # identical requests share one branch (identical values)
    P = len(distinct[0])
    for u in distinct[1:]:
        P = next((i for i, (a, b) in enumerate(zip(distinct[0][:P], u)) if a != b), min(P, len(u)))
    p = Packed(list(distinct[0][:P]), list(range(P)), [0] * P)
    start = {}
    for j, u in enumerate(distinct, 1):
        start[u] = len(p.ids)
        p.ids += u[P:]
        p.pos += range(P, len(u))
        p.seg += [j] * (len(u) - P)
    for r, (u, w) in enumerate(zip(inputs, conts)):
        for t, tok in enumerate(w):
            i = len(u) - len(w) + t  # input position predicting continuation token t
            p.pred.append(i if i < P else start[u] + i - P)
            p.target.append(tok)
            p.req.append(first_req + r)
    return p


def make_batch(items: Sequence[Packed], dtype: torch.dtype, pad_id: int = 0) -> Batch:
    """Packed items (one per row) as one micro-batch: a 4D additive mask where a position sees the
    earlier positions of the shared prefix and of its own branch; padding sees only itself (rows of
    one length without branches: the model's own causal mask)."""
    b, T = len(items), max(len(p.ids) for p in items)
    extra = {
        "pred": torch.tensor([r * T + i for r, p in enumerate(items) for i in p.pred]),
        "target": torch.tensor([t for p in items for t in p.target]),
        "req": torch.tensor([q for p in items for q in p.req]),
    }
    if all(len(p.ids) == T and not any(p.seg) and not p.part for p in items):  # plain causal rows (windows)
        return Batch(input_ids=torch.tensor([p.ids for p in items]), extra=extra)
    ids = torch.full((b, T), pad_id, dtype=torch.long)
    pos = torch.zeros((b, T), dtype=torch.long)
    seg = torch.full((b, T), -1, dtype=torch.long)
    part = torch.zeros((b, T), dtype=torch.long)  # the item of each token in a merged row (padding: its own)
    for r, p in enumerate(items):
        n = len(p.ids)
        ids[r, :n], pos[r, :n], seg[r, :n] = torch.tensor(p.ids), torch.tensor(p.pos), torch.tensor(p.seg)
        if p.part:
            part[r, :n] = torch.tensor(p.part)
    causal = torch.tril(torch.ones(T, T, dtype=torch.bool))
    allow = causal & ((seg[:, None, :] == 0) | (seg[:, None, :] == seg[:, :, None])) & (seg[:, None, :] >= 0)
    allow &= part[:, None, :] == part[:, :, None]
    allow |= torch.eye(T, dtype=torch.bool)
    mask = torch.zeros((b, 1, T, T), dtype=dtype).masked_fill_(~allow[:, None], torch.finfo(dtype).min)
    return Batch(input_ids=ids, attention_mask=mask, position_ids=pos, weight=(seg >= 0).float(), extra=extra)


# ---------------------------------------------------------------- finalists over a dense prefix cache
@dataclass
class Plan:
    """One finalist as the runner sees it: removed blocks, repair operators, start boundary."""

    removed: tuple[int, ...]
    ops: Operators | None
    start: int

    def patches(self, stack: Stack):
        """A context giving the repair's {boundary: fn} (empty for an unrepaired finalist)."""
        import contextlib

        if self.ops is None:
            return contextlib.nullcontext({})
        from ghostsearch.recovery.base import recovery_for

        return recovery_for(self.ops).patches(stack, self.ops)


def plans(stack: Stack, finalists) -> list[Plan]:
    """(removed, Operators | None) pairs checked and given their start: the first removed block, or
    earlier where a repair patch reads the block before its boundary (as Scorer.score)."""
    out, L = [], stack.n_blocks
    for removed, ops in finalists:
        removed = check_removed(removed, L)
        if ops is not None and tuple(ops.removed) != removed:
            raise GhostsearchError(
                f"repair operators are for {tuple(ops.removed)}, not for the finalist {removed}; "
                "fit them for this removed set"
            )
        plan = Plan(removed, ops, L)  # its start set below, once its patches are known
        with plan.patches(stack) as p:
            plan.start = run_start(removed, p, L)
        out.append(plan)
    return out


def state_bytes(items: Sequence[Packed], stack: Stack, boundaries: int) -> int:
    T = max(len(p.ids) for p in items)
    return boundaries * len(items) * T * stack.config.hidden_size * torch.finfo(stack.dtype).bits // 8


def check_cap(batches: list[list[Packed]], stack: Stack, boundaries: int, cap_bytes: float) -> None:
    """One line before any model work when a single micro-batch's states exceed the cap."""
    need = max((state_bytes(mb, stack, boundaries) for mb in batches), default=0)
    if need > cap_bytes:
        raise GhostsearchError(
            f"one micro-batch needs {need / GIB:.3g} GiB of cached states ({boundaries} start "
            f"boundaries), over eval.cache_gib={cap_bytes / GIB:g}; raise eval.cache_gib or "
            "lower eval.batch_size"
        )


def chunks(batches: list[list[Packed]], stack: Stack, boundaries: int, cap_bytes: float):
    """Consecutive micro-batches whose cached states fit in ``cap_bytes`` together (one at least)."""
    chunk: list[list[Packed]] = []
    used = 0
    for mb in batches:
        n = state_bytes(mb, stack, boundaries)
        if chunk and used + n > cap_bytes:
            yield chunk
            chunk, used = [], 0
        chunk.append(mb)
        used += n
    if chunk:
        yield chunk


@torch.no_grad()
def run_finalists(
    stack: Stack,
    batches: list[list[Packed]],
    finals: list[Plan],
    consume: Callable,
    cap_bytes: float,
    offload: bool = False,
    stats: dict | None = None,
    on_step: Callable | None = None,
    pad_id: int = 0,
) -> None:
    """For every chunk of micro-batches: one dense forward each, up to the deepest finalist start
    (Stack.capture's ``upto``: a share without the dense model never runs its last blocks densely),
    the states at the finalists' starts kept; then every finalist from its start; ``consume(finalist, batch, h)``
    gets the
    final states (before the norm). ``on_step(finalist, rows)`` after each finalist's chunk. ``stats``
    gets cache_bytes_peak, dense_seconds (the dense forwards) and finalist_seconds (each finalist's
    runs from its start, the LM head included)."""
    starts = sorted({p.start for p in finals})
    check_cap(batches, stack, len(starts), cap_bytes)
    stats = {} if stats is None else stats
    stats.setdefault("cache_bytes_peak", 0)
    for chunk in chunks(batches, stack, len(starts), cap_bytes):
        t0 = time.perf_counter()
        cached = []
        for mb in chunk:
            batch = make_batch(mb, stack.dtype, pad_id)
            cap = stack.capture(batch, upto=starts[-1])  # no block past the deepest start runs densely
            keep = {s: cap.states[s].to("cpu") if offload else cap.states[s] for s in starts}
            cap.states = []
            cached.append((batch, cap, keep))
        held = sum(x.numel() * x.element_size() for _, _, k in cached for x in k.values())
        stats["cache_bytes_peak"] = max(stats["cache_bytes_peak"], held)
        stats["dense_seconds"] = stats.get("dense_seconds", 0.0) + time.perf_counter() - t0
        seconds = stats.setdefault("finalist_seconds", [0.0] * len(finals))
        for f, plan in enumerate(finals):
            t0 = time.perf_counter()
            with plan.patches(stack) as patches:
                for batch, cap, keep in cached:
                    h = keep[plan.start].to(stack.device)
                    consume(f, batch, stack.run(h, cap, plan.start, plan.removed, patches=patches))
            seconds[f] += time.perf_counter() - t0
            if on_step:
                on_step(f, sum(len(set(p.part)) or 1 for mb in chunk for p in mb))  # items (merged rows hold several)
        del cached


# ---------------------------------------------------------------- requests of many finalists
def pack_docs(
    tokenizer, docs: list[Doc], max_len: int, batch_size: int, pair_cost: float | None = None
) -> tuple[list[list[Packed]], int]:
    """Documents packed one per row, in micro-batches of ``batch_size`` documents of similar length; and
    the number of requests (their numbering follows ``docs``). ``pair_cost`` (the model's, ``pair_cost``):
    a micro-batch's documents as the rows that compute the least (``least_work``: several per row
    where that saves padding)."""
    packed, n_req = [], 0
    for d in docs:
        packed.append(pack_doc(tokenizer, d, n_req, max_len))
        n_req += len(d.requests)
    order = sorted(range(len(packed)), key=lambda i: -len(packed[i].ids))  # little padding per micro-batch
    bs = max(1, batch_size)
    mbs = [[packed[i] for i in order[s : s + bs]] for s in range(0, len(order), bs)]
    return (mbs if pair_cost is None else [least_work(mb, pair_cost) for mb in mbs]), n_req


def shared_head(
    stack: Stack, h: torch.Tensor, pred: torch.Tensor, targets: torch.Tensor, chunk: int = 1024
) -> tuple[torch.Tensor, torch.Tensor]:
    """``stack.token_logprobs_top(h[pred], targets)`` with the LM head run once per distinct row of ``pred``:
    every choice of a document predicts its first answer token from the same position (the context's last
    token), 17% of the answer tokens at bench/eval.py's 5 documents a task (boolq's two one-token answers: one
    row). Each row's log-softmax is the one cross_entropy takes its value from."""
    rows, inv = torch.unique(pred, return_inverse=True)
    x = h[rows.to(h.device)]
    lp = torch.empty(len(pred), dtype=torch.float32)
    top = torch.empty(len(pred), dtype=torch.bool)
    for s in range(0, x.shape[0], chunk):
        lg = stack.logits(x[s : s + chunk])
        which = ((inv >= s) & (inv < s + chunk)).nonzero().squeeze(1)
        at, t = (inv[which] - s).to(lg.device), targets[which].to(lg.device)
        lp[which] = torch.log_softmax(lg, -1)[at, t].cpu()
        top[which] = (lg.argmax(-1)[at] == t).cpu()
    return lp, top


def loglikelihoods_finalists(
    stack: Stack,
    batches: list[list[Packed]],
    n_req: int,
    finals: list[Plan],
    cap_bytes: float,
    offload: bool = False,
    stats: dict | None = None,
    on_step: Callable | None = None,
    pad_id: int = 0,
) -> tuple[torch.Tensor, torch.Tensor]:
    """[finalist, request] log-likelihoods (float64) and whether every continuation token is the
    greedy choice (lm-eval's ``loglikelihood``), for packed micro-batches (``pack_docs``)."""
    lls = torch.zeros(len(finals), n_req, dtype=torch.float64)
    missed = torch.zeros(len(finals), n_req, dtype=torch.long)

    def consume(f: int, batch: Batch, h: torch.Tensor) -> None:
        e = batch.extra
        lp, top = shared_head(stack, h.reshape(-1, h.shape[-1]), e["pred"], e["target"])
        lls[f].index_add_(0, e["req"], lp.double().cpu())
        missed[f].index_add_(0, e["req"], (~top).long().cpu())

    run_finalists(stack, batches, finals, consume, cap_bytes, offload, stats, on_step, pad_id)
    return lls, missed == 0


def window_items(windows: torch.Tensor, first: int = 0) -> list[Packed]:
    """Perplexity windows [n, T] as packed rows: every position but the last predicts the next token.
    ``first``: the global number of the first window, so a micro-batch's windows are numbered by
    their place among all windows (their log-likelihoods land in their own slots whatever the
    batching; numbered by their place in the micro-batch, every batch would sum into the first slots)."""
    T = windows.shape[1]
    return [
        Packed(w, list(range(T)), [0] * T, list(range(T - 1)), w[1:], [first + i] * (T - 1))
        for i, w in enumerate(windows.tolist())
    ]


def predictions(lls: np.ndarray, doc: Doc) -> tuple[int, int]:
    """(argmax of the log-likelihoods, argmax per choice character): numpy's first index on ties."""
    return int(np.argmax(lls)), int(np.argmax(lls / np.array(doc.choice_chars, dtype=np.float64)))


def evaluate_finalists_native(
    model,
    tokenizer,
    finalists,
    cfg_eval,
    data_dir: str | None = None,
    *,
    tasks=None,
    held_out=(),
    progress: bool = True,
    offload: bool = False,
    stats: dict | None = None,
    items: dict[str, list[int]] | None = None,
) -> tuple[list[FinalistNumbers], list[ItemRow]]:
    """Zero-shot accuracies of every finalist on ``tasks`` (default ``cfg_eval.tasks``; the run's
    item draw, ``items.draw``: eval.seed, eval.sample, eval.limit, eval.max_items ...; or ``items``,
    {task: doc row numbers}; micro-batches of ``cfg_eval.batch_size`` items; at most
    ``cfg_eval.cache_gib`` of cached dense states; ``held_out`` tasks in their evaluation half).
    ``finalists``: (removed, Operators or None) pairs of the UNPRUNED ``model``. Returns the numbers
    of each finalist ('<task>_acc', '<task>_acc_norm' where lm-eval reports it, '<task>_n') and one
    row per finalist x document (``write_item_rows``; ``doc`` = the row number in the task's file)."""
    from tqdm.auto import tqdm

    from ghostsearch.data import items as item_draw

    stack = Stack(model)
    finals = plans(stack, finalists)
    tasks = list(cfg_eval.tasks if tasks is None else tasks)
    parts = {t: "evaluation" if t in held_out else None for t in tasks}
    for t in tasks:  # input errors before model work
        task_docs(t, data_dir, 1, parts[t])
    if items is None:
        items = item_draw.draw(cfg_eval, tasks, data_dir, held_out).first()
    ids = {t: list(items.get(t, [])) for t in tasks}
    docs = {t: [_all_docs(t, data_dir, None)[i] for i in ids[t]] for t in tasks}
    stats = {} if stats is None else stats
    stats.setdefault("split_docs", {}).update({t: len(_all_docs(t, data_dir, parts[t])) for t in tasks})
    cap = float(cfg_eval.cache_gib) * GIB
    max_len = resolve_max_length(model, tokenizer)
    price = pair_cost(stack)
    packed = {t: pack_docs(tokenizer, docs[t], max_len, cfg_eval.batch_size, price) for t in tasks}
    for t in tasks:
        if packed[t][0]:
            check_cap(packed[t][0], stack, len({p.start for p in finals}), cap)
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
    results: list[dict] = [dict() for _ in finals]
    rows: list[ItemRow] = []
    for task in tasks:
        t0 = time.perf_counter()
        bars = [
            tqdm(total=len(docs[task]), desc=f"{task} {label(p)}", unit="item", leave=False, disable=not progress)
            for p in finals
        ]
        lls, _ = loglikelihoods_finalists(
            stack,
            *packed[task],
            finals,
            cap,
            offload,
            stats,
            on_step=lambda f, n, bars=bars: bars[f].update(n),
            pad_id=pad,
        )
        for b in bars:
            b.close()
        norm = reports_norm(task)
        for f, plan in enumerate(finals):
            q, acc, acc_norm = 0, 0, 0
            for i, d in enumerate(docs[task]):
                ll = lls[f, q : q + len(d.requests)].numpy()
                q += len(d.requests)
                pred, pred_norm = predictions(ll, d)
                acc, acc_norm = acc + (pred == d.gold), acc_norm + (pred_norm == d.gold)
                rows.append(
                    ItemRow(
                        finalist=f,
                        removed=plan.removed,
                        recovery=method_name(plan),
                        task=task,
                        doc=ids[task][i],
                        gold=d.gold,
                        pred=pred,
                        pred_norm=pred_norm if norm else None,
                        lls=tuple(ll.tolist()),
                    )
                )
            n = len(docs[task])
            results[f][f"{task}_acc"] = acc / n if n else math.nan
            if norm:
                results[f][f"{task}_acc_norm"] = acc_norm / n if n else math.nan
            results[f][f"{task}_n"] = n
        stats.setdefault("task_seconds", {})[task] = time.perf_counter() - t0
        stats["items"] = stats.get("items", 0) + len(docs[task]) * len(finals)
    return [FinalistNumbers.from_dict(r) for r in results], rows


def accuracies(rows: list[ItemRow], tasks) -> FinalistNumbers:
    """'<task>_acc', '<task>_acc_norm' (where lm-eval reports it), '<task>_n' of one model's
    per-item rows (``write_item_rows``'s columns), as ``evaluate_finalists_native`` computes them."""
    out: dict = {}
    for t in tasks:
        mine = [r for r in rows if r.task == t]
        n = len(mine)
        out[f"{t}_acc"] = sum(r.pred == r.gold for r in mine) / n if n else math.nan
        if reports_norm(t):
            out[f"{t}_acc_norm"] = sum(r.pred_norm == r.gold for r in mine) / n if n else math.nan
        out[f"{t}_n"] = n
    return FinalistNumbers.from_dict(out)


def method_name(plan: Plan) -> str:
    return "none" if plan.ops is None else plan.ops.method


def label(plan: Plan) -> str:
    """-3,7,12+ghosted (``dense`` for nothing removed)."""
    return f"-{','.join(map(str, plan.removed)) or 'dense'}" + ("" if plan.ops is None else f"+{plan.ops.method}")


def fit_finalists(model, tokenizer, cfg, specs) -> list[tuple[tuple[int, ...], Operators | None]]:
    """(removed, method) pairs -> (removed, Operators or None) with the config's repair path
    (``recovery.repair.fit_all``: one dense calibration pass for all of them); method None or
    ``none``: unrepaired."""
    from ghostsearch.recovery.repair import fit_all

    return [(tuple(removed), ops) for (removed, _), ops in zip(specs, fit_all(model, tokenizer, specs, cfg))]


def write_item_rows(rows: list[ItemRow], path) -> None:
    """Per-item predictions to Parquet (atomic), one row per finalist x task x document
    (``eval_numbers.items_to_arrow``: the schema every items.parquet has)."""
    from ghostsearch.core.io import write_parquet_atomic

    write_parquet_atomic(path, items_to_arrow(rows))
