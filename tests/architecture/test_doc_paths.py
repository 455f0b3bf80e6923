"""Every path of this repository that a document names exists (a moved module, test or script
leaves its old path in prose, where nothing else would notice). Checked: docs/*.md and README.md;
a path is a word that begins with one of the repository's top folders (``bench/``,
``ghostsearch/``, ``tests/``, ...); one followed by a placeholder (``<k>``, ``{a,b}``, ``*``) is a
pattern, not a path. ``WRITTEN`` lists the paths a documented command writes, with who writes them."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TOPS = ("bench", "ghostsearch", "tests", "scripts", "docs", "configs", "objectives", ".ci")
PATH = re.compile(r"(?<![\w./-])((?:" + "|".join(re.escape(t) for t in TOPS) + r")/[\w./-]+)")
# a path a documented command writes -> who writes it
WRITTEN = {
    ".ci/last/junit.xml": ".ci/run's test report",
    "docs/results/study-cpu/ghosted": "bench/ghosted_study.py --out (docs/results.md's reproduction)",
}


def named_paths(text: str) -> list[tuple[int, str]]:
    """(line, path) of each repository path ``text`` names (the module docstring's rule)."""
    out = []
    for n, line in enumerate(text.splitlines(), 1):
        for m in PATH.finditer(line):
            path = m.group(1).rstrip(".-/")
            rest = line[m.start(1) + len(path) :]
            if rest[:1] in ("<", "{", "*", "[") or rest[:2] in ("-<", "-{", "-*", "/<", "/{", "/*"):
                continue
            out.append((n, path))
    return out


def test_every_path_a_document_names_exists():
    docs = sorted((ROOT / "docs").glob("*.md")) + [ROOT / "README.md"]
    missing = [
        f"{doc.relative_to(ROOT)}:{n}: {path}"
        for doc in docs
        for n, path in named_paths(doc.read_text())
        if path not in WRITTEN and not (ROOT / path).exists() and not (ROOT / "ghostsearch" / path).exists()
    ]
    assert missing == [], "a document names a path that is not in the repository"


def test_the_check_finds_a_missing_path_and_skips_patterns():
    text = "see tests/search/test_gone.py and bench/search.py.\nrows in docs/results/bench-race-<k>/step<k>.parquet"
    assert named_paths(text) == [(1, "tests/search/test_gone.py"), (1, "bench/search.py")]
    assert [p for _, p in named_paths(text) if not (ROOT / p).exists()] == ["tests/search/test_gone.py"]
