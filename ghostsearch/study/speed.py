"""The work of ``ghostsearch speed`` (cli/speed.py parses its arguments and prints), in named steps:
what TARGET is and what it gives (:func:`source`), every refusal before a model loads
(:func:`check`), then :func:`measure`: the model loaded, the dense model and every pruned (and
repaired) one timed together (``evaluation.speed.measure_speed``), the record written."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from ghostsearch.config import Config
from ghostsearch.core.errors import GhostsearchError
from ghostsearch.evaluation.speed import SpeedReport

Removed = tuple[int, ...]


def source(target: Path, overrides: list[str], given: list[Removed] | None, recovery: list[str] | None):
    """What TARGET gives: (config, removed sets, [(removed, method)] repairs, export directory or
    None, default record file). A run directory: its cells' sets (or ``given``, --remove) and every
    repair ``recover`` fitted there, beside ``recovery``'s; an exported model: timed as it loads;
    a config file: the ``given`` sets, each with ``recovery``'s repairs."""
    from ghostsearch.config import load_config
    from ghostsearch.rundir import cells, run_config
    from ghostsearch.rundir.outputs import recovered_methods

    methods = [m for m in (recovery or []) if m != "none"]
    if (target / "result.json").exists():
        cfg = run_config(target, overrides)
        sets = given if given is not None else list(dict.fromkeys(r for _, r, _ in cells(target)))
        repairs = [(r, m) for r in sets for m in methods]
        repairs += [x for x in recovered_methods(target) if x not in repairs and (given is None or x[0] in sets)]
        return cfg, sets, repairs, None, target / "speed.json"
    if (target / "config.json").exists():
        if given or recovery:
            raise GhostsearchError(
                f"{target} is an exported model (already pruned and repaired); drop --remove/--recovery"
            )
        return load_config(None, overrides), [], [], target, None
    if target.is_file():
        if not given:
            raise GhostsearchError(
                f"speed {target} needs --remove BLOCKS (e.g. --remove 3,4,5; repeat for several sets)"
            )
        return load_config(str(target), overrides), given, [(r, m) for r in given for m in methods], None, None
    raise GhostsearchError(
        f"{target} is neither a run directory (result.json), an exported model directory (config.json) nor a "
        "config file"
    )


def check(cfg: Config, sets, repairs, export_dir: Path | None, out: Path | None, own_out: bool) -> None:
    """Every refusal before a model loads: the record's path (``.json``; against other programs'
    files, and the run's own when ``own_out``: out is the run directory's default) and every removed
    set against the model's depth (read from its config; not for an export)."""
    from ghostsearch.core.io import check_output
    from ghostsearch.model.models import model_depth
    from ghostsearch.model.stack import check_removed

    if out is not None:
        if out.suffix != ".json":
            raise GhostsearchError(f"speed --out {out}: give a .json path (the Parquet goes beside it)")
        own = ("speed.json", "speed.parquet") if own_out else ()
        for p in (out, out.with_suffix(".parquet")):
            check_output(p, "speed:" if own_out else "speed --out", ours=_our_file, own=own)
    depth = model_depth(cfg.model, cfg.trust_remote_code) if export_dir is None else None
    if depth is not None:
        for r in sets + [r for r, _ in repairs]:
            check_removed(r, depth)


def _our_file(path: Path) -> bool:
    """A file speed wrote before: its JSON record, or the Parquet beside it."""
    if path.suffix == ".parquet":
        import pyarrow.parquet as pq

        try:
            return {"label", "ideal_speedup"} <= set(pq.read_schema(path).names)
        except Exception:  # noqa: BLE001  (not Parquet: not ours)
            return False
    try:
        return "peak_method" in json.loads(path.read_text())
    except (OSError, ValueError, TypeError):
        return False


def measure(
    cfg: Config,
    sets,
    repairs,
    export_dir: Path | None,
    out: Path | None,
    *,
    batches: list[int],
    seq_len: int,
    decode_tokens: int,
    repeats: int,
    threads: int | None = None,
    progress: Callable[[str], None] | None = None,
) -> SpeedReport:
    """Load the configured model and time it beside every pruned set, each repair's operators (their
    shape: a repair's cost does not depend on its fitted numbers) and the export; write the record
    to ``out`` (and the Parquet beside it) when given."""
    import torch

    from ghostsearch.evaluation.speed import cost_operators, exported, measure_speed, write_report
    from ghostsearch.model.models import load_configured
    from ghostsearch.model.stack import Stack

    if threads:
        torch.set_num_threads(threads)
    model, _ = load_configured(cfg)
    L = Stack(model).n_blocks
    hidden = int(model.config.hidden_size)
    prebuilt = [exported(export_dir, model, cfg.model)] if export_dir is not None else []
    report = measure_speed(
        model,
        sets,
        repairs=[cost_operators(m, r, L, hidden) for r, m in repairs],
        batches=batches,
        seq_len=seq_len,
        decode_tokens=decode_tokens,
        repeats=repeats,
        progress=progress,
        prebuilt=prebuilt,
    )
    if out is not None:
        write_report(report, out)
    return report
