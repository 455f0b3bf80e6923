"""``ghostsearch recover RUN_DIR`` and ``ghostsearch export``. Registered by appending
``add_commands`` to ``ghostsearch.cli.EXTRA_COMMANDS`` (one import line in ghostsearch/cli.py).

* ``recover RUN_DIR --method ghosted [--top N]``: repairs the N best finalists of RUN_DIR/result.json
  on the run's calibration data, re-scores them with the run's objective (before and after) and
  writes RUN_DIR/recovery.parquet (finalist, method, removed, value_before, value_after,
  alignment_error(_before), antisymmetric_share, seconds).
* ``export (RUN_DIR | CONFIG --remove 3,4,5) --method M --out DIR [--force]``: writes a model
  directory (see export.py); from a run directory the best finalist unless --remove is given.
"""
from __future__ import annotations

import json
import os
import time
from pathlib import Path

from ghostsearch.errors import GhostsearchError


def finalists(run_dir: Path) -> list[tuple[str, tuple[int, ...], float]]:
    """(cell, removed, value) of result.json, best (lowest) value first, each removed set once."""
    path = run_dir / "result.json"
    if not path.exists():
        raise GhostsearchError(f"{path} does not exist; run `ghostsearch search` into {run_dir} first")
    try:
        cells = json.loads(path.read_text())["searchers"]
        rows = sorted((float(c["value"]), name, tuple(sorted(c["removed"]))) for name, c in cells.items())
    except (ValueError, KeyError, TypeError) as e:
        raise GhostsearchError(f"{path} is not a ghostsearch result ({e}); re-run the search") from None
    seen, out = set(), []
    for value, name, removed in rows:
        if removed not in seen:
            seen.add(removed)
            out.append((name, removed, value))
    return out


def _run_config(run_dir: Path, overrides=None):
    from ghostsearch.config import load_config

    if not (run_dir / "config.yaml").exists():
        raise GhostsearchError(f"{run_dir} has no config.yaml; point at a run directory written by ghostsearch search")
    return load_config(str(run_dir / "config.yaml"), overrides)


def mean(xs) -> float | None:
    xs = [x for x in xs if x is not None]
    return sum(xs) / len(xs) if xs else None


def recover(run_dir, method: str | None = None, top: int | None = None, threads: int | None = None) -> list[dict]:
    import pyarrow as pa
    import pyarrow.parquet as pq

    from ghostsearch.config import calibration_spec
    from ghostsearch.recovery.apply import recovery_from_config
    from ghostsearch.recovery.base import Calibration, check_removed
    from ghostsearch.scoring import scorer_from_config

    run_dir = Path(run_dir)
    cfg = _run_config(run_dir)
    top = cfg.recovery.top if top is None else top
    if top < 1:
        raise GhostsearchError(f"--top {top}; repair at least one finalist")
    todo = finalists(run_dir)[:top]
    rec = recovery_from_config(cfg, method)
    sc = scorer_from_config(cfg, threads=threads)
    params = {k: v for k, v in cfg.objective_params.items() if k != "recovery"}
    key = sc.prepare(cfg.objective, calibration_spec(cfg), params)
    data = Calibration.from_scorer(sc, key)
    rows = []
    for name, removed, _ in todo:
        t0 = time.perf_counter()
        removed = check_removed(removed, sc.stack.n_blocks)
        ops = rec.fit(sc.stack, removed, data)
        before = sc.score(key, removed)["value"]
        with rec.patches(sc.stack, ops) as patches:
            after = sc.score(key, removed, patches=patches)["value"]
        rows.append({"finalist": name, "method": rec.name, "variant": rec.variant, "removed": list(removed),
                     "value_before": before, "value_after": after,
                     "alignment_error_before": mean(r["alignment_before"] for r in ops.report),
                     "alignment_error": mean(r["alignment_after"] for r in ops.report),
                     "antisymmetric_share": mean(r["antisymmetric_share"] for r in ops.report),
                     "seconds": time.perf_counter() - t0})
        print(json.dumps(rows[-1]), flush=True)
    tmp = run_dir / ".recovery.parquet.tmp"
    pq.write_table(pa.Table.from_pylist(rows), tmp)
    os.replace(tmp, run_dir / "recovery.parquet")
    return rows


def export_cmd(source, remove: str | None, method: str, out, force: bool = False, overrides=None,
               threads: int | None = None) -> Path:
    from ghostsearch.cli import _parse_remove
    from ghostsearch.config import load_config
    from ghostsearch.recovery.apply import fit_from_config
    from ghostsearch.recovery.export import export
    from ghostsearch.scoring import check_removed, scorer_from_config

    src = Path(source)
    if Path(out).expanduser().exists() and not force:
        raise GhostsearchError(f"export directory {out} already exists; pass --force to replace it or choose another --out")
    if src.is_dir():
        cfg = _run_config(src, overrides)
        removed = _parse_remove(remove) if remove is not None else list(finalists(src)[0][1])
    else:
        if remove is None:
            raise GhostsearchError(f"export from a config file needs --remove, e.g. --remove 3,4,5 ({src} is not a run directory)")
        cfg, removed = load_config(str(src), overrides), _parse_remove(remove)
    sc = scorer_from_config(cfg, threads=threads)
    model, tok = sc.stack.model, sc.tokenizer
    removed = check_removed(removed, sc.stack.n_blocks)
    ops = None if method == "none" else fit_from_config(model, tok, removed, cfg, method)
    path = export(model, removed, method, ops, out, force=force, tokenizer=tok)
    print(json.dumps({"out": str(path), "method": method, "removed": list(removed),
                      "blocks": sc.stack.n_blocks - len(removed)}))
    return path


def add_commands(sub, with_config) -> None:
    methods = ("ghosted", "linearpatch", "replaceme", "none")
    sp = sub.add_parser("recover", help="repair the top-N finalists of a run; writes RUN_DIR/recovery.parquet")
    sp.add_argument("run_dir", help="a run directory (config.yaml + result.json)")
    sp.add_argument("--method", choices=methods, default=None, help="default: the run's recovery.method")
    sp.add_argument("--top", type=int, default=None, help="finalists to repair (default: recovery.top)")
    sp.add_argument("--threads", type=int, default=None)
    sp.set_defaults(func=lambda a: recover(a.run_dir, a.method, a.top, a.threads))

    sp = sub.add_parser("export", help="write a pruned (and repaired) model directory")
    sp.add_argument("source", help="a run directory, or a YAML config with --remove")
    sp.add_argument("overrides", nargs="*", help="key=value config overrides")
    sp.add_argument("--remove", default=None, help="comma-separated block indices, e.g. 3,4,5")
    sp.add_argument("--method", choices=methods, required=True)
    sp.add_argument("--out", required=True, help="the model directory to write")
    sp.add_argument("--force", action="store_true", help="replace --out if it exists")
    sp.add_argument("--threads", type=int, default=None)
    sp.set_defaults(func=lambda a: export_cmd(a.source, a.remove, a.method, a.out, a.force, a.overrides, a.threads))


def _register() -> None:
    from ghostsearch.cli import EXTRA_COMMANDS

    if add_commands not in EXTRA_COMMANDS:
        EXTRA_COMMANDS.append(add_commands)


_register()
