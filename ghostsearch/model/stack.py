"""A decoder-only Hugging Face causal LM seen as  embed -> blocks[0..L) -> norm -> head.

Family differences live here and nowhere else. Instead of re-implementing each family's
rotary embeddings, masks and per-layer types (Gemma2/3 sliding windows, local/global rope),
``Stack.capture`` runs the model's own forward once per calibration micro-batch and records,
with forward pre-hooks, the exact positional and keyword arguments every block receives.
Scoring then calls blocks directly with those arguments: masking a block is skipping it, so
switching candidates costs nothing and no weight is copied.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Sequence

import torch
import torch.nn.functional as F
from torch import nn

from ghostsearch.core.errors import GhostsearchError
from ghostsearch.model.placement import ATTR, Placement, place

if TYPE_CHECKING:
    from transformers import PreTrainedModel


@dataclass
class Batch:
    """One calibration micro-batch as the model's forward takes it."""

    input_ids: torch.Tensor  # [b, T]
    attention_mask: torch.Tensor | None = None  # [b, T] padding mask, or [b, 1, T, T] additive mask
    position_ids: torch.Tensor | None = None  # [b, T]
    weight: torch.Tensor | None = None  # [b, T] 1 for real tokens (statistics), None = all
    extra: dict = field(default_factory=dict)  # objective-specific targets and indices

    @property
    def rows(self) -> int:
        return self.input_ids.shape[0]


@dataclass
class Captured:
    """What ``Stack.capture`` records for one micro-batch."""

    block_args: list[tuple]  # per block: positional args after hidden_states
    block_kwargs: list[dict]  # per block: keyword args
    states: list[torch.Tensor]  # hidden state entering block i, i = 0..L (L = final, before norm)


def _find_decoder(model: nn.Module) -> tuple[nn.Module, nn.ModuleList]:
    n = getattr(model.config, "num_hidden_layers", None)
    for inner_name in ("model", "transformer", "decoder"):
        inner = getattr(model, inner_name, None)
        if inner is None:
            continue
        if hasattr(inner, "language_model"):  # multimodal wrappers (e.g. Gemma3ForConditionalGeneration)
            inner = inner.language_model
        for list_name in ("layers", "h", "blocks"):
            blocks = getattr(inner, list_name, None)
            if isinstance(blocks, nn.ModuleList) and (n is None or len(blocks) == n):
                return inner, blocks
    raise GhostsearchError(
        f"{type(model).__name__} has no decoder block list (model.model.layers or similar); "
        "ghostsearch prunes decoder-only causal LMs such as Llama, Mistral, Qwen, Gemma, OLMo2, Phi3"
    )


def _slice_rows(x: Any, rows: slice | torch.Tensor, b: int) -> Any:
    """Slice every tensor whose leading dim is the micro-batch size (masks, per-row rope)."""
    if isinstance(x, torch.Tensor):
        return x[rows] if (b > 1 and x.dim() > 0 and x.shape[0] == b) else x
    if isinstance(x, tuple):
        return tuple(_slice_rows(v, rows, b) for v in x)
    if isinstance(x, list):
        return [_slice_rows(v, rows, b) for v in x]
    if isinstance(x, dict):
        return {k: _slice_rows(v, rows, b) for k, v in x.items()}
    return x


class _Recorder:
    """What one dense forward of ``Stack.capture`` records: the hooks it registers and the
    pass-through forward of the blocks it does not compute."""

    def __init__(self, n_blocks: int):
        self.L = n_blocks
        self.args: list[Any] = [None] * n_blocks
        self.kwargs: list[Any] = [None] * n_blocks
        self.states: list[Any] = [None] * (n_blocks + 1)
        self.tuple: bool | None = None  # what a block returns in this family (the last block computed)

    def pre(self, i: int):
        def hook(module, a, kw):
            if a:
                self.states[i], self.args[i], self.kwargs[i] = a[0], tuple(a[1:]), dict(kw)
            else:
                kw = dict(kw)
                self.states[i], self.args[i], self.kwargs[i] = kw.pop("hidden_states"), (), kw

        return hook

    def post(self, module, a, kw, out) -> None:
        self.states[self.L] = out[0] if isinstance(out, tuple) else out

    def seen(self, module, a, kw, out) -> None:
        self.tuple = isinstance(out, tuple)

    def passthrough(self, *a, **kw):
        h = a[0] if a else kw["hidden_states"]
        return (h,) if self.tuple else h


def _drop_caches(kwargs: list[Any]) -> None:
    """A captured block's keyword arguments without a KV cache (scoring runs blocks without one)."""
    for kw in kwargs:
        for key in ("past_key_values", "cache", "past_key_value"):
            if key in kw:
                kw[key] = None
        if "use_cache" in kw:
            kw["use_cache"] = False


class Stack:
    """The model view. ``run(h, cap, start, removed)`` runs blocks start..L-1 except ``removed``."""

    def __init__(self, model: PreTrainedModel):
        self.model = model
        self.config = model.config
        self.inner, self.blocks = _find_decoder(model)
        norm = next(
            (getattr(self.inner, n) for n in ("norm", "final_layernorm", "ln_f") if hasattr(self.inner, n)), None
        )
        if norm is None:
            raise GhostsearchError(f"{type(model).__name__}: cannot find the final norm of the decoder")
        self.norm: nn.Module = norm
        self.lm_head = model.get_output_embeddings()
        self.softcap = getattr(self.config, "final_logit_softcapping", None) or getattr(
            getattr(self.config, "text_config", None), "final_logit_softcapping", None
        )
        self.logit_scale = getattr(self.config, "logit_scale", None)
        self.placement: Placement | None = getattr(model, ATTR, None)  # set by ``place`` (or load_model)

    @property
    def n_blocks(self) -> int:
        return len(self.blocks)

    # ------------------------------------------------------------ placement (ghostsearch/model/placement.py)
    def place(self, devices: Sequence[str], real: dict | None = None) -> Placement:
        """Split the blocks over ``devices`` (embeddings on the first, norm and head on the last)."""
        self.placement = place(self.model, self.blocks, self.norm, self.lm_head, devices, real)
        return self.placement

    @property
    def device(self) -> torch.device:
        """Where the model's input goes: the embeddings' device."""
        if self.placement is not None:
            return self.placement.device(self.placement.first)
        return next(self.model.parameters()).device

    def device_of(self, b: int) -> torch.device:
        """The device of the state entering block b (b = n_blocks: the final state, the head's)."""
        if self.placement is None:
            return self.device
        return self.placement.device(self.placement.boundary(b))

    def _at(self, x, b: int):
        """x moved to the device of boundary b (unchanged on one device)."""
        return x if self.placement is None else self.placement.to(x, self.placement.boundary(b))

    @property
    def dtype(self) -> torch.dtype:
        return next(self.model.parameters()).dtype

    # ------------------------------------------------------------ capture
    @torch.no_grad()
    def capture(self, batch: Batch, upto: int | None = None) -> Captured:
        """One dense forward that records every block's call arguments and input state. ``upto``
        (< L): the states only up to the input of block ``upto`` are needed (every finalist that
        will run from the capture starts at or before it): blocks from there on are passed through
        without computing them (their call arguments, which do not depend on the hidden states, are
        still recorded), and states[i > upto] are None."""
        L = self.n_blocks
        skip_from = L if upto is None or upto >= L else max(int(upto), 1)  # block 0 runs: its output's shape
        rec = _Recorder(L)
        hooks = [blk.register_forward_pre_hook(rec.pre(i), with_kwargs=True) for i, blk in enumerate(self.blocks)]
        if skip_from < L:
            hooks.append(self.blocks[skip_from - 1].register_forward_hook(rec.seen, with_kwargs=True))
        else:
            hooks.append(self.blocks[-1].register_forward_hook(rec.post, with_kwargs=True))
        own = {i: self.blocks[i].__dict__.get("forward") for i in range(skip_from, L)}
        for i in own:
            self.blocks[i].forward = rec.passthrough  # type: ignore[method-assign]
        try:
            dev = self.device
            self.inner(
                input_ids=batch.input_ids.to(dev),
                attention_mask=None if batch.attention_mask is None else batch.attention_mask.to(dev),
                position_ids=None if batch.position_ids is None else batch.position_ids.to(dev),
                use_cache=False,
            )
        finally:
            for h in hooks:
                h.remove()
            self._restore_forwards(own)
        for i in range(skip_from + 1, L + 1):
            rec.states[i] = None  # passed through, not computed
        _drop_caches(rec.kwargs)
        return Captured(block_args=rec.args, block_kwargs=rec.kwargs, states=rec.states)

    def _restore_forwards(self, own: dict[int, Any]) -> None:
        """Each block's own ``forward`` back where capture replaced it (None: it had none of its own)."""
        for i, fwd in own.items():
            if fwd is None:
                del self.blocks[i].forward
            else:
                self.blocks[i].forward = fwd

    @staticmethod
    def slice(cap: Captured, rows: slice | torch.Tensor, b: int) -> Captured:
        """The captured arguments for rows ``rows`` of a micro-batch of size ``b`` (states not copied)."""
        if isinstance(rows, slice) and rows == slice(0, b):
            return cap
        return Captured(
            block_args=_slice_rows(cap.block_args, rows, b),
            block_kwargs=_slice_rows(cap.block_kwargs, rows, b),
            states=[],
        )

    # ------------------------------------------------------------ running blocks
    def block(self, i: int, h: torch.Tensor, cap: Captured) -> torch.Tensor:
        out = self.blocks[i](self._at(h, i), *cap.block_args[i], **cap.block_kwargs[i])
        return out[0] if isinstance(out, tuple) else out

    @torch.no_grad()
    def run(
        self,
        h: torch.Tensor,
        cap: Captured,
        start: int,
        removed: Sequence[int],
        stop: int | None = None,
        record: dict | None = None,
        patches: dict | None = None,
    ) -> torch.Tensor:
        """Run blocks start..stop-1 that are not removed. If ``record`` is a dict, store the state
        entering every block index i in [start, stop] into record[i]. ``patches`` maps a boundary b
        (the input of block b, or L for the output) to a function applied to the state there: the
        recovery operators at the end of each cut."""
        skip = set(removed)
        stop = self.n_blocks if stop is None else stop
        for i in range(start, stop):
            h = self._at(h, i)  # crossing a device boundary (placement): before patches and records
            if patches and i in patches:
                h = patches[i](h)
            if record is not None:
                record[i] = h
            if i not in skip:
                h = self.block(i, h, cap)
        h = self._at(h, stop)
        if patches and stop in patches:
            h = patches[stop](h)
        if record is not None:
            record[stop] = h
        return h

    # ------------------------------------------------------------ head
    def logits(self, x: torch.Tensor, normed: bool = False) -> torch.Tensor:
        """LM-head logits (fp32) for hidden states x [..., C]; ``normed`` if the final norm is applied."""
        x = self._at(x, self.n_blocks)
        if not normed:
            x = self.norm(x)
        out = self.lm_head(x).float()
        if self.logit_scale is not None:
            out = out * self.logit_scale
        if self.softcap:
            out = torch.tanh(out / self.softcap) * self.softcap
        return out

    def token_logprobs(
        self, x: torch.Tensor, targets: torch.Tensor, chunk: int = 1024, normed: bool = False
    ) -> torch.Tensor:
        """log p(target) (fp32, on the head's device) for rows of x [n, C] (``normed``: after the final
        norm), in chunks of ``chunk`` tokens so [n x vocab] logits are never materialised at once."""
        return self._head(x, targets, chunk, normed, top=False)[0]

    def token_logprobs_top(
        self, x: torch.Tensor, targets: torch.Tensor, chunk: int = 1024, normed: bool = False
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """``token_logprobs`` and whether each target is the greedy choice (the argmax of its logits)."""
        lp, top = self._head(x, targets, chunk, normed, top=True)
        assert top is not None
        return lp, top

    def _head(
        self, x: torch.Tensor, targets: torch.Tensor, chunk: int, normed: bool, top: bool
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """The one chunked LM-head loop (scoring, perplexity and zero-shot evaluation all go through it)."""
        x, targets = self._at(x, self.n_blocks), self._at(targets, self.n_blocks)
        out = torch.empty(x.shape[0], dtype=torch.float32, device=x.device)
        hit = torch.empty(x.shape[0], dtype=torch.bool, device=x.device) if top else None
        for s in range(0, x.shape[0], chunk):
            lg = self.logits(x[s : s + chunk], normed=normed)
            out[s : s + chunk] = -F.cross_entropy(lg, targets[s : s + chunk], reduction="none")
            if hit is not None:
                hit[s : s + chunk] = lg.argmax(-1) == targets[s : s + chunk]
        return out, hit


def run_start(removed: Sequence[int], patches, n_blocks: int) -> int:
    """The boundary a run of ``removed`` must start from: its first removed block (``n_blocks`` when
    none), or earlier where a repair patch at boundary b reads what block b-1 computed (``patches``:
    the boundaries of the run's patches, a {boundary: fn} dict or None)."""
    return min([min(removed, default=n_blocks)] + [max(0, b - 1) for b in (patches or ())])


# ---------------------------------------------------------------- physical pruning
def prune_config_lists(config, keep: list[int]) -> None:
    """Slice per-layer config lists (layer_types, sliding-window patterns ...), set the new depth, and
    rewrite the fields that state the layer types by a rule on the layer index (``period_fields``)."""
    L = config.num_hidden_layers
    for key, val in list(vars(config).items()):
        if isinstance(val, (list, tuple)) and len(val) == L and "layer" in key:
            setattr(config, key, type(val)(val[i] for i in keep))
    config.num_hidden_layers = len(keep)
    for key, val in period_fields(config).items():
        if val is not None or key in PATTERN_KEYS:  # max_window_layers must be an int: kept (export warns)
            setattr(config, key, val)


SLIDING, FULL = "sliding_attention", "full_attention"
PATTERN_KEYS = ("sliding_window_pattern", "_sliding_window_pattern")  # Gemma-3's period (and its old name)


def pattern_types(n: int, period: int) -> list[str]:
    """Gemma's rule: layer i slides unless (i + 1) is a multiple of ``period``."""
    return [SLIDING if (i + 1) % period else FULL for i in range(n)]


def qwen_types(n: int, max_window_layers: int) -> list[str]:
    """Qwen2/Qwen3's rule (sliding window on): layer i slides when i >= max_window_layers."""
    return [SLIDING if i >= max_window_layers else FULL for i in range(n)]


def period_fields(config) -> dict[str, Any]:
    """The config fields that restate ``layer_types`` by a rule on the layer index, set to the value
    that gives exactly these ``layer_types``; None where no value of the rule does (a reader that
    derives types from it then fails instead of mis-assigning a layer; transformers itself reads
    ``layer_types``). After a cut, the sliced
    ``layer_types`` rarely follow the dense model's period: Gemma-3 keeps ``sliding_window_pattern``
    6 and Qwen2/Qwen3 ``max_window_layers`` (issue 46). Empty when the config has no such field."""
    types = getattr(config, "layer_types", None)
    if not types:
        return {}
    types, n = list(types), len(types)
    out: dict[str, Any] = {}
    keys = [k for k in PATTERN_KEYS if k in vars(config)]
    if keys:
        period = next((p for p in range(1, n + 2) if pattern_types(n, p) == types), None)
        out.update(dict.fromkeys(keys, period))
    if "max_window_layers" in vars(config) and SLIDING in types:
        first = types.index(SLIDING)
        out["max_window_layers"] = first if qwen_types(n, first) == types else None
    elif "max_window_layers" in vars(config):
        out["max_window_layers"] = n  # no sliding layer: none at or above the depth
    return out


def physically_prune(model: nn.Module, removed: Sequence[int], copy_model: bool = True) -> nn.Module:
    """A model with the removed blocks deleted: blocks renumbered (``layer_idx``), config depth and
    per-layer lists sliced. The naive peer path, the export path and the equivalence reference."""
    m = copy.deepcopy(model) if copy_model else model
    _, blocks = _find_decoder(m)
    L = len(blocks)
    removed = list(check_removed(set(removed), L, what="the pruned set"))
    keep = [i for i in range(L) if i not in set(removed)]
    new_blocks = nn.ModuleList([blocks[i] for i in keep])
    for new_idx, blk in enumerate(new_blocks):
        for mod in blk.modules():
            if hasattr(mod, "layer_idx"):
                # an attribute of HF attention modules, not of nn.Module (mypy types it as a submodule)
                setattr(mod, "layer_idx", new_idx)  # noqa: B010
    inner, _ = _find_decoder(m)
    for name in ("layers", "h", "blocks"):
        if getattr(inner, name, None) is blocks:
            setattr(inner, name, new_blocks)
    for cfg in {id(m.config): m.config, id(inner.config): inner.config}.values():
        prune_config_lists(cfg, keep)
    placed = getattr(m, ATTR, None)
    if placed is not None:  # a split model: the kept blocks keep their devices (and their moving hooks)
        placed = copy.copy(placed)
        placed.blocks = tuple(placed.blocks[i] for i in keep)
        setattr(m, ATTR, placed)
    return m


def check_removed(removed, n_blocks: int, what: str = "--remove") -> tuple[int, ...]:
    """A removed set checked, as a sorted tuple: one clear line, naming ``what``, for every way it can
    be wrong. The one removed-set check (the CLI's --remove, finalists, repairs, scoring, physical
    pruning); a caller that lets a block be named twice passes ``set(removed)``."""
    r = list(removed)
    if len(set(r)) != len(r):
        dup = sorted({i for i in r if r.count(i) > 1})
        raise GhostsearchError(f"{what} repeats block(s) {dup}; list each block once")
    bad = [i for i in r if not 0 <= i < n_blocks]
    if bad:
        raise GhostsearchError(f"{what} has block(s) {bad} out of range; this model has blocks 0..{n_blocks - 1}")
    if len(r) >= n_blocks:
        raise GhostsearchError(f"{what} removes all {n_blocks} blocks; leave at least one")
    return tuple(sorted(r))
