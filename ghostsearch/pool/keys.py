"""The key of the broker's shared result cache: one frozen record for a value and for a race block.

A value is keyed by what determines it: the pool's model and dtype, the objective (its
``ObjectiveSpec.key()``), the removed set and the fidelity. A race block (per-row loss sums of some
calibration rows, search/racing.py) is keyed by the same and its rows, in order. The broker's
cache maps ``CacheKey`` to results directly; ``to_str`` is the one written form (logs, metrics) and
``parse`` reads it back.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable

from ghostsearch.objectives import ObjectiveSpec

SEP = "|"


def canonical_fidelity(fidelity: float) -> float:
    """A fidelity as keys compare it: rounded to 6 significant digits (what ``to_str`` writes), so
    that a key read back from its string is the key it was written from."""
    return float(f"{float(fidelity):.6g}")


@dataclass(frozen=True)
class CacheKey:
    """model, dtype: the pool's config (``cfg.model``, ``cfg.dtype``); objective: ``ObjectiveSpec.key()``;
    removed: the removed set (stored sorted, unique); fidelity: stored rounded as ``canonical_fidelity``;
    rows: a race block's calibration rows in the order asked (None: a value, not a block)."""

    model: str
    dtype: str
    objective: str
    removed: tuple[int, ...]
    fidelity: float
    rows: tuple[int, ...] | None = None
    # the fields' hash, computed once: the broker hashes a key ~5 times an evaluation (cache, in-flight)
    hashed: int = field(default=0, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "removed", tuple(sorted({int(i) for i in self.removed})))
        object.__setattr__(self, "fidelity", canonical_fidelity(self.fidelity))
        if self.rows is not None:
            object.__setattr__(self, "rows", tuple(int(r) for r in self.rows))
        fields = (self.model, self.dtype, self.objective, self.removed, self.fidelity, self.rows)
        object.__setattr__(self, "hashed", hash(fields))

    def __hash__(self) -> int:
        return self.hashed

    def __reduce__(self):  # rebuilt from its fields: a str's hash differs between processes
        return CacheKey, (self.model, self.dtype, self.objective, self.removed, self.fidelity, self.rows)

    @classmethod
    def of(
        cls,
        model: str,
        dtype: str,
        spec: ObjectiveSpec,
        removed: Iterable[int],
        fidelity: float,
        rows: Iterable[int] | None = None,
    ) -> CacheKey:
        return cls(model, dtype, spec.key(), tuple(removed), fidelity, None if rows is None else tuple(rows))

    @property
    def is_block(self) -> bool:
        return self.rows is not None

    def to_str(self) -> str:
        """``model|dtype|objective|f=fidelity|removed[|rows=r,r,...]`` (the objective key may hold ``|``)."""
        s = SEP.join(
            [self.model, self.dtype, self.objective, f"f={self.fidelity:.6g}", ",".join(map(str, self.removed))]
        )
        return s if self.rows is None else f"{s}{SEP}rows={','.join(map(str, self.rows))}"

    @classmethod
    def parse(cls, text: str) -> CacheKey:
        """The key ``to_str`` wrote (given a model and dtype without ``|``); ValueError on a string
        that is not a key."""
        parts = text.split(SEP)
        rows = None
        if parts and parts[-1].startswith("rows="):
            rows = _ints(parts.pop()[len("rows=") :], text)
        if len(parts) < 5 or not parts[-2].startswith("f="):
            raise ValueError(f"not a cache key: {text!r}")
        try:
            fidelity = float(parts[-2][2:])
        except ValueError:
            raise ValueError(f"not a cache key (fidelity): {text!r}") from None
        return cls(parts[0], parts[1], SEP.join(parts[2:-2]), _ints(parts[-1], text), fidelity, rows)


def _ints(text: str, whole: str) -> tuple[int, ...]:
    try:
        return tuple(int(i) for i in text.split(",")) if text else ()
    except ValueError:
        raise ValueError(f"not a cache key (a list of integers): {whole!r}") from None
