"""Where one actor's model lives: one device, or its decoder blocks split over several.

The one place that decides devices. A ``Placement`` names a device label per decoder block (a
contiguous split), the embeddings on the first device and the final norm and LM head on the last.
``apply`` moves the modules there and puts a forward pre-hook on every block (and on the norm and
head) that moves whatever reaches it (hidden states, masks, rotary tables, cached states) to that
module's device, so the model's own forward (``Stack.capture``) crosses devices exactly as
``Stack.run`` does. Values do not depend on the split: a block computes the same thing wherever
its inputs came from.

Labels: a map may name devices by label (``a``, ``b``) with ``real`` mapping each label to a torch
device; tests name ``cpu`` twice, or labels over one CPU, and record which label each tensor was
moved to (``move`` is the one method that moves a tensor).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Sequence, cast

import torch
from torch import nn

from ghostsearch.core.errors import GhostsearchError

if TYPE_CHECKING:
    from transformers import PreTrainedModel

ATTR = "ghostsearch_placement"  # the attribute of a placed model that holds its Placement


def split_blocks(n_blocks: int, n_devices: int, sizes: tuple[float, float, float] | None = None) -> list[int]:
    """The device index of each block: contiguous, balanced. ``sizes`` = (embeddings, one block,
    head) in any unit (parameters): the first device also holds the embeddings and the last the
    head, so they get fewer blocks; None: equal block counts (first devices take the remainder)."""
    if n_devices < 1:
        raise GhostsearchError("a device map needs at least one device")
    if n_devices > n_blocks:
        raise GhostsearchError(
            f"cannot split {n_blocks} blocks over {n_devices} devices; use at most "
            f"{n_blocks} devices per actor (pool.gpus_per_actor)"
        )
    if sizes is None:
        per, extra = divmod(n_blocks, n_devices)
        out = []
        for d in range(n_devices):
            out += [d] * (per + (1 if d < extra else 0))
        return out
    embed, block, head = sizes
    total = embed + block * n_blocks + head
    target = total / n_devices
    out, load, d = [], embed, 0
    for i in range(n_blocks):
        left_blocks, left_devices = n_blocks - i, n_devices - d
        # move on when this device is full, but never leave a later device without a block
        if d < n_devices - 1 and (
            left_blocks <= left_devices - 1 or (load + block / 2 > target and any(x == d for x in out))
        ):
            d, load = d + 1, 0.0
        out.append(d)
        load += block
    return out


@dataclass
class Placement:
    """Device labels of the blocks (in order); embeddings on ``blocks[0]``'s device, norm and head
    on ``blocks[-1]``'s. ``real``: label -> torch device (None: labels are torch devices)."""

    blocks: tuple[str, ...]
    real: dict = field(default_factory=dict)

    @classmethod
    def split(cls, n_blocks: int, devices: Sequence[str], sizes=None, real: dict | None = None) -> "Placement":
        idx = split_blocks(n_blocks, len(devices), sizes)
        return cls(tuple(str(devices[i]) for i in idx), dict(real or {}))

    @property
    def first(self) -> str:
        return self.blocks[0]

    @property
    def last(self) -> str:
        return self.blocks[-1]

    @property
    def labels(self) -> list[str]:
        return list(dict.fromkeys(self.blocks))

    def boundary(self, b: int) -> str:
        """The label of the state entering block b (b = L: the final state, on the head's device)."""
        return self.blocks[b] if b < len(self.blocks) else self.last

    def device(self, label: str) -> torch.device:
        return torch.device(self.real.get(label, label))

    def move(self, x: torch.Tensor, label: str) -> torch.Tensor:
        """The one place a tensor changes device (tests override it to record labels)."""
        return x.to(self.device(label), non_blocking=True)

    def to(self, x: Any, label: str) -> Any:
        """Every tensor in x (nested tuples, lists, dicts) moved to ``label``'s device."""
        if isinstance(x, torch.Tensor):
            return self.move(x, label)
        if isinstance(x, tuple):
            return tuple(self.to(v, label) for v in x)
        if isinstance(x, list):
            return [self.to(v, label) for v in x]
        if isinstance(x, dict):
            return {k: self.to(v, label) for k, v in x.items()}
        return x

    def _hook(self, label: str):
        def hook(module, args, kwargs):
            return self.to(args, label), self.to(kwargs, label)

        return hook

    def apply(self, model: PreTrainedModel, blocks: nn.ModuleList, norm: nn.Module, head: nn.Module) -> None:
        """Move the model's modules to their devices and install the moving pre-hooks. The
        embeddings and everything else outside the blocks, norm and head go to the first device;
        an LM head tied to the embeddings is untied (a copy on the last device) when the two
        devices differ."""
        if len(self.blocks) != len(blocks):
            raise GhostsearchError(f"device map names {len(self.blocks)} blocks but the model has {len(blocks)}")
        if getattr(model, ATTR, None) is not None:
            raise GhostsearchError("this model is already placed; load it again to place it differently")
        embed = model.get_input_embeddings()
        tied = embed is not None and getattr(head, "weight", None) is getattr(embed, "weight", None)
        for i, blk in enumerate(blocks):
            blk.to(self.device(self.blocks[i]))
            blk.register_forward_pre_hook(self._hook(self.blocks[i]), with_kwargs=True)
        last, first = self.device(self.last), self.device(self.first)
        norm.to(last)
        norm.register_forward_pre_hook(self._hook(self.last), with_kwargs=True)
        if tied and last != first:
            head.weight = nn.Parameter(cast(torch.Tensor, head.weight).detach().to(last).clone(), requires_grad=False)
        head.to(last)
        head.register_forward_pre_hook(self._hook(self.last), with_kwargs=True)
        placed = {id(m) for m in [*blocks, norm, head]}

        def rest(module: nn.Module) -> None:
            if id(module) in placed:
                return
            module._apply(lambda t: t.to(first), recurse=False)  # torch's own per-module move
            for child in module.children():
                rest(child)

        rest(model)
        setattr(model, ATTR, self)


def devices_for(device: str, gpus_per_actor: float | None, device_map: list[str] | None) -> list[str] | None:
    """The devices one actor splits its model over, or None (one device). ``device_map`` wins;
    else ``pool.gpus_per_actor`` = N > 1 gives cuda:0..N-1 (Ray shows an actor only its own GPUs)."""
    if device_map:
        return [str(d) for d in device_map]
    if gpus_per_actor and gpus_per_actor > 1:
        if gpus_per_actor != int(gpus_per_actor):
            raise GhostsearchError(
                f"pool.gpus_per_actor={gpus_per_actor:g}: a model is split over whole GPUs; "
                f"use an integer (e.g. {int(gpus_per_actor) + 1}) or a fraction below 1"
            )
        return [f"cuda:{i}" for i in range(int(gpus_per_actor))]
    return None


def place(
    model: PreTrainedModel,
    blocks: nn.ModuleList,
    norm: nn.Module,
    head: nn.Module,
    devices: Sequence[str],
    real: dict | None = None,
) -> Placement:
    """Split ``model`` over ``devices`` balanced by parameters (embeddings first, head last)."""

    def count(m):
        return sum(p.numel() for p in m.parameters()) if m is not None else 0

    emb = model.get_input_embeddings()
    sizes = (count(emb), count(blocks[0]), count(head) + count(norm))
    p = Placement.split(len(blocks), devices, sizes, real)
    p.apply(model, blocks, norm, head)
    return p
