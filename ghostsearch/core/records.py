"""What every record (a frozen dataclass written to and read from a run's files) shares: which of
its fields a mapping read back must give."""

from __future__ import annotations

from dataclasses import MISSING, asdict, fields
from typing import Any, cast


def required_fields(cls) -> tuple[str, ...]:
    """The fields of dataclass ``cls`` without a default or a default factory, in field order:
    what a row or file read back must hold to become one."""
    return tuple(f.name for f in fields(cls) if f.default is MISSING and f.default_factory is MISSING)


class Record:
    """A record whose JSON form is its fields, in field order (``dataclasses.asdict``): mixed into a
    frozen dataclass, it gives ``to_dict``."""

    def to_dict(self) -> dict[str, Any]:
        return asdict(cast(Any, self))
