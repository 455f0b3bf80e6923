"""The package's shape, checked from its source with ``ast`` (no import, no new dependency):
no import cycle among ghostsearch's modules (lazy imports inside functions included), no module
importing another's private (``_x``) names, and nothing below the CLI importing it."""
from __future__ import annotations

import ast
from pathlib import Path

PKG = Path(__file__).resolve().parents[2] / "ghostsearch"


def modules() -> dict[str, Path]:
    out = {}
    for p in PKG.rglob("*.py"):
        parts = list(p.relative_to(PKG.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = p
    return out


def imports(name: str, path: Path, known: dict) -> list[tuple[str, list[str]]]:
    """(imported module, names taken from it) for every import statement in the file."""
    tree = ast.parse(path.read_text())
    pkg = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [(a.name, []) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(pkg.split(".")[: len(pkg.split(".")) - node.level + 1] + ([base] if base else []))
            for a in node.names:
                sub = f"{base}.{a.name}"
                out.append((sub, []) if sub in known else (base, [a.name]))
    return [(m, n) for m, n in out if m.split(".")[0] == "ghostsearch"]


def graph() -> dict[str, set[str]]:
    known = modules()
    return {m: {i for i, _ in imports(m, p, known) if i in known and i != m} for m, p in known.items()}


def cycles(g: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index, low, stack, on, out, counter = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in g[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(g):
        if v not in index:
            visit(v)
    return out


def test_no_import_cycle():
    assert cycles(graph()) == []


def test_the_cycle_finder_finds_cycles():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_no_private_names_across_modules():
    known = modules()
    bad = [f"{m} imports {n} from {i}" for m, p in known.items() for i, names in imports(m, p, known)
           for n in names if n.startswith("_") and i != m]
    assert bad == []


def test_nothing_below_the_cli_imports_it():
    g = graph()
    bad = [f"{m} -> {i}" for m, deps in g.items() if not m.startswith("ghostsearch.cli") and m != "ghostsearch.__main__"
           for i in deps if i.startswith("ghostsearch.cli")]
    assert bad == []


def test_scoring_does_not_import_recovery():
    assert not {i for i in graph()["ghostsearch.scoring"] if i.startswith("ghostsearch.recovery")}
