"""One registry helper for every pluggable concept (searchers, objectives, recovery methods).

A ``Registry`` maps a name to a class. Built-ins are listed explicitly as ``"module:Class"``
strings and imported only when first asked for, so a registry never imports its plug-ins at
import time and plug-in modules never import the registry's package (no import cycles, no
self-registration). Users add their own with ``REG.add(name, cls)`` or by naming a class
directly as ``"package.module:Class"`` (e.g. ``objective: objectives.entropy:Entropy``).
"""

from __future__ import annotations

import importlib
from typing import Generic, TypeVar

from ghostsearch.core.errors import GhostsearchError

T = TypeVar("T")


class Registry(Generic[T]):
    """``base``: the class every registered class must subclass (checked on ``add`` and on the first
    ``get`` of a built-in or of a ``"package.module:Class"`` name), so a plug-in that does not
    subclass it is refused with one line, not found missing a method mid-run."""

    def __init__(self, kind: str, builtins: dict[str, str], base: type | None = None):
        self.kind = kind
        self.base = base
        self._paths = dict(builtins)  # name -> "module:attr" (imported on first use)
        self._loaded: dict[str, type[T]] = {}

    def check(self, name: str, cls: object) -> None:
        """Refuse what is not a subclass of ``base`` (one line naming both)."""
        if self.base is not None and not (isinstance(cls, type) and issubclass(cls, self.base)):
            what = cls.__name__ if isinstance(cls, type) else repr(cls)
            raise GhostsearchError(
                f"{self.kind} {name!r}: {what} is not a subclass of {self.base.__module__}.{self.base.__name__}; "
                f"derive it from {self.base.__name__}"
            )

    def add(self, name: str, cls: type[T]) -> type[T]:
        """Register a class under ``name`` (a user's plug-in); returns the class (usable as a decorator body)."""
        self.check(name, cls)
        self._loaded[name] = cls
        return cls

    def remove(self, name: str) -> None:
        """Forget a class added with ``add`` (built-ins stay)."""
        self._loaded.pop(name, None)

    def names(self) -> list[str]:
        return sorted(set(self._paths) | set(self._loaded))

    def __contains__(self, name: str) -> bool:
        return name in self._paths or name in self._loaded

    def get(self, name: str) -> type[T]:
        if name in self._loaded:
            return self._loaded[name]
        path = self._paths.get(name)
        if path is None and isinstance(name, str) and ":" in name:
            path = name  # "package.module:Class": a user's plug-in named directly
        if path is None:
            raise GhostsearchError(f"unknown {self.kind} {name!r}; choose one of: {', '.join(self.names())}")
        module, _, attr = path.partition(":")
        try:
            cls = getattr(importlib.import_module(module), attr)
        except (ImportError, AttributeError) as e:
            raise GhostsearchError(f"{self.kind} {name!r}: cannot import {path} ({e}); check the module path") from None
        self.check(name, cls)
        self._loaded[name] = cls
        return cls

    def items(self) -> list[tuple[str, type[T]]]:
        return [(n, self.get(n)) for n in self.names()]
