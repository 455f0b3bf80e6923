"""docs/config.md is generated from the config dataclasses and kept in sync: this fails when a key
is added, removed, retyped, re-defaulted or re-described in ghostsearch/config.py without
`python -m ghostsearch.cli.configdoc`, and when a key has no meaning written beside it."""

import dataclasses

from ghostsearch import config
from ghostsearch.cli import configdoc


def test_doc_matches_code():
    assert configdoc.main(["--check"]) == 0, "docs/config.md is stale: run python -m ghostsearch.cli.configdoc"


def test_every_key_documented_with_a_meaning():
    assert configdoc.undocumented() == []


def test_every_key_in_the_doc():
    text = configdoc.DOC.read_text()
    todo, keys = [(config.Config, "")], []
    while todo:
        cls, prefix = todo.pop()
        for f in dataclasses.fields(cls):
            tp = cls.__dataclass_fields__[f.name].type
            sub = getattr(config, tp, None) if isinstance(tp, str) else tp
            if dataclasses.is_dataclass(sub):
                todo.append((sub, f"{prefix}{f.name}."))
            else:
                keys.append(prefix + f.name)
    assert len(keys) > 40 and [k for k in keys if f"| `{k}` |" not in text] == []


def test_check_catches_a_changed_default(monkeypatch):
    monkeypatch.setattr(config.Pool.__dataclass_fields__["threads"], "default", 3)
    assert configdoc.main(["--check"]) == 1
