"""docs/api.md's example runs as written (the Python API: score, a custom searcher, search, repair,
export, load_pruned), with ``model`` pointed at a tiny random model and ``out`` at a temp dir."""

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.slow


def example() -> str:
    (code,) = re.findall(r"```python\n(.*?)```", (ROOT / "docs" / "api.md").read_text(), re.S)
    return code


def test_api_example_runs(tiny_model_dir, tmp_path, ray_local, capsys):
    code = example()
    code, n = re.subn(r'(?m)^model = ".*"$', f"model = {tiny_model_dir!r}", code)
    code, m = re.subn(r'(?m)^out = ".*"$', f"out = {str(tmp_path / 'run')!r}", code)
    assert n == m == 1
    from ghostsearch.search import SEARCHERS

    scope: dict = {"__name__": "api_example"}
    try:
        exec(compile(code, "docs/api.md", "exec"), scope)  # noqa: S102  (the doc's own example)
    finally:
        SEARCHERS.remove("contiguous")  # registered by the example; other tests see the built-ins only
    out = capsys.readouterr().out
    assert "best contiguous cut:" in out and "exported:" in out
    result, pruned = scope["result"], scope["pruned"]
    removed = result["removed"]
    assert len(removed) == 2 and removed[1] == removed[0] + 1  # the custom searcher's kind of answer
    assert result["evaluations"] == 6 - 2 + 1  # every window of 2 in 6 blocks, once
    assert pruned.config.num_hidden_layers == 4
    assert (tmp_path / "run" / "result.json").exists()
