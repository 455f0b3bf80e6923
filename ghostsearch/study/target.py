"""``ghostsearch target``: the largest k whose quality drop stays below a stated target, with a
guarantee (docs/target.md).

The recipe: (1) search on the pool once along greedy's nested path (one cell at the largest k: its
step-t sets all contain the step-(t-1) answer, read back from the ledger), or one cell per k for
any other searcher; (2) repair each k's set with ``target.recovery``, fitted on the repair
calibration, which the data plan checks to be disjoint from every evaluation set; (3) judge the
ks in increasing order on fresh held-out items, the same seeded draw for every model (perplexity:
windows of ``eval.ppl_seq_len`` tokens of the metric's corpus in a random order fixed by
``eval.seed``; accuracy: the run's item draw, ``items.run_draw``), each in looks, with
``certify.certify`` (a one-sided group-sequential non-inferiority test per k, fixed-sequence across
k); (4) result.json's ``target`` block, RUN_DIR/report.md, the measured speed of the certified model
(``speed.measure_speed``), and one sentence as the command's last line.

Resumable: the search replays from the ledger; every model's per-item values are kept in
RUN_DIR/target/values/<metric>/<eval_key>.json (the first n items of the draw, extended as the
looks need more), so a rerun recomputes nothing it has; RUN_DIR/target/looks.json holds the
certification after every k. The model is loaded (and the repairs fitted) only when a value is
missing. A rerun of a finished target that RUN_DIR fully answers (``answered``: the search's
answer as ``runner.answered`` checks it, result.json's target block written by this config, every
value it used kept, the speed measured) returns that block without starting Ray or loading the model.
A rerun whose search RUN_DIR answers (``searched``: an interrupted repair, look or speed timing, another
target on the same search) starts no Ray either: the sets come from result.json and the ledger.
"""

from __future__ import annotations

import json
import logging
import math
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from ghostsearch.config import Config
from ghostsearch.core.errors import GhostsearchError
from ghostsearch.core.io import write_json_atomic, write_text_atomic
from ghostsearch.rundir.cell import CellResult, CellSpec
from ghostsearch.stats import certify as cert
from ghostsearch.study import account

log = logging.getLogger(__name__)

DEFAULT_LOOKS = (100, 200, 400)
CHUNK = 200  # items (windows) computed and kept at a time: what an interrupted look loses at most
# how the certified model's speed is measured beside the dense one (``measure``; ``plan`` estimates its seconds)
SPEED_SEQ_LEN, SPEED_DECODE, SPEED_REPEATS = 128, 16, 3  # batch 1: prompt tokens, tokens decoded, rounds


def nested(searcher: str) -> bool:
    """One run at k gives a nested path of every smaller k (``Searcher.nested_path``: greedy)."""
    from ghostsearch.search import get_searcher

    return get_searcher(searcher).nested_path


@dataclass(frozen=True)
class Plan:
    """What a target run judges, resolved before any model work."""

    metric: str
    delta: float  # on the test's scale (certify.metric_delta)
    ks: list[int]
    looks: list[int]
    method: str  # the repair
    perplexity: str | None  # the corpus of a ppl_<set> metric, else None
    tasks: list[str]  # the accuracy's tasks (empty for a perplexity)
    params_k: int | None = None  # target.params or target.speedup resolved to this k (the quality only reported)
    repairs: tuple[str, ...] = ()  # target.recovery as a family (one repair: itself); ``method`` is the one judged now


def acc_tasks(cfg: Config, metric: str) -> list[str]:
    if metric == "mean_acc":
        return list(cfg.eval.tasks)
    if metric.endswith("_acc") and metric[: -len("_acc")] in cfg.eval.tasks:
        return [metric[: -len("_acc")]]
    raise GhostsearchError(
        f"target.quality.metric={metric!r}: use ppl_<set> (a set of eval.perplexity), mean_acc or <task>_acc "
        f"(a task of eval.tasks: {', '.join(cfg.eval.tasks)})"
    )


def plan(cfg: Config, n_blocks: int) -> Plan:
    """The target's metric, delta, ks and looks, checked (one line each) before any model work."""
    from ghostsearch.config import protected_blocks
    from ghostsearch.evaluation.native import NATIVE_TASKS

    t = cfg.target
    if cfg.eval.sample == "first":
        raise GhostsearchError(
            "eval.sample=first: target's guarantee is over a random draw of the items, and the first items are "
            "not one; use eval.sample: random (a seeded draw)"
        )
    cert.check_looks(t.looks or DEFAULT_LOOKS)
    repairs = (t.recovery,) if isinstance(t.recovery, str) else tuple(t.recovery)
    if t.speedup is not None and t.params is not None:
        raise GhostsearchError("target.params and target.speedup both set: each resolves to a k; keep one")
    q = t.quality
    metric = q.metric
    if t.params is None and t.speedup is None:
        delta = cert.metric_delta(metric, q.max_drop, q.max_ratio)
    else:  # the quality is reported, not targeted: -inf never certifies, so every look runs
        delta = cert.metric_delta(metric, q.max_drop, q.max_ratio) if (q.max_drop or q.max_ratio) else -math.inf
    free = n_blocks - len(protected_blocks(cfg, n_blocks))
    if t.ks == "auto":
        ks = list(range(1, max(1, min(free - 1, n_blocks // 2)) + 1))
    else:
        assert isinstance(t.ks, list)
        ks = list(t.ks)
    if ks[-1] >= free:
        raise GhostsearchError(
            f"target.ks goes up to {ks[-1]} but only {free} blocks may be removed (search.protected); lower target.ks"
        )
    looks = list(t.looks or DEFAULT_LOOKS)
    if metric.startswith("ppl_"):
        name = metric[len("ppl_") :]
        if name not in cfg.eval.perplexity:
            raise GhostsearchError(
                f"target.quality.metric={metric} needs {name} in eval.perplexity (now {cfg.eval.perplexity}); add it"
            )
        return Plan(metric, delta, ks, looks, repairs[0], name, [], repairs=repairs)
    tasks = acc_tasks(cfg, metric)
    bad = [x for x in tasks if x not in NATIVE_TASKS]
    if bad or cfg.eval.engine != "native":
        raise GhostsearchError(
            f"target.quality.metric={metric} needs per-item rows: eval.engine=native and only the eight "
            f"commonsense tasks in eval.tasks (not {bad})"
        )
    return Plan(metric, delta, ks, looks, repairs[0], None, tasks, repairs=repairs)


def eval_cfg(cfg: Config, p: Plan, offset: int = 0) -> Config:
    """The config the evaluation reads: only the metric's perplexity set or tasks (so that the data
    plan checks exactly what is evaluated), the target's repair as recovery.method; an accuracy's
    draw holds the items from ``offset`` (a fresh try) to the last look."""
    ev = replace(cfg.eval, perplexity=[p.perplexity] if p.perplexity else [], tasks=list(p.tasks))
    if p.tasks:
        ev = replace(ev, max_items=max(offset + p.looks[-1], ev.max_items or 0))
    return replace(cfg, eval=ev, recovery=replace(cfg.recovery, method=p.method))


def account_request(cfg: Config, p: Plan) -> account.Request:
    """What this run tests, for RUN_DIR/target/account.json (``account.plan``)."""
    return account.Request(
        p.metric,
        account.test_key(cfg.to_dict()),
        list(p.looks),
        cfg.target.level,
        cfg.target.tries,
        list(p.repairs),
        cfg.target.rerun,
    )


# ---------------------------------------------------------------- the search
def nested_path(run_dir: Path, cell: str, answer: tuple[int, ...]) -> dict[int, list[int]]:
    """Greedy's path from its ledger: the step-t answer is the set every step-(t+1) candidate extends
    (their intersection); the last step's answer is the cell's. Checked to be nested."""
    from ghostsearch.rundir.ledger import read_ledger

    table = read_ledger(run_dir).to_pylist()
    sizes: dict[int, list[frozenset[int]]] = {}
    for r in table:
        if r["cell"] == cell:
            sizes.setdefault(len(r["removed"]), []).append(frozenset(r["removed"]))
    K = len(answer)
    path = {K: sorted(answer)}
    for t in range(K - 1, 0, -1):
        sets = sizes.get(t + 1, [])
        common = frozenset.intersection(*sets) if len(sets) > 1 else frozenset()
        if len(common) != t or not common <= frozenset(path[t + 1]):
            raise GhostsearchError(
                f"the ledger of {cell} does not hold greedy's step {t + 1} (RUN_DIR/ledger); remove RUN_DIR and rerun"
            )
        path[t] = sorted(common)
    return path


def search_sets(
    cfg: Config, run, ks: list[int], progress: bool, done: list[CellResult] | None = None
) -> tuple[dict[int, list[int]], list[CellResult]]:
    """Each k's removed set: greedy's nested path from one cell at max(ks), else one cell per k; the
    cells searched on the pool, or ``done`` (``searched``: RUN_DIR's answers, no pool)."""
    results = done if done is not None else [run.run_cell(c, progress) for c in cells(cfg, ks)]
    if nested(cfg.searcher):
        path = nested_path(run.dir, results[0].cell, results[0].removed)
        return {k: path[k] for k in ks}, results
    return {r.k: sorted(r.removed) for r in results}, results


def cells(cfg: Config, ks: list[int]) -> list[CellSpec]:
    if nested(cfg.searcher):
        return [CellSpec(cfg.searcher, cfg.objective, ks[-1], cfg.seed)]
    return [CellSpec(cfg.searcher, cfg.objective, k, cfg.seed) for k in ks]


def searched(cfg: Config, ks: list[int]) -> list[CellResult] | None:
    """Every search cell's result when RUN_DIR answers it as a rerun of ``search`` is answered
    (``runner.answered``: the same search config, the answer in result.json and in the ledger, this
    model's content, dtype and threads), else None (the search runs, or replays, on the pool)."""
    from ghostsearch.run.runner import answered as search_answered
    from ghostsearch.rundir.cell import cell_name
    from ghostsearch.rundir.layout import read_cells

    done = []
    for c in cells(cfg, ks):
        name = cell_name(c.searcher, c.objective, c.k, c.seed)
        result = search_answered(cfg, name, say=False)
        if result is None:
            return None
        done.append(read_cells(result)[name])
    return done


# ---------------------------------------------------------------- the kept files
class Damaged(ValueError):
    """A file of RUN_DIR/target that does not hold what target wrote there; the message says how."""


def values_digest(values: list[float]) -> str:
    """What a value file's ``sha256`` is of: its values as JSON (floats round-trip exactly)."""
    import hashlib

    return hashlib.sha256(json.dumps(values).encode()).hexdigest()


def values_record(key: str, metric: str, values: list[float]) -> dict:
    """A value file's content: the key and metric it belongs to, the count and checksum of its values."""
    return {"key": key, "metric": metric, "n": len(values), "sha256": values_digest(values), "values": values}


def read_values(f: Path, key: str, metric: str, binary: bool) -> list[float]:
    """The values of RUN_DIR/target/values/<metric>/<key>.json, validated as they are read: JSON, an
    object whose ``values`` is a list of finite numbers (0 or 1 for an accuracy), of the key and the
    metric it is filed under, as many as its ``n`` says and matching its ``sha256`` (a file of an
    earlier version, without key, n or sha256, is checked for the rest). ``Damaged`` otherwise."""
    try:
        data = json.loads(f.read_text(encoding="utf-8"))
    except UnicodeDecodeError:
        raise Damaged("not UTF-8 text") from None
    except ValueError as e:
        raise Damaged(f"not JSON ({e}; cut short?)") from None
    if not isinstance(data, dict) or not isinstance(data.get("values"), list):
        raise Damaged("not an object with a list of values")
    vals = data["values"]
    for i, v in enumerate(vals):
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
            raise Damaged(f"value {i} is {v!r}, not a finite number")
        if binary and v not in (0, 1):
            raise Damaged(f"value {i} is {v!r}, but an accuracy item is 0 or 1")
    for field, want in (("key", key), ("metric", metric), ("n", len(vals))):
        if field in data and data[field] != want:
            raise Damaged(f"its {field} is {data[field]!r}, not {want!r}")
    if "sha256" in data and data["sha256"] != values_digest([float(v) for v in vals]):
        raise Damaged("its values do not match its sha256 (edited or damaged)")
    return [float(v) for v in vals]


def kept_file(f: Path, read, what: str):
    """``read(f)`` when f holds what target wrote; None when there is no f, or when f is damaged: then it
    is set aside (renamed ``f.damaged-N``, never deleted) with one warning, and recomputed."""
    if not f.exists():
        return None
    try:
        if not f.is_file():
            raise Damaged("not a file")
        return read(f)
    except (Damaged, OSError) as e:
        from ghostsearch.core.io import set_aside

        aside = set_aside(f)
        log.warning("target: %s is damaged (%s); set aside as %s, %s", f, e, aside.name, what)
        return None


def read_looks(f: Path) -> cert.Certification:
    """RUN_DIR/target/looks.json, validated (``certify.Certification``'s own keys and types)."""
    try:
        return cert.Certification.from_dict(json.loads(f.read_text(encoding="utf-8")))
    except (ValueError, TypeError, KeyError, AttributeError) as e:
        raise Damaged(f"not a certification target wrote ({str(e).splitlines()[0][:120]})") from None


def kept_block(res_path: Path) -> dict:
    """result.json's ``target`` block when result.json is an object holding one, else {} (result.json
    itself is checked by the run directory's checks; an unreadable one is not target's to set aside)."""
    try:
        data = json.loads(res_path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    block = data.get("target") if isinstance(data, dict) else None
    return block if isinstance(block, dict) else {}


class Bar:
    """A progress bar as a search's (``runner.Progress``: tqdm, its width following the terminal's, at most two
    redraws a second): ``update(n)``, or ``bar(items)`` counting each item as the next one is asked for (so the
    count is of items done, and tqdm's ETA follows). Closed on leaving a ``with``."""

    def __init__(self, total: int, desc: str, unit: str, enabled: bool = True):
        from tqdm.auto import tqdm

        self.tq = tqdm(total=total, desc=desc, unit=unit, disable=not enabled, dynamic_ncols=True, mininterval=0.5)

    def update(self, n: int = 1) -> None:
        self.tq.update(n)

    def __call__(self, items):
        for x in items:
            yield x
            self.tq.update(1)

    def __enter__(self) -> "Bar":
        return self

    def __exit__(self, *exc) -> None:
        self.tq.close()


# ---------------------------------------------------------------- the items
def draw_size(cfg: Config, p: Plan, held_out) -> int:
    """How many items the held-out draw has: the corpus's windows of eval.ppl_seq_len tokens (its
    tokenizer only, no model), or every eligible item of the tasks (``items.draw`` uncapped)."""
    if p.perplexity:
        from transformers import AutoTokenizer

        from ghostsearch.data import corpora as data
        from ghostsearch.evaluation.evaluate import corpus
        from ghostsearch.model.models import model_path

        path, extra = model_path(cfg.model)
        tok = AutoTokenizer.from_pretrained(path, trust_remote_code=cfg.trust_remote_code, **extra)
        _, ids = corpus(tok, p.perplexity, cfg.data_dir, tuple(held_out))
        return len(data.chunk_windows(ids, cfg.eval.ppl_seq_len, None))
    from ghostsearch.data.items import draw

    return len(draw(replace(cfg.eval, max_items=None), p.tasks, cfg.data_dir, tuple(held_out)).order)


def check_draw(cfg: Config, p: Plan, held_out, offset: int = 0) -> None:
    """target.looks' last look within the held-out draw (from ``offset`` on): one line before Ray, the
    search, the repair fits and the first look (issue 48: [8, 100000] was refused only at look 2)."""
    have = draw_size(cfg, p, held_out)
    if offset + p.looks[-1] > have:
        what = "windows" if p.perplexity else "items"
        fresh = f", {offset} of them read by earlier tests" if offset else ""
        raise GhostsearchError(
            f"target.looks ends at {p.looks[-1]} but the held-out draw has {have} {what}{fresh}; lower target.looks"
        )


class Values:
    """Per-item values of the dense model and of every k's repaired model on the first n items of one
    seeded draw, computed on demand (the model loaded and the repairs fitted at the first need),
    kept in RUN_DIR/target/values/<metric>/<eval_key>.json. A perplexity item is one window's mean
    per-token NLL; an accuracy item is 0/1 (acc) with its task. ``offset``: the draw read from that item
    on (a fresh try: RUN_DIR/target/account.json; its files are <eval_key>at<offset>.json)."""

    def __init__(
        self,
        cfg: Config,
        p: Plan,
        run_dir: Path,
        removed: dict[int, list[int]],
        held_out,
        progress: bool,
        offset: int = 0,
    ):
        from ghostsearch.study.compare import eval_key

        self.cfg, self.p, self.run_dir, self.removed, self.held_out = cfg, p, run_dir, removed, tuple(held_out)
        self.progress, self.offset = progress, offset
        self.dir = run_dir / "target" / "values" / p.metric
        self.dir.mkdir(parents=True, exist_ok=True)
        at = f"at{offset}" if offset else ""
        self.keys = {0: eval_key([], "none", cfg, held_out) + at}
        self.keys.update({k: eval_key(removed[k], p.method, cfg, held_out) + at for k in removed})
        self.values: dict[int, list[float]] = {}
        binary = not p.perplexity
        for k, key in self.keys.items():
            read = lambda f, key=key: read_values(f, key, p.metric, binary)  # noqa: E731
            self.values[k] = kept_file(self.dir / f"{key}.json", read, "its values recomputed") or []
        self.model: Any = None
        self.ops: dict[int, Any] = {}
        self.draw: Any = None
        self.computed = 0  # item values computed by this invocation (not read back)
        self.step: Any = None  # the look's bar: step(n) as n item values of one model are computed

    # the draw
    def items(self, n: int):
        """Perplexity: the first n windows of the seeded order; accuracy: the first n (task, doc) items
        (from ``offset`` on)."""
        if self.draw is None:
            self.draw = self._perplexity_draw() if self.p.perplexity else self._task_draw()
        if self.offset + n > len(self.draw):
            what = "windows" if self.p.perplexity else "items"
            fresh = f" (a fresh try starts after the {self.offset} items earlier tests read)" if self.offset else ""
            raise GhostsearchError(
                f"target.looks ends at {n} but the held-out draw has {len(self.draw)} {what}{fresh}; lower target.looks"
            )
        return self.draw[self.offset : self.offset + n]

    def _perplexity_draw(self):
        from ghostsearch.evaluation.evaluate import corpus, eval_windows

        self._load()
        assert self.p.perplexity is not None, "a perplexity draw of an accuracy target"
        _, ids = corpus(self.model[1], self.p.perplexity, self.cfg.data_dir, self.held_out)
        windows = eval_windows(ids, self.cfg.eval.ppl_seq_len, None)
        order = np.random.default_rng(self.cfg.eval.seed).permutation(len(windows))
        return windows[order]

    def _task_draw(self):
        from ghostsearch.data.items import run_draw

        return list(run_draw(self.cfg.eval, self.run_dir, self.p.tasks, self.cfg.data_dir, self.held_out).order)

    def strata(self, n: int) -> np.ndarray | None:
        if self.p.perplexity:
            return None
        return np.array([t for t, _ in self.items(n)])

    # the models
    def _load(self, ks: list[int] | None = None) -> None:
        """The model (once) and the repairs of ``ks`` (default: every k) not fitted yet, all of them on one
        dense pass over the repair calibration."""
        from ghostsearch.model.models import load_configured
        from ghostsearch.recovery.repair import fit_all

        t0 = time.monotonic()
        if self.model is None:
            log.info("target: loading the model for the repairs and the looks")
            self.model = load_configured(self.cfg)
        model, tok = self.model
        todo = [k for k in sorted(self.removed if ks is None else ks) if k not in self.ops]
        if not todo:
            return
        specs = [(self.removed[k], self.p.method) for k in todo]
        if self.p.method == "none":  # fit_all fits nothing (no calibration pass) for ``none``
            self.ops.update({k: ops for k, ops in zip(todo, fit_all(model, tok, specs, self.cfg))})
            return
        rec = self.cfg.recovery
        log.info(
            "target: fitting %s for k = %s (one dense pass over %d x %d repair tokens, then a fit per k)",
            self.p.method,
            todo,
            rec.n_seq,
            rec.seq_len,
        )
        # the bar counts fits as they end (fit_all asks for the next one): a count and an ETA, as a search's bar
        with Bar(len(todo), f"repair {self.p.method}", "fit", self.progress) as b:
            fitted = fit_all(model, tok, b(specs), self.cfg)
        self.ops.update({k: ops for k, ops in zip(todo, fitted)})
        log.info("target: %s fitted for k = %s in %.1f s", self.p.method, todo, time.monotonic() - t0)

    def ensure(self, ks: list[int], n: int) -> None:
        """Brings the models ``ks`` (0: dense) to the first n items, computing the missing ones together,
        ``CHUNK`` items at a time, each chunk kept as it ends (an interrupted look resumes from there)."""
        while True:
            todo = [k for k in ks if len(self.values[k]) < n]
            if not todo:
                return
            self._load()
            lo = min(len(self.values[k]) for k in todo)
            hi = min(n, lo + CHUNK)
            todo = [k for k in todo if len(self.values[k]) < hi]
            t0 = time.monotonic()
            look = f"look {self.p.looks.index(n) + 1}/{len(self.p.looks)}" if n in self.p.looks else f"to {n}"
            names = ", ".join("dense" if k == 0 else f"k={k}" for k in todo)
            unit = "window" if self.p.perplexity else "item"
            shown = self.progress and bool(self.p.perplexity)  # an accuracy's items: zero_shot_finalists' own bars
            with Bar((hi - lo) * len(todo), f"{look} ({n} {unit}s): {names}", unit, shown) as b:
                self.step = b.update
                new = self._compute(todo, lo, hi)
            self.step = None
            for k, vals in zip(todo, new):
                have = len(self.values[k])
                self.values[k] = self.values[k] + vals[have - lo :]
                write_json_atomic(
                    self.dir / f"{self.keys[k]}.json", values_record(self.keys[k], self.p.metric, self.values[k])
                )
            self.computed += sum(hi - lo for _ in todo)
            log.info(
                "target: %s %d..%d of %d for %s in %.1f s",
                "windows" if self.p.perplexity else "items",
                lo,
                hi,
                n,
                ", ".join("dense" if k == 0 else f"k={k}" for k in todo),
                time.monotonic() - t0,
            )

    def _compute(self, ks: list[int], lo: int, n: int) -> list[list[float]]:
        finalists = [((), None) if k == 0 else (tuple(self.removed[k]), self.ops[k]) for k in ks]
        return self._nll(finalists, lo, n) if self.p.perplexity else self._correct(finalists, lo, n)

    def _nll(self, finalists, lo: int, n: int) -> list[list[float]]:
        """Each window's mean per-token NLL, numbered by its position in the draw (every window its
        own request number, across micro-batches)."""
        import torch

        from ghostsearch.evaluation.native import GIB, loglikelihoods_finalists, plans, window_items
        from ghostsearch.model.stack import Stack

        model, _ = self.model
        stack, bs = Stack(model), max(1, self.cfg.eval.batch_size)
        windows = self.items(n)[lo:n]
        lls = torch.zeros(len(finalists), len(windows), dtype=torch.float64)
        on_step = (lambda f, rows: self.step(rows)) if self.step else None
        for s in range(0, len(windows), bs):  # a micro-batch at a time, so that the look's bar moves as it goes
            rows = window_items(windows[s : s + bs])
            batch = [replace(r, req=[s + i] * len(r.req)) for i, r in enumerate(rows)]
            got, _ = loglikelihoods_finalists(
                stack, [batch], len(windows), plans(stack, finalists), self.cfg.eval.cache_gib * GIB, on_step=on_step
            )
            lls += got  # each window's slot is its own: the other slots of ``got`` are 0
        tokens = windows.shape[1] - 1
        return [(-ll.double() / tokens).tolist() for ll in lls]

    def _correct(self, finalists, lo: int, n: int) -> list[list[float]]:
        from ghostsearch.evaluation.evaluate import zero_shot_finalists

        model, tok = self.model
        want = self.items(n)[lo:n]
        by_task: dict[str, list[int]] = {}
        for t, d in want:
            by_task.setdefault(t, []).append(d)
        _, rows = zero_shot_finalists(
            model, tok, finalists, self.cfg.eval, self.cfg.data_dir, self.held_out, self.progress, by_task
        )
        got = [
            {(r.task, r.doc): float(r.pred == r.gold) for r in rows if r.finalist == f} for f in range(len(finalists))
        ]
        return [[g[it] for it in want] for g in got]

    def sample(self, k: int, n: int) -> cert.Sample:
        """k's paired differences on the first n items: dense minus pruned accuracy, or pruned minus
        dense NLL (a larger value is a larger drop)."""
        self.ensure([0, k], n)
        dense, pruned = np.array(self.values[0][:n]), np.array(self.values[k][:n])
        diff = pruned - dense if self.p.perplexity else dense - pruned
        return cert.Sample(diff, self.strata(n), binary=not self.p.perplexity)


# ---------------------------------------------------------------- outputs
def shown(p: Plan, x: float | None) -> str:
    """A drop on the metric's scale: a ratio for a perplexity, an accuracy difference otherwise."""
    if x is None or math.isnan(x):
        return "n/a"
    return f"{math.exp(x):.4f}" if p.perplexity else f"{x:.4f}"


def target_value(cfg: Config, p: Plan) -> str:
    q = cfg.target.quality
    return f"{q.max_ratio:g}" if p.perplexity else f"{q.max_drop:g}"


def sentence(cfg: Config, p: Plan, c: cert.Certification, tries_left: int = 0) -> str:
    """The command's last line. ``c`` is the answer's certification (the family's chosen repair, whose
    own level is the family's share); the level shown is target.level, which the account holds over
    every test of this run directory. A failure names only next steps that keep it (docs/target.md)."""
    what = f"{p.metric} ratio" if p.perplexity else f"{p.metric} drop"
    level, risk = f"{cfg.target.level:g}", f"{1 - cfg.target.level:.2g}"
    how = p.method if len(p.repairs) <= 1 else f"any of {', '.join(p.repairs)} (one family)"
    tail = (
        f"P(true drop > target) <= {risk}, together with every test this run directory's account holds, for this "
        "repair fit and these data."
    )
    failed = (
        f"k={c.first_failed_k} failed (est {shown(p, c.first_failed_estimate)}, upper bound "
        f"{shown(p, c.first_failed_upper)})"
        if c.first_failed_k is not None
        else f"every k judged ({', '.join(map(str, p.ks))}) passed"
    )
    if c.certified_k == 0:
        stop = next((v.stop for v in c.ks if v.k == c.first_failed_k), None)
        if tries_left:
            then = (
                f"{tries_left} of target.tries={cfg.target.tries} left: another repair, target or looks is a new try "
                "(target.rerun: fresh to read items no test read)."
            )
        elif stop == "futility":
            then = (
                "It stopped early for futility, its level not all spent: target.rerun: continue runs its later looks."
            )
        else:
            then = (
                "The level is spent on these items: testing them again would not keep it; before a first test, "
                "target.tries: N leaves room for N tests (each at level/N), or name the repairs together."
            )
        return (
            f"Not certified: no k meets {what} <= {target_value(cfg, p)} at level {level} with {how}; {failed}. {then}"
        )
    return (
        f"Certified: remove k={c.certified_k} blocks {c.removed} with {p.method}; {what} {shown(p, c.estimate)} "
        f"({level} upper bound {shown(p, c.upper)}) <= target {target_value(cfg, p)}; {failed}. {tail}"
    )


def params_sentence(p: Plan, c: cert.Certification, kept: int, total: int) -> str:
    v = c.ks[0]
    what = f"{p.metric} ratio" if p.perplexity else f"{p.metric} drop"
    return (
        f"Parameters: remove k={v.k} blocks {v.removed} with {p.method} to keep {kept:,} of {total:,} parameters "
        f"({kept / total:.1%}); {what} {shown(p, v.estimate)} ({c.level:g} upper bound {shown(p, v.upper)}) on "
        f"{v.items} items."
    )


def speedup_sentence(p: Plan, c: cert.Certification, timed: dict) -> str:
    v = c.ks[0]
    what = f"{p.metric} ratio" if p.perplexity else f"{p.metric} drop"
    return (
        f"Speed-up: remove k={v.k} blocks {v.removed} with {p.method} for {timed['measured'][str(v.k)]:.2f}x "
        f">= {timed['asked']:g}x measured (the lesser of prefill and decode at batch {timed['batch']}); {what} "
        f"{shown(p, v.estimate)} ({c.level:g} upper bound {shown(p, v.upper)}) on {v.items} items."
    )


def report_md(cfg: Config, p: Plan, block: dict) -> str:
    lines = [
        "# ghostsearch target",
        "",
        f"**{block['statement']}**",
        "",
        f"Target: {p.metric} {'ratio' if p.perplexity else 'drop'} <= {target_value(cfg, p)} at level "
        f"{block['level']:g} (one-sided; fixed-sequence over k, {block['spending']} looks at {block['looks']} "
        f"items per model; docs/target.md). Repair: {p.method}, fitted on the repair calibration (never evaluated).",
        "",
        "| k | removed | estimate | upper bound | items | looks | verdict |",
        "|---|---|---|---|---|---|---|",
    ]
    for v in block["ks"]:
        lines.append(
            f"| {v['k']} | {v['removed']} | {shown(p, v['estimate'])} | {shown(p, v['upper'])} | {v['items']} | "
            f"{v['looks']} | {v['stop']} |"
        )
    lines += ["", "Estimates and bounds are on the metric's scale (a perplexity: the ratio pruned / dense)."]
    speed = block.get("speed")
    if isinstance(speed, dict) and speed.get("rows"):
        lines += ["", "## Measured speed (dense and the certified model, one process, interleaved)", ""]
        lines += ["| model | params | prefill speed-up | decode speed-up | ideal |", "|---|---|---|---|---|"]
        for r in speed["rows"]:
            th = {t["phase"]: t for t in r.get("throughput", [])}
            pre, dec = th.get("prefill", {}), th.get("decode", {})
            lines.append(
                f"| {r['label']} | {r['params']:,} | {pre.get('speedup', float('nan')):.3f} | "
                f"{dec.get('speedup', float('nan')):.3f} | {r['ideal_speedup']:.3f} |"
            )
    elif speed:
        lines += ["", f"Speed: {speed}"]
    return "\n".join(lines) + "\n"


def measure(model_ops, removed: list[int], method: str, progress: bool = False) -> dict | str:
    """The certified model's measured speed beside the dense one (``speed.measure_speed``), or why not;
    ``progress``: a bar of its rounds."""
    try:
        from ghostsearch.evaluation import speed
    except ImportError:
        return "not measured: ghostsearch.evaluation.speed is not available in this version"
    model, ops = model_ops
    try:
        with Bar(SPEED_REPEATS, f"speed k={len(removed)} beside dense", "round", progress) as b:
            rep = speed.measure_speed(
                model,
                [] if ops is not None else [removed],  # the certified model as deployed: repaired when it is
                [ops] if ops is not None else [],
                batches=(1,),
                seq_len=SPEED_SEQ_LEN,
                decode_tokens=SPEED_DECODE,
                repeats=SPEED_REPEATS,
                progress=lambda line: b.update(),
            )
    except GhostsearchError as e:
        return f"not measured: {e}"
    return rep.to_dict()


# ---------------------------------------------------------------- a finished run
def config_key(cfg: Config) -> str:
    """What a target block depends on: the whole config but ``out`` (the search, its calibration,
    the repair, the evaluation, the target, the pool's threads), hashed."""
    import hashlib

    d = cfg.to_dict()
    d.pop("out", None)
    return hashlib.sha256(json.dumps(d, sort_keys=True, default=str).encode()).hexdigest()[:16]


def answered(cfg: Config, ecfg: Config, p: Plan) -> dict | None:
    """result.json's target block when RUN_DIR answers this rerun without any work: every search
    cell answered as ``runner.answered`` checks a search (same search config, the answer in
    result.json and in the ledger, the same model content, dtype and threads), the block written by
    this config (``config_key``), every value file it read holding at least the items it used, and
    the speed measured (or nothing certified). None otherwise: the usual path (Ray, the ledger's
    replay, the kept values) then runs and says what is wrong, if anything is."""
    out = Path(cfg.out).expanduser()
    if "://" in str(cfg.out) or cfg.pool.name or not (out / "result.json").is_file():
        return None
    try:
        block = json.loads((out / "result.json").read_text()).get("target")
        if not isinstance(block, dict) or block.get("config_key") != config_key(cfg):
            return None
        if searched(ecfg, p.ks) is None:
            return None
        keys, need = block["values"], {"0": block["items_used"]}
        need.update({str(v["k"]): v["items"] for v in block["ks"] if v["items"]})
        for k, n in need.items():
            key = keys[k]
            if not isinstance(key, str) or not key.isalnum() or not isinstance(n, int):
                return None  # not a key eval_key wrote: never a path to follow
            f = out / "target" / "values" / p.metric / f"{key}.json"
            if len(read_values(f, key, p.metric, binary=not p.perplexity)) < n:
                return None  # a damaged file is set aside and recomputed by the usual path
        best = block["certified_k"] if p.params_k is None else p.params_k
        if best and not isinstance(block.get("speed"), dict):
            return None  # measured again by the usual path
    except (OSError, ValueError, KeyError, TypeError, AttributeError):  # Damaged is a ValueError
        return None
    log.info(
        "%s already holds this target's answer and every value it used; returned without starting Ray or "
        "loading the model (delete its result.json to rerun it)",
        out,
    )
    return block


# ---------------------------------------------------------------- the command
def target(cfg: Config, address: str | None = None, progress: bool = True) -> dict:
    """`ghostsearch target`: search, repair, certify; returns result.json's ``target`` block. A rerun
    that RUN_DIR fully answers returns its block at once (``answered``)."""
    from ghostsearch.config import check_model_fit, check_repairs
    from ghostsearch.run.runner import Run

    n_blocks = check_model_fit(cfg)
    p = plan(cfg, n_blocks)
    check_repairs(cfg, "target.recovery", list(p.repairs))  # before the parameter count or the speed is measured
    total = None
    if cfg.target.params is not None:
        kept_k, total = params_resolved(cfg, n_blocks)
        p = replace(p, ks=[kept_k], params_k=kept_k)
    timed = None
    if cfg.target.speedup is not None:
        timed = speedup_resolved(cfg, n_blocks)
        p = replace(p, ks=[timed["k"]], params_k=timed["k"])
    req = account_request(cfg, p)
    local = "://" not in str(cfg.out)
    decision = account.plan(account.read(Path(cfg.out).expanduser()), req) if local else None  # before any work
    ecfg = eval_cfg(cfg, p, decision.offset if decision else 0)
    finished = answered(cfg, ecfg, p)
    if finished is not None:
        return finished
    t0 = time.monotonic()
    repair = any(r != "none" for r in p.repairs)
    offset = decision.offset if decision else 0
    done = searched(ecfg, p.ks)  # RUN_DIR answers the search: no Ray, no pool
    if done is not None:
        log.info(
            "%s already holds the search's answer (%s) and its evaluations: no Ray started, the sets read from "
            "its ledger",
            Path(cfg.out).expanduser(),
            ", ".join(f"{r.cell}: {r.value:.6g}" for r in done),
        )
    run = Run(  # the draw checked before Ray, the search and the fits
        ecfg,
        "target",
        cells(ecfg, p.ks),
        address=address,
        evaluate=True,
        repair=repair,
        check_data=lambda data: check_draw(ecfg, p, data.held_out, offset),
        pool=done is None,
    )
    with run:
        ledger = account.read(run.dir)
        if decision is None:  # a remote out: its account is read where the run keeps its files
            decision = account.plan(ledger, req)
            ecfg = eval_cfg(cfg, p, decision.offset)
        res_path = run.dir / "result.json"
        before = kept_block(res_path)  # a rerun's: kept in result.json until this run's replaces it
        kept_file(run.dir / "target" / "looks.json", read_looks, "written again after the looks")
        removed, results = search_sets(ecfg, run, p.ks, progress, done)
        if before:  # result.json rewritten: cells, data, and a finished target block until this run's replaces it
            run.finish(results, target=before)
        else:
            run.finish(results)
        run.disconnect()  # the pool's CPUs free for the evaluation here
        looks_file = run.dir / "target" / "looks.json"
        family: dict[str, tuple[cert.Certification, Values]] = {}
        model = None
        for r in p.repairs:  # one family: each repair at alpha / (tries x repairs), the model loaded once
            pr = replace(p, method=r)
            vr = Values(
                eval_cfg(cfg, pr, decision.offset),
                pr,
                run.dir,
                removed,
                run.data_plan.held_out,
                progress,
                decision.offset,
            )
            vr.model = model
            cr = cert.certify(
                p.ks,
                removed,
                vr.sample,
                p.looks,
                p.delta,
                1 - decision.alpha,
                cfg.target.spending,
                metric=p.metric,
                futility=p.params_k is None,
                fixed=decision.fixed.get(r),
            )
            family[r] = (cr, vr)
            model = vr.model
        chosen = max(p.repairs, key=lambda r: (family[r][0].certified_k, -(family[r][0].upper or math.inf)))
        c, values = family[chosen]
        p = replace(p, method=chosen)
        ledger = account.record(
            ledger,
            req,
            decision,
            max(x.items_used() for x, _ in family.values()),
            {r: x for r, (x, _) in family.items()},
            c.certified_k,
        )
        account.write(run.dir, ledger)
        tries_left = ledger["tries"] - sum(t.metric == p.metric for t in ledger["tests"])
        write_json_atomic(looks_file, c.to_dict())
        if timed is not None:
            statement = speedup_sentence(p, c, timed)
        elif p.params_k is not None:
            values._load([p.params_k])
            total, kept = count_params(values.model[0], removed[p.params_k])
            statement = params_sentence(p, c, kept, total)
        else:
            statement = sentence(cfg, p, c, tries_left)
        best = c.certified_k if p.params_k is None else p.params_k
        speed: dict | str = "not measured: nothing certified"
        if (
            best
            and isinstance(before.get("speed"), dict)
            and isinstance(before["speed"].get("rows"), list)
            and (before.get("removed"), before.get("recovery"))
            == (
                removed[best],
                p.method,
            )
        ):
            speed = before["speed"]  # a rerun: measured before, for the same model
        elif best:
            log.info("target: %s; measuring the speed of k=%d beside the dense model", statement.split(";")[0], best)
            values._load([best])
            speed = measure((values.model[0], values.ops.get(best)), removed[best], p.method, progress)
        block = {
            "statement": statement,
            "metric": p.metric,
            "target": {"max_ratio": cfg.target.quality.max_ratio}
            if p.perplexity
            else {"max_drop": cfg.target.quality.max_drop},
            "delta": p.delta,
            "scale": "log of the perplexity ratio (mean per-token NLL, pruned minus dense)"
            if p.perplexity
            else "accuracy, dense minus pruned",
            "level": cfg.target.level,
            "level_each": 1 - decision.alpha,  # each repair's: target.level's alpha / (tries x repairs)
            "recovery": p.method,
            "repairs": list(p.repairs),
            "family": {
                r: {"certified_k": x.certified_k, "upper": x.upper, "first_failed_k": x.first_failed_k}
                for r, (x, _) in family.items()
            },
            "account": {
                "tries": ledger["tries"],
                "tries_left": tries_left,
                "items_from": decision.offset,
                "note": decision.note,
            },
            "certified_k": c.certified_k,
            "removed": removed[best] if best else [],
            "estimate": c.estimate,
            "upper": c.upper,
            "estimate_shown": shown(p, c.estimate),
            "upper_shown": shown(p, c.upper),
            "items_used": c.items_used(),
            "first_failed_k": c.first_failed_k,
            "first_failed_estimate": c.first_failed_estimate,
            "first_failed_upper": c.first_failed_upper,
            "looks": p.looks,
            "spending": c.spending,
            "bounds": c.bounds,
            "ks": [v.to_dict() for v in c.ks],
            "path": {str(k): v for k, v in removed.items()},
            "items_computed_now": values.computed,
            "wall_seconds": round(time.monotonic() - t0, 1),
            "speed": speed,
            "config_key": config_key(cfg),  # what a rerun is answered for (``answered``)
            "values": {str(k): key for k, key in values.keys.items()},  # RUN_DIR/target/values/<metric>/<key>.json
        }
        if timed is not None:
            block["speedup"] = timed
        elif p.params_k is not None:
            block["params"] = {"asked": cfg.target.params, "k": p.params_k, "total": total}
        write_json_atomic(res_path, {**json.loads(res_path.read_text()), "target": block})
        write_text_atomic(run.dir / "report.md", report_md(cfg, p, block))
        return block


def count_params(model, removed: list[int]) -> tuple[int, int]:
    """(the dense model's parameters, those left with ``removed`` blocks deleted): exact, tied weights once."""
    from ghostsearch.model.stack import Stack

    stack = Stack(model)
    total = sum(p.numel() for p in model.parameters())
    return total, total - sum(p.numel() for i in removed for p in stack.blocks[i].parameters())


def speedup_resolved(cfg: Config, n_blocks: int) -> dict:
    """target.speedup -> the least k whose measured speed-up reaches it (``speed.speedup_k``: dense and
    stand-in pruned models timed together in this process, before the search), as a record for
    result.json's ``speedup``: asked, k, batch, each timed k's speed-up (the lesser of prefill and
    decode) and the timing report. A rerun of the same config reads the record back from result.json
    (the timing is noisy: a second timing could resolve another k for the same run)."""
    from ghostsearch.config import protected_blocks
    from ghostsearch.evaluation import speed
    from ghostsearch.model.models import load_configured

    kept = recorded(cfg, "speedup")
    if kept is not None:
        return kept
    model, _ = load_configured(cfg)
    free = sorted(set(range(n_blocks)) - set(protected_blocks(cfg, n_blocks)))
    asked = float(cfg.target.speedup)  # type: ignore[arg-type]
    log.info("target: timing the dense model beside pruned ones to resolve target.speedup=%g", asked)
    k, rep = speed.speedup_k(model, asked, free, batch=1, progress=log.info)
    measured = {}
    for r in rep.rows[1:]:
        pre, dec = r.at("prefill", 1), r.at("decode", 1)
        if pre is not None and dec is not None:
            measured[str(r.k)] = min(pre.speedup, dec.speedup)
    log.info("target: speed-up %gx first reached at k=%d (%s)", asked, k, speed.speed_table(rep))
    return {"asked": asked, "k": k, "batch": 1, "measured": measured, "timing": rep.to_dict()}


def recorded(cfg: Config, key: str) -> dict | None:
    """result.json's ``target.<key>`` record (``speedup`` or ``params``) when this config wrote it
    (``config_key``), else None: what a rerun reads back instead of timing or counting again."""
    block = kept_block(Path(cfg.out).expanduser() / "result.json")
    rec = block.get(key)
    if block.get("config_key") != config_key(cfg) or not isinstance(rec, dict):
        return None
    k = rec.get("k")
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        return None  # not a k: resolved again
    if key == "speedup":
        measured = rec.get("measured")
        if (
            not isinstance(measured, dict)
            or not all(isinstance(v, (int, float)) and math.isfinite(v) for v in measured.values())
            or not isinstance(measured.get(str(k)), (int, float))
            or rec.get("asked") != cfg.target.speedup
        ):
            return None
    return rec


def params_resolved(cfg: Config, n_blocks: int) -> tuple[int, int]:
    """target.params -> (k, the dense total): read back from result.json when this config resolved it
    before (so a rerun that RUN_DIR answers loads no model), else counted (``params_k``)."""
    kept = recorded(cfg, "params")
    if kept is not None and isinstance(kept.get("k"), int) and isinstance(kept.get("total"), int):
        return kept["k"], kept["total"]
    assert cfg.target.params is not None, "params_resolved is for a config with target.params"
    return params_k(cfg, cfg.target.params, n_blocks)


def params_k(cfg: Config, asked: float, n_blocks: int) -> tuple[int, int]:
    """target.params (a fraction < 1 of the dense model's parameters, or a count) -> the least k whose
    pruned model keeps at most that many (exact counting over the model's blocks; SmolLM2's blocks are
    all alike, so every k-set counts the same); and the dense total."""
    from ghostsearch.config import protected_blocks
    from ghostsearch.model.models import load_configured
    from ghostsearch.model.stack import Stack

    model, _ = load_configured(cfg)
    stack = Stack(model)
    total = sum(p.numel() for p in model.parameters())
    per = sorted((sum(p.numel() for p in stack.blocks[i].parameters()), i) for i in range(n_blocks))
    free = set(range(n_blocks)) - set(protected_blocks(cfg, n_blocks))
    goal = asked * total if asked < 1 else asked
    removed, left = 0, total
    for size, i in sorted(per, reverse=True):
        if left <= goal:
            break
        if i in free:
            left -= size
            removed += 1
    if left > goal:
        raise GhostsearchError(f"target.params={asked}: even removing every free block keeps {left:,} parameters")
    if removed == 0:
        raise GhostsearchError(f"target.params={asked}: the dense model ({total:,}) already keeps that many; ask fewer")
    return removed, total
