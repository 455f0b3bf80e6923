"""The Recovery protocol: repair the cuts a removed set leaves, in closed form, without training.

* ``fit(stack, removed, data) -> Operators``: ``data`` is ``Activations`` (dense micro-batches).
* ``patches(stack, ops)``: a context giving ``{boundary: fn(h) -> h}`` for ``Stack.run`` (scoring
  the unpruned model with blocks skipped) — what ``Scorer.score(..., patches=)`` takes.
* ``apply(pruned_model, ops)``: the same repair on a physically pruned model (inference).
* ``Operators.save(dir)`` / ``Operators.load(dir)`` (recovery.safetensors, or an operator export's
  checkpoint when recovery.json says ``stored: checkpoint``: recovery/remote.py).

Boundaries use the ORIGINAL numbering: boundary b is the state entering block b (b = L: the
output of the last block, before the final norm). A cut is a contiguous run [a, b) of removed
blocks; its repair acts at b (ghosted, linearpatch) or at a (replaceme, after block a-1).
"""

from __future__ import annotations

import contextlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar, Iterator, Sequence

import torch
from torch import nn

from ghostsearch.core.errors import GhostsearchError
from ghostsearch.core.registry import Registry
from ghostsearch.model.stack import Batch, Captured, Stack

if TYPE_CHECKING:
    from transformers import PreTrainedModel

OPS_FILE, META_FILE = "recovery.safetensors", "recovery.json"


def cuts(removed: Sequence[int]) -> list[tuple[int, int]]:
    """Contiguous runs [a, b) of removed blocks, in order."""
    out: list[list[int]] = []
    for i in sorted(set(removed)):
        if out and out[-1][1] == i:
            out[-1][1] = i + 1
        else:
            out.append([i, i + 1])
    return [(a, b) for a, b in out]


def new_index(i: int, removed: Sequence[int]) -> int:
    """Index of original block (or boundary) i in the physically pruned model."""
    return i - sum(1 for r in removed if r < i)


@dataclass
class Operators:
    method: str
    variant: str
    removed: tuple[int, ...]
    n_blocks: int
    mats: dict[int, torch.Tensor] = field(default_factory=dict)  # boundary -> fp32 matrix
    report: list[dict] = field(default_factory=list)  # one row per cut

    def save(self, directory: str | Path) -> None:
        from safetensors.torch import save_file

        d = Path(directory)
        if self.mats:
            save_file({str(b): m.detach().float().cpu().contiguous() for b, m in self.mats.items()}, str(d / OPS_FILE))
        meta = {
            "method": self.method,
            "variant": self.variant,
            "removed": list(self.removed),
            "n_blocks": self.n_blocks,
            "boundaries": sorted(self.mats),
            "report": self.report,
        }
        (d / META_FILE).write_text(json.dumps(meta, indent=1))

    @classmethod
    def load(cls, directory: str | Path) -> "Operators":
        from safetensors.torch import load_file

        d = Path(directory)
        if not (d / META_FILE).exists():
            raise GhostsearchError(f"{d} has no {META_FILE}; it was not written by ghostsearch export")
        meta = json.loads((d / META_FILE).read_text())
        if not meta["boundaries"]:
            mats = {}
        elif meta.get("stored") == "checkpoint":  # an operator export's own weights (recovery/remote.py)
            from ghostsearch.recovery.remote import read_operators

            removed = meta["removed"]
            mats = read_operators(d, {int(b): new_index(int(b), removed) for b in meta["boundaries"]})
        else:
            mats = {int(b): m for b, m in load_file(str(d / OPS_FILE)).items()}
        return cls(meta["method"], meta["variant"], tuple(meta["removed"]), meta["n_blocks"], mats, meta["report"])


class Activations:
    """A re-iterable of dense calibration micro-batches ``(Captured with states 0..L, weight)``.
    With ``states`` given they are used as they are; otherwise every pass re-captures one
    micro-batch at a time (memory: one micro-batch's states)."""

    def __init__(
        self,
        stack: Stack,
        batches: list[Batch],
        caps: list[Captured] | None = None,
        states: list[list[torch.Tensor]] | None = None,
    ):
        self.stack, self.batches, self.caps, self.states = stack, batches, caps, states

    @classmethod
    def from_scorer(cls, scorer, key: str) -> "Activations":
        """The calibration data of a prepared scorer key (its cached dense states when it kept all)."""
        batches, caps = scorer.calibration(key)
        states = scorer.dense_states(key)
        if states is not None:
            return cls(scorer.stack, batches, caps, states)
        return cls(scorer.stack, batches)

    def __iter__(self) -> Iterator[tuple[Captured, torch.Tensor | None]]:
        for mb, batch in enumerate(self.batches):
            if self.states is not None and self.caps is not None:  # (given together)
                c = self.caps[mb]
                cap = Captured(c.block_args, c.block_kwargs, self.states[mb])
            else:
                cap = self.stack.capture(batch)
            yield cap, batch.weight

    @property
    def tokens(self) -> int:
        return sum(int(b.weight.sum()) if b.weight is not None else b.input_ids.numel() for b in self.batches)


def block_input_hook(fn):
    """A forward pre-hook replacing the hidden state (first positional or ``hidden_states``) by fn(h)."""

    def hook(module, args, kwargs):
        if args:
            return (fn(args[0]),) + tuple(args[1:]), kwargs
        kwargs = dict(kwargs)
        kwargs["hidden_states"] = fn(kwargs["hidden_states"])
        return args, kwargs

    return hook


def hook_boundary(model: PreTrainedModel, boundary: int, fn) -> torch.utils.hooks.RemovableHandle:
    """Apply fn to the state entering block ``boundary`` of ``model`` (= its block count: the final norm)."""
    stack = Stack(model)
    target = stack.blocks[boundary] if boundary < stack.n_blocks else stack.norm
    return target.register_forward_pre_hook(block_input_hook(fn), with_kwargs=True)


class Recovery:
    name: ClassVar[str] = ""
    variants: ClassVar[tuple[str, ...]] = ("default",)
    folds: ClassVar[bool] = False  # apply() changes weights (export needs no operator file)
    identity: ClassVar[bool] = False  # adds nothing: operators need no fit (the ``none`` method)

    def __init__(self, variant: str | None = None, ridge: float = 1e-6, solver: str = "ridge"):
        variant = variant or self.variants[0]
        if variant not in self.variants:
            raise GhostsearchError(
                f"recovery {self.name!r} has no variant {variant!r}; use one of: {', '.join(self.variants)}"
            )
        self.variant, self.ridge, self.solver = variant, float(ridge), solver

    @classmethod
    def unsupported(cls, stack: Stack) -> str | None:
        """Why this method cannot repair ``stack``'s blocks (None: it can), judged from the blocks'
        structure alone, so a model built on the meta device answers it (``config.check_repairs``:
        before any search or evaluation)."""
        return None

    def fit(self, stack: Stack, removed: Sequence[int], data: Activations) -> Operators:
        raise NotImplementedError

    def patches(self, stack: Stack, ops: Operators) -> contextlib.AbstractContextManager[dict]:
        raise NotImplementedError

    def apply(self, model: nn.Module, ops: Operators) -> list:
        """Repair a physically pruned model in place; returns hook handles (empty when weights change)."""
        raise NotImplementedError

    def operators(self, removed, n_blocks, mats, report) -> Operators:
        return Operators(self.name, self.variant, tuple(removed), n_blocks, mats, report)


RECOVERY: Registry[Recovery] = Registry(
    "recovery method",
    {
        "ghosted": "ghostsearch.recovery.ghosted:Ghosted",
        "linearpatch": "ghostsearch.recovery.linearpatch:LinearPatch",
        "replaceme": "ghostsearch.recovery.replaceme:ReplaceMe",
        "folded": "ghostsearch.recovery.folded:Folded",
        "none": "ghostsearch.recovery.ghosted:NoRecovery",
    },
)


def get_recovery(name: str, **params) -> Recovery:
    return RECOVERY.get(name)(**params)


def recovery_for(ops: Operators) -> Recovery:
    return get_recovery(ops.method, variant=ops.variant)
