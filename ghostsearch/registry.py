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

from ghostsearch.errors import GhostsearchError

T = TypeVar("T")


class Registry(Generic[T]):
    def __init__(self, kind: str, builtins: dict[str, str]):
        self.kind = kind
        self._paths = dict(builtins)  # name -> "module:attr" (imported on first use)
        self._loaded: dict[str, type[T]] = {}

    def add(self, name: str, cls: type[T]) -> type[T]:
        """Register a class under ``name`` (a user's plug-in); returns the class (usable as a decorator body)."""
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
        self._loaded[name] = cls
        return cls

    def items(self) -> list[tuple[str, type[T]]]:
        return [(n, self.get(n)) for n in self.names()]
