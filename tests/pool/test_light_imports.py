"""What crosses Ray and what a pool's broker runs imports no model library (issue 49): every Ray
worker that unpickles an ``ObjectiveSpec``, a ``Config`` or a ``Served`` answer imports their modules,
and with torch at module level each of them held ~250 MiB (32 stand-in scorers did not fit in memory,
bench/scale.py). Checked from the source with ``ast`` (no import): the modules these import at module
level, transitively, outside ``if TYPE_CHECKING:`` blocks and function bodies."""

from __future__ import annotations

import ast
from pathlib import Path

PKG = Path(__file__).resolve().parents[2] / "ghostsearch"
HEAVY = ("torch", "transformers", "lm_eval", "safetensors")
LIGHT = ["ghostsearch.pool.actors", "ghostsearch.objectives", "ghostsearch.objectives.scores", "ghostsearch.config"]


def path_of(module: str) -> Path | None:
    rel = Path(*module.split(".")[1:])
    for p in (PKG / rel / "__init__.py", (PKG / rel).with_suffix(".py")):
        if p.is_file():
            return p
    return None


def top_level_imports(module: str) -> set[str]:
    """Modules imported by ``module``'s statements at module level (``if TYPE_CHECKING:`` left out)."""
    path = path_of(module)
    assert path is not None, module
    pkg = module if path.name == "__init__.py" else module.rsplit(".", 1)[0]
    out: set[str] = set()

    def visit(body: list[ast.stmt]) -> None:
        for node in body:
            if isinstance(node, ast.Import):
                out.update(a.name for a in node.names)
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    parts = pkg.split(".")[: len(pkg.split(".")) - node.level + 1]
                    base = ".".join(parts + ([base] if base else []))
                out.add(base)
                out.update(f"{base}.{a.name}" for a in node.names if path_of(f"{base}.{a.name}") is not None)
            elif isinstance(node, ast.If):
                if not (isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING"):
                    visit(node.body)
                visit(node.orelse)
            elif isinstance(node, ast.Try):
                visit(node.body)
                for h in node.handlers:
                    visit(h.body)
                visit(node.orelse)
                visit(node.finalbody)

    visit(ast.parse(path.read_text()).body)
    return out


def reached(start: str) -> set[str]:
    """Every module imported at module level when ``start`` is imported (its packages' __init__ too)."""
    seen: set[str] = set()
    todo = [start]
    while todo:
        m = todo.pop()
        parts = m.split(".")
        for i in range(1, len(parts) + 1):  # importing a.b.c runs a, a.b, a.b.c
            name = ".".join(parts[:i])
            if name in seen:
                continue
            seen.add(name)
            if name.startswith("ghostsearch") and path_of(name) is not None:
                todo += sorted(top_level_imports(name))
    return seen


def test_what_crosses_ray_imports_no_model_library():
    heavy = {m: sorted(x for x in reached(m) if x.split(".")[0] in HEAVY) for m in LIGHT}
    assert heavy == {m: [] for m in LIGHT}


def test_the_check_follows_imports_to_torch():
    """The walk reaches torch from a module that imports it at module level through another."""
    assert "torch" in reached("ghostsearch.scoring")
    assert "torch" in reached("ghostsearch.evaluation.native")
