"""What every record (a frozen dataclass written to and read from a run's files) shares: which of
its fields a mapping read back must give."""

from __future__ import annotations

from dataclasses import MISSING, fields


def required_fields(cls) -> tuple[str, ...]:
    """The fields of dataclass ``cls`` without a default or a default factory, in field order:
    what a row or file read back must hold to become one."""
    return tuple(f.name for f in fields(cls) if f.default is MISSING and f.default_factory is MISSING)
