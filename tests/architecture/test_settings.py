"""Each layer gets its own settings (issue 50): a function below config.py receives the section or a
small typed protocol it reads, never the whole Config. Checked from the source with ``ast``: below
config in the layer order, a parameter named ``cfg`` must be annotated with a ``Protocol`` class of
the package (mypy then holds the function to the members it declares, and config.py checks that a
Config is each of them). docs/architecture.md states how many functions still take the whole
Config; the count may only fall, and the doc follows it."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from tests.architecture.test_imports import LAYERS, PKG, layer_of, modules

DOC = PKG.parent / "docs" / "architecture.md"
COUNT = re.compile(r"Functions below it that take the whole Config: (\d+)")


def protocols(trees: dict[str, ast.Module]) -> set[str]:
    """Names of the package's classes that derive from ``Protocol`` (directly or through one)."""
    classes = {n.name: n for t in trees.values() for n in ast.walk(t) if isinstance(n, ast.ClassDef)}
    out: set[str] = set()
    changed = True
    while changed:
        changed = False
        for name, c in classes.items():
            bases = {ast.unparse(b).split(".")[-1] for b in c.bases}
            if name not in out and ("Protocol" in bases or bases & out):
                out.add(name)
                changed = True
    return out


def whole_config(paths: dict[str, Path], root: Path = PKG.parent) -> list[str]:
    """``path:line function`` for each function below config with a ``cfg`` parameter that is not a
    protocol of the package (unannotated, or annotated with anything else)."""
    below = LAYERS.index("config")
    trees = {m: ast.parse(p.read_text()) for m, p in paths.items()}
    typed = protocols(trees)
    out = []
    for m, tree in sorted(trees.items()):
        level = layer_of(m)
        if level is None or level >= below:
            continue
        for node in ast.walk(tree):
            if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            a = node.args
            for arg in a.posonlyargs + a.args + a.kwonlyargs:
                note = ast.unparse(arg.annotation).strip("'\"") if arg.annotation is not None else None
                if (arg.arg == "cfg" and note not in typed) or (note is not None and note.split(".")[-1] == "Config"):
                    out.append(f"{paths[m].relative_to(root)}:{node.lineno} {node.name}")
    return out


def test_functions_below_config_take_no_more_of_the_config_than_the_doc_says():
    found = whole_config(modules())
    said = COUNT.search(DOC.read_text())
    assert said, "docs/architecture.md must say 'Functions below it that take the whole Config: N'"
    assert len(found) <= int(said.group(1)), (
        "a function below config.py takes the whole Config (give it the section or a Protocol it reads): "
        + ", ".join(found)
    )
    assert len(found) == int(said.group(1)), f"fewer than the doc says ({len(found)}): lower the count there"


def test_the_scan_sees_an_untyped_cfg_and_accepts_a_protocol(tmp_path):
    pkg = tmp_path / "ghostsearch"
    (pkg / "model").mkdir(parents=True)
    (pkg / "model" / "a.py").write_text(
        "from typing import Protocol\n\nclass Sizes(Protocol):\n    n: int\n\n"
        "class More(Sizes, Protocol):\n    m: int\n\n"
        "def ok(cfg: Sizes): ...\n\ndef ok2(cfg: 'More'): ...\n\ndef hf(config): ...\n\n"
        "def bad(cfg): ...\n\ndef bad2(x, cfg: dict): ...\n\ndef bad3(c: Config): ...\n"
    )
    (pkg / "study").mkdir()
    (pkg / "study" / "b.py").write_text("def above(cfg): ...\n")
    paths = {"ghostsearch.model.a": pkg / "model" / "a.py", "ghostsearch.study.b": pkg / "study" / "b.py"}
    assert [f.split(" ")[1] for f in whole_config(paths, tmp_path)] == ["bad", "bad2", "bad3"]
