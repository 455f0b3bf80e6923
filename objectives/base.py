"""The Objective protocol.

An objective turns a calibration spec into micro-batches once (``build``), may cache dense
references once (``attach``), and maps the final hidden states of a pruned model (before the
final norm) to a loss sum and a count (``loss``). ``value(sum, count)`` is what searchers
minimise. Fidelity: ``loss`` is asked for the first ``rows`` rows of a micro-batch only.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import torch

from ghostsearch.errors import GhostsearchError
from ghostsearch.stack import Batch, Captured, Stack


@dataclass(frozen=True)
class CalibrationSpec:
    dataset: str
    n_seq: int = 8
    seq_len: int = 256
    seed: int = 0
    data_dir: str | None = None
    micro_batch: int = 8

    def key(self) -> str:
        return f"{self.dataset}:{self.n_seq}x{self.seq_len}:s{self.seed}"


class Objective:
    name: ClassVar[str] = ""
    default_dataset: ClassVar[str] = ""
    datasets: ClassVar[tuple[str, ...]] = ()

    def __init__(self, spec: CalibrationSpec, **params):
        if spec.dataset not in self.datasets:
            raise GhostsearchError(
                f"objective {self.name!r} cannot use dataset {spec.dataset!r}; choose one of: {', '.join(self.datasets)}"
            )
        self.spec = spec
        self.params = params

    def build(self, tokenizer, dtype: torch.dtype = torch.float32) -> list[Batch]:
        raise NotImplementedError

    def attach(self, stack: Stack, batches: list[Batch], caps: list[Captured]) -> None:
        """Cache dense references (optional)."""

    def loss(self, stack: Stack, h: torch.Tensor, batch: Batch, rows: int) -> tuple[float, float]:
        raise NotImplementedError

    def value(self, total: float, count: float) -> float:
        return total / count


REGISTRY: dict[str, type[Objective]] = {}


def register(cls):
    REGISTRY[cls.name] = cls
    return cls


def get_objective(name: str) -> type[Objective]:
    if name not in REGISTRY:
        raise GhostsearchError(f"unknown objective {name!r}; choose one of: {', '.join(sorted(REGISTRY))}")
    return REGISTRY[name]


def split_rows(x: torch.Tensor, micro_batch: int) -> list[torch.Tensor]:
    return [x[i:i + micro_batch] for i in range(0, x.shape[0], micro_batch)]
