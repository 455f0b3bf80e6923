"""``ghostsearch recover RUN_DIR``: repair the best finalists of a run on the repair's calibration
data (``recovery.dataset`` x ``recovery.n_seq`` x ``recovery.seq_len``, as ``export`` and ``eval
--recovery`` fit) and re-score them with the run's objective on the run's calibration data, before
and after (RUN_DIR/recovery.parquet). Both datasets are recorded in every row (``fit_data``,
``score_data``), with the dense value on the scoring data; ``in_sample`` is true when both are the
same corpus (the scored windows may be among the fitted ones: with equal seeds and lengths they
are), and then a ``value_after`` below the dense value is said to be in-sample, not a result."""

from __future__ import annotations

import logging
import time
from pathlib import Path

from ghostsearch.core.errors import GhostsearchError
from ghostsearch.core.io import write_parquet_atomic
from ghostsearch.model.stack import check_removed
from ghostsearch.recovery.base import Activations
from ghostsearch.recovery.repair import (
    activations_from_config,
    captured_once,
    describe,
    recovery_from_config,
    repair_spec,
)
from ghostsearch.rundir import finalists, run_config, scoring_settings

log = logging.getLogger(__name__)


def mean(xs) -> float | None:
    xs = [x for x in xs if x is not None]
    return sum(xs) / len(xs) if xs else None


def recover(
    run_dir, method: str | None = None, top: int | None = None, threads: int | None = None, on_row=None
) -> list[dict]:
    """Rows (finalist, method, variant, removed, value_before, value_after, alignment_error(_before),
    antisymmetric_share of M and _w of W = I + M, dense_value, fit_data, score_data, in_sample,
    seconds), best finalist first; ``on_row(row)`` as each finishes.
    RUN_DIR/recovery.parquet is keyed by (finalist, method, variant): these rows replace only the
    rows with their keys, so every method's rows stay side by side."""
    from tqdm.auto import tqdm

    from ghostsearch.core.logs import progress_enabled
    from ghostsearch.scoring import scorer_from_config

    run_dir = Path(run_dir)
    cfg = run_config(run_dir)
    top = cfg.recovery.top if top is None else top
    if top < 1:
        raise GhostsearchError(f"--top {top}; repair at least one finalist")
    todo = finalists(run_dir)[:top]
    old_rows(run_dir / "recovery.parquet")  # a damaged file moved aside now, not after all the work
    rec = recovery_from_config(cfg, method)
    from ghostsearch.config import check_repairs
    from ghostsearch.data.dataplan import announce, plan

    check_repairs(cfg, "--method" if method else "recovery.method", [rec.name])  # before the model loads

    announce(plan(cfg, [cfg.objective], evaluate=False, repair=not rec.identity))  # FALLBACK lines, as export
    # the search's dtype and thread count: value_before reproduces the search's value
    cfg, threads = scoring_settings(run_dir, cfg, threads)
    sc = scorer_from_config(cfg, threads=threads)
    spec = cfg.objective_spec()
    if spec.aware is not None:  # before/after must be the plain objective, not the recovery-aware one
        import dataclasses

        spec = dataclasses.replace(spec, aware=None)
    key = sc.prepare(spec)
    fit_spec = repair_spec(cfg)
    data = (
        None
        if rec.identity
        else captured_once(activations_from_config(sc.stack, sc.tokenizer, cfg), cfg.eval.cache_gib * (1 << 30))
    )
    if data is None:
        data = Activations.from_scorer(sc, key)  # ``none`` fits nothing: its report reads the scoring data
        fit_spec = spec.calibration
    in_sample = fit_spec.dataset == spec.calibration.dataset
    dense = sc.score(key, ()).value
    rows = []
    for name, removed, _ in tqdm(todo, desc=f"recover ({rec.name})", unit="finalist", disable=not progress_enabled()):
        t0 = time.perf_counter()
        removed = check_removed(removed, sc.stack.n_blocks)
        ops = rec.fit(sc.stack, removed, data)
        before = sc.score(key, removed).value
        with rec.patches(sc.stack, ops) as patches:
            after = sc.score(key, removed, patches=patches).value
        rows.append(
            {
                "finalist": name,
                "method": rec.name,
                "variant": rec.variant,
                "removed": list(removed),
                "value_before": before,
                "value_after": after,
                "alignment_error_before": mean(r["alignment_before"] for r in ops.report),
                "alignment_error": mean(r["alignment_after"] for r in ops.report),
                "antisymmetric_share": mean(r["antisymmetric_share"] for r in ops.report),
                "antisymmetric_share_w": mean(r.get("antisymmetric_share_w") for r in ops.report),
                "dense_value": dense,
                "fit_data": describe(fit_spec),
                "score_data": describe(spec.calibration),
                "in_sample": in_sample,
                "seconds": time.perf_counter() - t0,
            }
        )
        if in_sample and after < dense:
            log.warning(
                f"recover: {name}'s value_after {after:.4g} is below the dense model's {dense:.4g} on "
                f"{describe(spec.calibration)}, the corpus the repair was fit on ({describe(fit_spec)}): "
                "in-sample, not a result; `ghostsearch eval RUN_DIR --recovery "
                f"{rec.name}` reads held-out data"
            )
        if on_row is not None:
            on_row(rows[-1])
    merge_rows(rows, run_dir / "recovery.parquet")
    return rows


KEY = ("finalist", "method", "variant")


def old_rows(path: Path) -> list[dict]:
    """The rows of a previous recovery.parquet; one that cannot be read as recover's rows (damaged,
    truncated, another program's file) is moved aside to ``recovery.parquet.damaged-<ns>`` (never
    deleted), in one line, and this run's rows start a new file."""
    import pyarrow.parquet as pq

    if not path.exists():
        return []
    try:
        rows = pq.read_table(path).to_pylist()
        if all(all(k in r for k in KEY) for r in rows):
            return rows
    except Exception:  # noqa: BLE001  (pyarrow's errors for a damaged file are of several kinds)
        pass
    aside = path.with_name(f"{path.name}.damaged-{time.time_ns()}")
    path.rename(aside)
    log.warning(f"recover: {path} is not readable as recover's rows; moved to {aside.name}, a new file is written")
    return []


def merge_rows(rows: list[dict], path: Path) -> None:
    """Merge ``rows`` into the Parquet file at ``path``: rows with the same KEY are replaced, the rest kept
    (``evaluate.write_rows(rows, path)`` writes a file whole; both take the rows first)."""
    import pyarrow as pa

    new = {tuple(r[k] for k in KEY) for r in rows}
    old = [r for r in old_rows(path) if tuple(r.get(k) for k in KEY) not in new]
    write_parquet_atomic(path, pa.Table.from_pylist(old + rows))
