"""The search recipe: one cell (searcher x objective x k x seed) run on the scoring pool; ``Run``,
the setup and cleanup of a run that ``search`` and ``compare`` share (checks, data plan, RUN_DIR,
Ray, pool, identity, result.json, compaction, one error path); and ``ghostsearch search`` (one cell
into a run directory).

Rerunning the same command on the same run directory resumes: the searcher replays
deterministically (same seed) and every candidate already in the ledger is answered from it,
so no ledgered candidate is scored again.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ghostsearch.config import Config, build_searcher
from ghostsearch.core.errors import GhostsearchError
from ghostsearch.core.io import write_json_atomic
from ghostsearch.rundir import Ledger, cell_name
from ghostsearch.rundir.cell import CellResult, CellSpec, HistoryPoint
from ghostsearch.rundir.ledger import LedgerRow
from ghostsearch.rundir.outputs import RunOutputs

if TYPE_CHECKING:
    from ghostsearch.pool.session import PoolSession


class Progress:
    """A bar per searcher: evaluations done, rate, and the searcher's best so far (``told``: the
    value its history records, so the bar and result.json's history agree). Each evaluation's
    finishing time (seconds since the cell started) is kept by removed set for the history."""

    def __init__(self, total: float | None, desc: str, enabled: bool = True):
        from tqdm.auto import tqdm

        self.bar = tqdm(total=total, desc=desc, unit="eval", disable=not enabled, dynamic_ncols=True, mininterval=0.5)
        self.t0 = time.monotonic()
        self.finished: dict[tuple[int, ...], float] = {}  # removed set -> seconds when its evaluation finished
        self.best, self.cached = float("inf"), "n"
        self.seen: dict[int, float] = {}  # set size -> the lowest full-fidelity value evaluated at it

    def __call__(self, row: LedgerRow) -> None:
        self.finished[tuple(row.removed)] = time.monotonic() - self.t0
        self.cached = "y" if row.cached else "n"
        if row.fidelity >= 1 and not row.partial:
            n = len(row.removed)
            self.seen[n] = min(self.seen.get(n, float("inf")), row.value)
        self.bar.update(row.cost or row.fidelity)  # a race block costs its rows only
        self.bar.set_postfix(best=self.shown(), cached=self.cached, refresh=False)

    def shown(self) -> str:
        """The searcher's best so far; until it has been told a k-set (greedy: its last step), the lowest
        value evaluated at the largest set size so far, with that size (``12.3@k3``); ``-`` before any."""
        if self.best != float("inf"):
            return f"{self.best:.4g}"
        if self.seen:
            n = max(self.seen)
            return f"{self.seen[n]:.4g}@k{n}"
        return "-"

    def told(self, best: float) -> None:
        self.best = best
        self.bar.set_postfix(best=self.shown(), cached=self.cached)

    def close(self):
        self.bar.close()


def warm_start(run_dir: Path, cell: str, client, n: int) -> list[tuple[int, ...]]:
    """The warm-start sets of a cell: the n best k-sets of the shared cache when the cell first
    started, kept in RUN_DIR/warm/<cell>.json so that a resumed cell replays the same start."""
    import json

    f = run_dir / "warm" / f"{cell}.json"
    if not f.exists():
        f.parent.mkdir(exist_ok=True)
        write_json_atomic(f, [{"removed": r, "value": v} for r, v in client.best_known(n)])
    return [tuple(e["removed"]) for e in json.loads(f.read_text())]


def run_cell(
    cfg: Config,
    broker,
    run_dir: Path,
    *,
    searcher: str,
    objective: str,
    k: int,
    seed: int,
    n_blocks: int,
    progress: bool = True,
    matched: bool = False,
) -> CellResult:
    """Run one searcher on one objective/k/seed through the pool; ledger rows tagged with the cell name."""
    from ghostsearch.pool.client import PoolClient
    from ghostsearch.search import run
    from ghostsearch.search.race_report import race_report

    cell = cell_name(searcher, objective, k, seed)
    s = build_searcher(cfg, searcher, k, seed, n_blocks, run_dir, cell, matched=matched)
    ledger = Ledger(run_dir)
    client = PoolClient(
        broker,
        cfg.objective_spec(objective, seed),
        ledger,
        cell,
        seed,
        cfg.model,
        cfg.dtype,
        k=k,
        sources={"perplexity": cfg.calibration_spec("perplexity")},
    )  # text statistics (lorp)
    client.load_known(run_dir)
    client.share_known()  # a resumed cell's values serve other run directories on this pool too
    if getattr(s.params, "warm_start", False):
        s.warm = warm_start(run_dir, cell, client, s.params.warm_n)
    bar = Progress(s.budget.evaluations, cell, enabled=progress)
    client.on_result = bar
    t0 = bar.t0
    stamps: list[float] = []  # per history entry: when that candidate's own evaluation finished

    def on_told(candidates) -> None:
        # a history point's seconds: when its candidate's evaluation and every earlier point's had
        # finished (a batch's evaluations finish out of order): non-decreasing, at most the telling time
        now = time.monotonic() - t0
        for c in candidates:
            stamps.append(max(bar.finished.get(tuple(c.removed), now), stamps[-1] if stamps else 0.0))
        bar.told(s.best_value)

    try:
        run(s, client, oracle=client, on_told=on_told)
        dense = client.dense_value()  # the reference, on the same calibration data
    finally:
        bar.close()
        ledger.close()
    removed, value = s.result()
    if removed is None:
        raise GhostsearchError(
            f"{cell} produced no answer within its budget; raise search.budget or search.time_budget"
        )
    return CellResult(
        cell=cell,
        searcher=searcher,
        objective=objective,
        k=k,
        seed=seed,
        removed=tuple(removed),
        value=value,
        evaluations=client.evaluations,
        budget_used=s.used,
        cache_hits=client.cache_hits,
        wall_seconds=time.monotonic() - t0,
        history=tuple(HistoryPoint(u, t, v if v != float("inf") else None) for (u, v), t in zip(s.history, stamps)),
        model={"name": cfg.model, "blocks": n_blocks, "dtype": cfg.dtype},
        direction="lower is better",
        dense_value=dense,
        relative_change=(value - dense) / abs(dense) if dense else None,
        budget_mode="matched" if matched else "own",
        budget=s.budget.evaluations,
        warm_start=tuple(tuple(w) for w in getattr(s, "warm", [])),
        race=race_report(s),
    )  # raced or exact (race: auto), rows, candidates cut without the bound


class Run:
    """One run's recipe, which ``search`` and ``compare`` share (torchtune's shape: setup, run,
    cleanup), with one error path.

    Setup. Constructing it checks, and writes and says nothing; the settings flow down once: the run
    directory, then every config error (the model fits, every cell's searcher builds with
    ``matched``: compare.budget=matched, ``check``: the caller's own, e.g. compare's tasks), then the
    data plan of the cells' objectives (``evaluate``, ``repair``: what the run will also read) and
    ``check_data``. Entering it (``with run:``) goes outside, in this order: the Ray address answers
    and a local pool fits this machine (before a run directory exists), the data plan is announced,
    RUN_DIR is opened (``outputs``: staged when out= is a URI, the trackers), ``contrasts`` (the
    pre-registered ones) written into result.json first when it is not there yet, and the pool
    session opened (``session``, pool/session.py): connects to Ray, finds the pool (pool.name) or
    starts it (``broker``) and checks its identity against RUN_DIR's.

    Run: the caller's, on ``broker``, ``dir``, ``outputs``, ``n_blocks``; ``finish`` writes
    pool.json, compacts the ledger and writes result.json; ``disconnect`` leaves Ray early (before
    work that needs no pool).

    Cleanup (leaving the ``with``, however it is left): the trackers closed and RUN_DIR pushed to
    its URI, RUN_DIR released (removed again when this run created it and ledgered nothing), the
    session released (the pool this run started ended, Ray shut down when this run started it);
    ``ok`` (trackers, RUN_DIR): the block ended without raising.

    ``pool=False``: the caller's cells are answered by RUN_DIR (``answered``: a target rerun whose search
    is finished), so no pool and no Ray: entering opens RUN_DIR only, ``finish`` writes result.json only."""

    def __init__(
        self,
        cfg: Config,
        kind: str,
        cells: list[CellSpec],
        *,
        address: str | None = None,
        matched: bool = False,
        evaluate: bool = False,
        repair: bool = False,
        check: Callable[[], object] | None = None,
        check_data: Callable[[Any], object] | None = None,
        contrasts: list | None = None,
        pool: bool = True,
    ):
        from ghostsearch.config import check_model_fit
        from ghostsearch.data.dataplan import plan
        from ghostsearch.rundir.layout import check_run_dir

        self.cfg, self.kind, self.cells, self.contrasts, self.pool = cfg, kind, cells, contrasts, pool
        self.address = address or cfg.pool.address
        check_run_dir(cfg)  # the run directory, then every config error: before any network probe
        self.n_blocks = check_model_fit(cfg)
        for c in cells:
            build_searcher(cfg, c.searcher, c.k, c.seed, self.n_blocks, matched=matched)
        if check is not None:
            check()
        self.data_plan = plan(cfg, [c.objective for c in cells], evaluate=evaluate, repair=repair)
        if check_data is not None:  # the caller's checks of the data plan (target's draw), before it is announced
            check_data(self.data_plan)
        self._outputs: RunOutputs | None = None
        self.session: PoolSession | None = None  # Ray and the pool, once entered
        self.broker: Any = None  # the pool's broker (a Ray actor handle), once entered
        self.t0 = 0.0  # when Ray was connected

    @property
    def outputs(self) -> RunOutputs:
        assert self._outputs is not None, "enter the Run first (with run: ...)"
        return self._outputs

    @property
    def dir(self) -> Path:
        return self.outputs.dir

    def __enter__(self) -> Run:
        from ghostsearch.data.dataplan import announce
        from ghostsearch.pool.cluster import check_local_capacity
        from ghostsearch.pool.session import PoolSession
        from ghostsearch.rundir.layout import check_identity, resumed_dtype

        cfg = self.cfg
        if self.pool:  # the address answers and a local pool fits, before a run directory exists
            check_local_capacity(cfg, self.address)
        announce(self.data_plan)
        self._outputs = RunOutputs(cfg, self.kind)  # RUN_DIR (staged when out= is s3:// or gs://) and the trackers
        try:
            if self.contrasts and not (self.dir / "result.json").exists():
                write_json_atomic(self.dir / "result.json", self.result([]))  # before any cell runs
            if not self.pool:
                return self
            self.session = PoolSession(cfg, self.address)
            self.session.connect()
            self.t0 = time.monotonic()
            # the named pool (pool.name) found, else one started that keeps a resumed run's dtype
            self.broker = self.session.start(load_dtype=None if cfg.pool.name else resumed_dtype(cfg, self.dir))
            specs: dict = {}  # one per objective (and per cell seed with compare.calibration_seeds), in cell order
            for c in self.cells:
                spec = cfg.objective_spec(c.objective, c.seed)
                specs.setdefault(spec.key(), spec)
            check_identity(self.dir, self.session.identity(list(specs.values())))
        except BaseException as e:
            self.__exit__(type(e), e, e.__traceback__)
            raise
        return self

    def run_cell(self, cell: CellSpec, progress: bool = True) -> CellResult:
        """One cell of this run on its pool (:func:`run_cell` with the run's broker, RUN_DIR and model depth)."""
        return run_cell(
            self.cfg,
            self.broker,
            self.dir,
            searcher=cell.searcher,
            objective=cell.objective,
            k=cell.k,
            seed=cell.seed,
            n_blocks=self.n_blocks,
            progress=progress,
        )

    def result(self, results: list[CellResult], **extra) -> dict:
        """result.json: ``contrasts`` first (compare), ``cells`` by cell name, ``extra``, ``data``."""
        head = {} if self.contrasts is None else {"contrasts": list(self.contrasts)}
        return {**head, "cells": {r.cell: r.to_dict() for r in results}, **extra, "data": self.data_plan.to_dict()}

    def finish(self, results: list[CellResult], resumed: int = 0, **extra) -> dict:
        """The cells are done: pool.json (the broker's accounting; kept from the invocation that ran
        cells, so not rewritten when all ``resumed``), the ledger compacted, result.json written. Without a
        pool (``pool=False``) only result.json: pool.json and the ledger as the run that computed them left them."""
        if self.pool:
            import ray

            status = ray.get(self.broker.pool_status.remote()).with_best((r.cell, r.value, r.removed) for r in results)
            Ledger(self.dir).compact()
            if resumed < len(self.cells) or not (self.dir / "pool.json").exists():
                write_json_atomic(self.dir / "pool.json", status.to_dict())
        result = self.result(results, **extra)
        write_json_atomic(self.dir / "result.json", result)
        return result

    def disconnect(self) -> None:
        """Leave Ray (the session's release): end the pool this run started (an unnamed one: on a Ray
        the run joined, it would otherwise hold its CPUs/GPUs until the driver exits; a named pool,
        pool.name, outlives the run), and shut Ray down when this run started it; cleanup does it
        otherwise."""
        if self.session is not None:
            self.session.release()

    def __exit__(self, exc_type, exc, tb) -> None:
        from ghostsearch.rundir.layout import close_run_dir

        ok = exc_type is None
        try:
            if self._outputs is not None:
                self._outputs.close(ok)
        finally:
            try:
                if self._outputs is not None:
                    close_run_dir(self._outputs.dir, ok)
            finally:
                self.disconnect()


def answered(cfg: Config, cell: str, say: bool = True) -> dict | None:
    """result.json of a finished search that a rerun would only replay: out= holds this config's
    run directory (same fingerprint), its result.json has ``cell``'s answer, its ledger holds that
    answer's evaluation with that value, and identity.json records this model's content (and the
    dtype and thread count this run would score with). Then ``search`` returns it without starting
    Ray or loading the model (docs/reliability.md); None otherwise (the run goes the usual way,
    which replays the ledger). Reads only; the data directory's contents are not re-hashed (the full
    path checks the calibration token ids). ``say``: log the one line that says so (target says its own)."""
    import json
    import math

    from ghostsearch.model.models import model_identity, resolve_dtype
    from ghostsearch.rundir.layout import check_run_dir, read_cells, read_identity
    from ghostsearch.rundir.ledger import read_ledger

    if "://" in str(cfg.out) or cfg.pool.name:
        return None
    out = Path(cfg.out).expanduser()
    if not (out / "result.json").is_file() or not (out / "identity.json").is_file():
        return None
    check_run_dir(cfg)  # another config's run directory: its own one line, as the usual path says it
    try:
        result = json.loads((out / "result.json").read_text())
        cells = read_cells(result)
        got = cells.get(cell)
        ident = read_identity(out / "identity.json")
    except (ValueError, KeyError, TypeError, AttributeError, GhostsearchError):
        return None  # the usual path says what is wrong, or recomputes
    if got is None or got.value is None or not math.isfinite(got.value) or got.dense_value is None:
        return None
    dtype = str(resolve_dtype(cfg.dtype, cfg.resolved_device())).replace("torch.", "")
    if ident.get("dtype") != dtype and cfg.dtype != "auto":
        return None
    if "cpu_threads" in ident and ident["cpu_threads"] != cfg.pool.threads:
        return None
    if ident.get("model_id") != model_identity(cfg.model):
        return None
    rows = read_ledger(out).to_pylist()
    want = sorted(got.removed)
    if not any(
        r["cell"] == cell and not r["partial"] and sorted(r["removed"]) == want and r["value"] == got.value
        for r in rows
    ):
        return None  # the ledger lost the answer's evaluation: recomputed the usual way
    import logging

    if say:
        logging.getLogger("ghostsearch").info(
            f"{out} already holds this search's answer ({cell}: {got.value:.6g}) and its ledger holds the evaluations;"
            f" returned without starting Ray or loading the model (delete {out / 'result.json'} to rerun it)"
        )
    kept = {key: v for key, v in result.items() if key not in ("cells", "searchers")}  # cells: today's form
    return {"cells": {name: c.to_dict() for name, c in cells.items()}, **kept}


def search(cfg: Config, address: str | None = None, progress: bool = True) -> dict:
    """`ghostsearch search`: the configured searcher on the pool; writes RUN_DIR. A rerun of a
    finished search that its run directory fully answers returns at once (``answered``)."""
    cell = CellSpec(searcher=cfg.searcher, objective=cfg.objective, k=cfg.k, seed=cfg.seed)
    done = answered(cfg, cell_name(cell.searcher, cell.objective, cell.k, cell.seed))
    if done is not None:
        return done
    with Run(cfg, "search", [cell], address=address) as run:
        res = run.run_cell(cell, progress)
        run.outputs.cell(res.to_dict())  # the trackers take the JSON form
        return run.finish([res])
