"""The Objective protocol.

An objective turns a calibration spec into micro-batches once (``build``), may cache dense
references once (``attach``), and maps the final hidden states of a pruned model (before the
final norm) to a loss sum and a count (``loss``). ``value(sum, count)`` is what searchers
minimise. Fidelity: ``loss`` is asked for the first ``rows`` rows of a micro-batch only.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

from ghostsearch.core.errors import GhostsearchError
from ghostsearch.core.registry import Registry

if TYPE_CHECKING:  # torch only where an objective computes: a spec (what crosses Ray) imports nothing heavy
    import torch

    from ghostsearch.model.stack import Batch, Captured, Stack


@dataclass(frozen=True)
class CalibrationSpec:
    """Which calibration data an objective is built from (resolved: a concrete dataset name)."""

    dataset: str
    n_seq: int = 8
    seq_len: int = 256
    seed: int = 0
    data_dir: str | None = None
    micro_batch: int = 8

    def key(self) -> str:
        return f"{self.dataset}:{self.n_seq}x{self.seq_len}:s{self.seed}"


@dataclass(frozen=True)
class AwareSpec:
    """Recovery-aware scoring: values are those of the model AFTER this repair of every cut
    (``search.recovery_aware``). ``max_window``: the longest cut whose operator is precomputed (the config
    key ``search.aware_window``)."""

    method: str = "ghosted"
    max_window: int = 12
    ridge: float = 1e-6
    solver: str = "ridge"

    def key(self) -> str:
        return f"{self.method}:w{self.max_window}:r{self.ridge:g}:{self.solver}"


@dataclass(frozen=True)
class ObjectiveSpec:
    """Everything that determines an objective's values: built once from the config
    (``Config.objective_spec``), sent across Ray as this type, keyed by ``key()`` everywhere
    (scorer caches, broker cache, ledger)."""

    name: str
    calibration: CalibrationSpec
    params: tuple[tuple[str, Any], ...] = ()  # sorted (key, value) pairs: hashable, one order
    aware: AwareSpec | None = None

    @classmethod
    def make(
        cls, name: str, calibration: CalibrationSpec, params: dict | None = None, aware: AwareSpec | None = None
    ) -> "ObjectiveSpec":
        return cls(name, calibration, tuple(sorted((params or {}).items())), aware)

    @property
    def param_dict(self) -> dict:
        return dict(self.params)

    def key(self) -> str:
        aware = f"|aware={self.aware.key()}" if self.aware else ""
        return f"{self.name}|{self.calibration.key()}|{list(self.params)}{aware}"

    def build(self) -> "Objective":
        return OBJECTIVES.get(self.name)(self.calibration, **self.param_dict)


class Objective:
    name: ClassVar[str] = ""
    default_dataset: ClassVar[str] = ""
    datasets: ClassVar[tuple[str, ...]] = ()
    min_seq_len: ClassVar[int] = 1  # the shortest calibration.seq_len its value is defined for
    rows_stack: ClassVar[bool] = False  # row_losses may get a row twice, each with its own state: row_losses_many

    def __init__(self, spec: CalibrationSpec, **params):
        if spec.dataset not in self.datasets:
            raise GhostsearchError(
                f"objective {self.name!r} cannot use dataset {spec.dataset!r}; choose one of: "
                f"{', '.join(self.datasets)}"
            )
        self.spec = spec
        self.params = params

    def build(self, tokenizer, dtype: torch.dtype) -> list[Batch]:
        raise NotImplementedError

    def attach(self, stack: Stack, batches: list[Batch], caps: list[Captured]) -> None:
        """Cache dense references (optional)."""

    def loss(self, stack: Stack, h: torch.Tensor, batch: Batch, rows: int) -> tuple[float, float]:
        """(loss sum, count) over the first ``rows`` rows; by default the sum of ``row_losses``."""
        import torch

        sums, counts = self.row_losses(stack, h, batch, torch.arange(rows))
        return float(sums.sum()), float(counts.sum())

    def row_losses(
        self, stack: Stack, h: torch.Tensor, batch: Batch, rows: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Per-row (loss sum, count), float64 on the CPU, for the rows ``rows`` (sorted indices into
        the micro-batch) whose final states are ``h``. Racing (``race: true``) needs it; an objective
        that only defines ``loss`` scores exactly but cannot race."""
        raise GhostsearchError(
            f"objective {self.name!r} gives no per-row losses (row_losses), which racing "
            "needs; define row_losses or set race: false"
        )

    def row_losses_many(
        self, stack: Stack, hs: list[torch.Tensor], batch: Batch, rows: torch.Tensor
    ) -> list[tuple[torch.Tensor, torch.Tensor]]:
        """``row_losses`` of several candidates' final states ``hs`` on the same rows ``rows``, one
        (sums, counts) each: by default one call each. An objective whose row losses read only each
        row's own state and data (``rows_stack``) scores them in one call, their states stacked, so
        that the LM head multiplies all of their rows at once (a look has few rows per micro-batch:
        SmolLM2's head costs 65-68 ms a row at 1-2 rows against 53 at a micro-batch's 8, fp32, one
        thread)."""
        if not self.rows_stack or len(hs) == 1:
            return [self.row_losses(stack, h, batch, rows) for h in hs]
        import torch

        sums, counts = self.row_losses(stack, torch.cat(hs), batch, rows.repeat(len(hs)))
        return list(zip(sums.split(len(rows)), counts.split(len(rows))))

    def value(self, total: float, count: float) -> float:
        return total / count


# the built-in objectives; add your own with OBJECTIVES.add(name, cls) or name it as
# "package.module:Class" in the config (see objectives/README.md at the repository root)
OBJECTIVES: Registry[Objective] = Registry(
    "objective",
    {
        "perplexity": "ghostsearch.objectives.perplexity:Perplexity",
        "margin": "ghostsearch.objectives.margin:Margin",
        "kl": "ghostsearch.objectives.kl:KL",
    },
)


def split_rows(x: torch.Tensor, micro_batch: int) -> list[torch.Tensor]:
    return [x[i : i + micro_batch] for i in range(0, x.shape[0], micro_batch)]
