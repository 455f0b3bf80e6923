"""docs/config.md, generated from the config dataclasses: every key, its type, default and meaning
(the comment beside the field in config.py, with its continuation lines).

  python -m ghostsearch.cli.configdoc            # rewrite docs/config.md
  python -m ghostsearch.cli.configdoc --check    # exit 1 when docs/config.md differs from the code
"""

from __future__ import annotations

import dataclasses
import inspect
import re
import sys
import typing
from pathlib import Path

from ghostsearch import config

DOC = Path(__file__).resolve().parents[2] / "docs" / "config.md"
FIELD = re.compile(r"^    (\w+): [^=]+?(?:=.*?)?(?:#\s?(.*))?$")


def comments(cls) -> tuple[str, dict[str, str]]:
    """(the class line's comment, {field: its comment}). A field's comment is the one on its line
    (or on its expression's last line), continued by comment lines aligned under it (``#   ...``);
    comment lines of their own (``# ...``) above a field without a comment are its comment."""
    lines = inspect.getsource(cls).splitlines()
    head = lines[1].split("#", 1)[1].strip() if "#" in lines[1] else ""
    names = {f.name for f in dataclasses.fields(cls)}
    out: dict[str, str] = {}
    last: str | None = None
    preface: list[str] = []
    for line in lines[2:]:
        m = FIELD.match(line)
        text = line.strip()
        if m and m.group(1) in names:
            last = m.group(1)
            out[last] = (m.group(2) or "").strip() or " ".join(preface)
            preface = []
        elif text.startswith("#"):
            note = text[1:]
            if last and note.startswith("  ") and not preface:
                out[last] += " " + note.strip()
            else:
                preface.append(note.strip())
        elif last and "#" in line:
            out[last] = (out[last] + " " + line.split("#", 1)[1].strip()).strip()
        elif text.startswith(("def ", "@")):
            break
    return head, out


def type_name(tp) -> str:
    return re.sub(r"\b(typing|ghostsearch\.config)\.", "", str(tp).replace("<class '", "").replace("'>", "")).replace(
        "NoneType", "None"
    )


def default(f: dataclasses.Field) -> str:
    value = f.default_factory() if f.default_factory is not dataclasses.MISSING else f.default
    return "`" + (yaml_value(value)) + "`"


def yaml_value(value) -> str:
    import yaml

    return yaml.safe_dump(value, default_flow_style=True, width=10_000).strip().removesuffix("\n...").strip()


def section(cls, prefix: str) -> tuple[list[str], list[tuple[type, str]]]:
    head, notes = comments(cls)
    hints = typing.get_type_hints(cls)
    rows, nested = [], []
    for f in dataclasses.fields(cls):
        if dataclasses.is_dataclass(hints[f.name]):
            nested.append((hints[f.name], f"{prefix}{f.name}."))
            continue
        meaning = notes.get(f.name, "").replace("|", "\\|")
        tp = type_name(hints[f.name]).replace("|", "\\|")
        rows.append(f"| `{prefix}{f.name}` | `{tp}` | {default(f)} | {meaning} |")
    title = prefix.rstrip(".") or "top level"
    out = (
        [f"## {title}", ""]
        + ([head, ""] if head else [])
        + ["| key | type | default | meaning |", "|---|---|---|---|"]
        + rows
        + [""]
    )
    return out, nested


def render() -> str:
    lines = [
        "# Configuration keys",
        "",
        "Generated from the dataclasses in `ghostsearch/config.py` by `python -m ghostsearch.cli.configdoc`;",
        "`tests/config/test_configdoc.py` fails when this file and the code differ. Set keys in a YAML",
        "file or as `key=value` overrides (`calibration.n_seq=16`); an unknown key or a wrong type is",
        "a one-line error before any model loads.",
        "",
    ]
    todo: list[tuple[type, str]] = [(config.Config, "")]
    while todo:
        cls, prefix = todo.pop(0)
        text, nested = section(cls, prefix)
        lines += text
        todo += nested
    return "\n".join(lines).rstrip() + "\n"


def undocumented() -> list[str]:
    """Keys whose field has no comment in config.py."""
    out, todo = [], [(config.Config, "")]
    while todo:
        cls, prefix = todo.pop(0)
        notes, hints = comments(cls)[1], typing.get_type_hints(cls)
        for f in dataclasses.fields(cls):
            if dataclasses.is_dataclass(hints[f.name]):
                todo.append((hints[f.name], f"{prefix}{f.name}."))
            elif not notes.get(f.name):
                out.append(prefix + f.name)
    return out


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    text = render()
    if "--check" in argv:
        if not DOC.exists() or DOC.read_text() != text:
            print(
                f"{DOC} differs from ghostsearch/config.py; run: python -m ghostsearch.cli.configdoc", file=sys.stderr
            )
            return 1
        return 0
    DOC.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
