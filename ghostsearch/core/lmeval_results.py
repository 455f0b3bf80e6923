"""lm-eval's own results file for every evaluated model: what ``lm_eval --output_path DIR`` writes
(``DIR/<model name, sanitized>/results_<date>.json``: ``results`` with ``acc,none`` and
``acc_stderr,none``, ``versions``, ``n-shot``, ``configs``, ``n-samples``, ``higher_is_better``,
``config``, ``model_name``, ...), so lm-eval tooling and leaderboards read ghostsearch's numbers.

``evaluate.zero_shot(..., raw=d)`` fills ``d`` with lm-eval's ``simple_evaluate`` output; ``write``
adds the fields lm-eval's ``EvaluationTracker`` adds and names the file as lm-eval does. The native
engine gives the same document (``evaluate.lm_eval_document``), so the file is the same whichever
engine scored the tasks.
"""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path

from ghostsearch.core.io import write_text_atomic


def model_name(base: str, removed, method: str) -> str:
    """The name a pruned (and repaired) model is reported under, e.g. smollm2-135m-drop-3.7.12-ghosted."""
    drop = ".".join(map(str, sorted(removed))) if removed else "none"
    return f"{base}-drop-{drop}" + ("" if method in (None, "none") else f"-{method}")


def write(out_dir: str | Path, raw: dict | None, name: str) -> Path | None:
    """Write ``raw`` (simple_evaluate's output) as lm-eval would under ``out_dir``; None when the
    model had no zero-shot tasks."""
    if not raw or not raw.get("results"):
        return None
    from lm_eval.utils import handle_non_serializable, sanitize_model_name

    doc = {k: v for k, v in raw.items() if k != "samples"}
    doc.update(model_name=name, model_name_sanitized=sanitize_model_name(name), task_hashes={})
    path = Path(out_dir) / doc["model_name_sanitized"]
    path.mkdir(parents=True, exist_ok=True)
    dest = path / f"results_{datetime.now().isoformat().replace(':', '-')}.json"
    write_text_atomic(dest, json.dumps(doc, indent=2, default=handle_non_serializable, ensure_ascii=False))
    return dest
