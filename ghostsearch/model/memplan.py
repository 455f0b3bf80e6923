"""The memory plan of one scorer actor, before any weight is loaded.

From the model's config alone (``AutoConfig``; parameters counted on the ``meta`` device, so
exact for any family, no weights) and the run's config, the peak memory per actor and per device:

- weights: parameters x bytes of the dtype (a tied head split away from the embeddings is a copy);
- the dense cache: n_seq x seq_len x hidden x bytes per kept boundary ({i : i % cache.every == 0}
  plus the final state), on the device of its block, or on the host with ``cache.offload``;
- prefix runs (greedy, beam): an accepted set's states from its first removed block to L, every
  boundary, at most ``cache.prefix_runs`` of them (counted at their bound, L + 1 boundaries each);
- preparation: one micro-batch's full state list (L + 1 states) while it is captured;
- activations of one block on one micro-batch (hidden, q/k/v/o, the MLP's intermediate, and the
  attention scores where the attention kernel materialises them: on CPU, not on CUDA);
- the LM-head chunk: ``objective_params.head_chunk`` tokens x vocabulary fp32 logits, x2.5: the
  logits, their log-softmax, and what the allocator still holds between chunks (fitted to the
  measured peaks of SmolLM2 and of Gemma-3-270M's shape on CPU, tests/model/test_memplan.py).

``check_fit`` fails in one line, before loading, when the peak is above ``pool.memory_share`` of
a device, naming the numbers and the fixes; it resolves ``cache.every: auto`` to the densest cache
that fits. On CPU the device is this machine's RAM shared by the local actors (or
``pool.device_memory_gib``).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, cast

from ghostsearch.core.errors import GhostsearchError

GiB = float(1 << 30)
BYTES = {"float32": 4, "fp32": 4, "bfloat16": 2, "bf16": 2, "float16": 2, "fp16": 2}


@dataclass
class Shape:
    """What the plan needs of a model: sizes and exact parameter counts (from its config)."""

    n_blocks: int
    hidden: int
    intermediate: int
    heads: int
    kv_heads: int
    head_dim: int
    vocab: int
    tied: bool
    params: int  # every parameter (a tied head counted once)
    embed_params: int
    block_params: list[int]
    head_params: int  # final norm + LM head (0 for the head's weight when tied)
    context: int | None = None

    @property
    def head_weight(self) -> int:
        return self.vocab * self.hidden


# configs of hub models ghostsearch ships for ``plan`` (configs/models/<hub id>/config.json in a clone):
# found for the id they describe, offline, before any hub is asked
MODEL_CONFIGS = Path(__file__).resolve().parents[2] / "configs" / "models"


def shipped_config(spec: str) -> Path | None:
    """The directory of the config shipped for hub id ``spec`` (``org/name``), or None: a local path,
    a built-in name, or an id with no shipped config."""
    if spec.startswith((".", "/", "~")) or spec.count("/") != 1 or Path(spec).expanduser().exists():
        return None
    d = MODEL_CONFIGS / spec
    return d if (d / "config.json").is_file() else None


def read_config(spec: str, trust_remote_code: bool = False, hub: bool = False):
    """The model's config, no weights: a config JSON file, a directory holding config.json, the
    config shipped in configs/models/ for a hub id (``shipped_config``; not with ``hub``), or what
    ``model=`` names (built-in, hub id, GGUF): the hub is asked only for an id with no shipped config,
    or with ``hub`` (``plan --model-config hub``)."""
    from transformers import AutoConfig

    p = Path(spec).expanduser()
    shipped = None if hub else shipped_config(spec)
    try:
        if p.is_file() and p.suffix == ".json":
            d = json.loads(p.read_text())
            return AutoConfig.for_model(d.pop("model_type"), **d)
        if p.is_dir() or shipped is not None:
            return AutoConfig.from_pretrained(str(shipped or p), trust_remote_code=trust_remote_code)
        from ghostsearch.data.corpora import offline
        from ghostsearch.model.models import model_path

        path, _ = model_path(spec)
        # no hub here: read only what is cached, at once, instead of the hub client's retries (~25 s)
        return AutoConfig.from_pretrained(path, trust_remote_code=trust_remote_code, local_files_only=offline())
    except GhostsearchError:
        raise
    except Exception as e:  # noqa: BLE001  (a missing file, an offline hub, a bad JSON)
        raise GhostsearchError(
            f"cannot read the config of model {spec!r}: {str(e).splitlines()[0][:160]}; "
            "give a model directory or its config.json (plan --model-config), or add one to configs/models/"
        ) from None


def shape_of(config) -> Shape:
    """Sizes from the config; parameter counts from the model built on the meta device."""
    from ghostsearch.model.models import on_meta
    from ghostsearch.model.stack import Stack

    model = on_meta(config)

    stack = Stack(model)
    c = getattr(config, "text_config", None) or config
    emb = model.get_input_embeddings()
    tied = stack.lm_head.weight is emb.weight

    def count(m):
        return sum(p.numel() for p in m.parameters())

    heads = int(c.num_attention_heads)
    head_dim = int(getattr(c, "head_dim", None) or c.hidden_size // heads)
    return Shape(
        n_blocks=stack.n_blocks,
        hidden=int(c.hidden_size),
        intermediate=int(c.intermediate_size),
        heads=heads,
        kv_heads=int(getattr(c, "num_key_value_heads", None) or heads),
        head_dim=head_dim,
        vocab=int(c.vocab_size),
        tied=bool(tied),
        params=count(model),
        embed_params=count(emb),
        block_params=[count(b) for b in stack.blocks],
        head_params=count(stack.norm) + (0 if tied else count(stack.lm_head)),
        context=getattr(c, "max_position_embeddings", None),
    )


@dataclass
class Plan:
    """Bytes per actor (``parts``) and the peak on its busiest device (``device_peak``)."""

    parts: dict
    per_device: dict  # label -> peak bytes on that device
    host: float  # bytes on the host (offloaded cache)
    device_bytes: float  # one device's memory
    share: float
    every: int
    notes: list = field(default_factory=list)

    @property
    def peak(self) -> float:
        return sum(self.per_device.values())

    @property
    def device_peak(self) -> float:
        return max(self.per_device.values())

    @property
    def fits(self) -> bool:
        return self.device_peak <= self.share * self.device_bytes

    def line(self) -> str:
        p = self.parts
        return (
            f"{self.device_peak / GiB:.2f} GiB on the busiest of {len(self.per_device)} device(s) "
            f"(weights {p['weights'] / GiB:.2f}, cache {p['cache'] / GiB:.2f}, prefix runs "
            f"{p['prefix_runs'] / GiB:.2f}, working {p['working'] / GiB:.2f} GiB in all) against "
            f"{self.share:.0%} of {self.device_bytes / GiB:.1f} GiB"
        )


class PoolShape(Protocol):
    """What the plan reads of the ``pool`` section: actors, their devices and their share of one."""

    actors: int
    gpus_per_actor: float | None
    device_map: list[str] | None
    device_memory_gib: float | None
    memory_share: float


class CacheShape(Protocol):
    """What the plan reads of the ``cache`` section."""

    every: int | str
    prefix_runs: int
    offload: bool


class GridNames(Protocol):
    """What the plan reads of the ``compare`` section: the grid's searchers, objectives and ks."""

    searchers: list[str] | None
    objectives: list[str] | None
    ks: list[int] | None


class SearchParams(Protocol):
    """What the plan reads of the ``search`` section: a searcher's own parameters."""

    def searcher_settings(self, name: str) -> tuple[dict, float | None]: ...


class Sizes(Protocol):
    n_seq: int
    seq_len: int
    micro_batch: int


class CalibrationSizes(Protocol):
    """What the plan reads of the ``calibration`` section: each objective's sizes, the micro-batch."""

    micro_batch: int

    def for_objective(self, objective: str) -> Sizes: ...


class MemorySettings(Protocol):
    """What the memory plan reads of a run's settings (``config.Config`` is one; ``fixes`` tries
    variants of it with ``dataclasses.replace``)."""

    model: str
    trust_remote_code: bool
    dtype: str
    objective: str
    objective_params: dict
    searcher: str
    k: int

    @property
    def pool(self) -> PoolShape: ...

    @property
    def cache(self) -> CacheShape: ...

    @property
    def compare(self) -> GridNames: ...

    @property
    def search(self) -> SearchParams: ...

    @property
    def calibration(self) -> CalibrationSizes: ...

    def resolved_device(self) -> str: ...

    def device_map(self) -> list[str] | None: ...


def device_memory(cfg: MemorySettings) -> float:
    """Bytes of one device: pool.device_memory_gib, the GPU's (times pool.gpus_per_actor when it is a
    fraction), or on CPU this machine's RAM shared by the pool's local actors."""
    if cfg.pool.device_memory_gib:
        return cfg.pool.device_memory_gib * GiB
    dev = cfg.resolved_device()
    if dev.startswith("cuda"):
        import torch

        if torch.cuda.is_available():  # actors sharing a GPU (pool.gpus_per_actor < 1) get their share of it
            g = cfg.pool.gpus_per_actor
            return float(torch.cuda.get_device_properties(0).total_memory) * (g if g and g < 1 else 1.0)
        raise GhostsearchError("device=cuda but no GPU is visible here; set pool.device_memory_gib to plan for one")
    ram = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    return ram / max(1, cfg.pool.actors)


def dtype_bytes(cfg: MemorySettings) -> int:
    from ghostsearch.model.models import resolve_dtype

    dev = (cfg.device_map() or [cfg.resolved_device()])[0]
    return BYTES[str(resolve_dtype(cfg.dtype, dev)).replace("torch.", "")]


def n_devices(cfg: MemorySettings) -> int:
    if cfg.pool.device_map:
        return len(cfg.pool.device_map)
    g = cfg.pool.gpus_per_actor
    return int(g) if g and g > 1 else 1


def prefix_runs(cfg: MemorySettings, searchers, ks) -> int:
    """Prefix runs an actor may hold, as each searcher states it (``Searcher.prefix_runs``: greedy
    keeps each accepted prefix, beam width x that; 0 for a searcher without a prefix)."""
    from ghostsearch.search.base import get_searcher

    n = 0
    for s in searchers:
        try:
            cls = get_searcher(s)
        except GhostsearchError:  # registered in the driver only (SEARCHERS.add): unknown in an actor
            continue  # counted as no prefix, as before traits (the driver's plan checked the config)
        params = cfg.search.searcher_settings(s)[0]
        n = max(n, cls.prefix_runs(cls.parse_params(params), max(ks)))
    return min(n, cfg.cache.prefix_runs)


def plan_memory(
    cfg: MemorySettings, shape: Shape, every: int | None = None, objective: str | None = None, searchers=None, ks=None
) -> Plan:
    """The memory plan of one actor of ``cfg`` for ``shape`` (``every``: a cache.every to try)."""
    from ghostsearch.model.placement import split_blocks

    b = dtype_bytes(cfg)
    L, C = shape.n_blocks, shape.hidden
    if every is None:
        every = 1 if cfg.cache.every == "auto" else int(cfg.cache.every)
    objs = [objective] if objective else list(dict.fromkeys([cfg.objective] + list(cfg.compare.objectives or [])))
    cals = [cfg.calibration.for_objective(o) for o in objs]
    rows_tokens = max(c.n_seq * c.seq_len for c in cals)  # rows x tokens of the largest calibration
    m = max(min(c.micro_batch, c.n_seq) for c in cals)
    T = max(c.seq_len for c in cals)
    searchers = searchers or list(cfg.compare.searchers or [cfg.searcher])
    ks = ks or list(cfg.compare.ks or [cfg.k])
    nd = n_devices(cfg)
    idx = (
        split_blocks(L, nd, (shape.embed_params, shape.block_params[0], shape.head_params + shape.head_weight))
        if nd > 1
        else [0] * L
    )
    labels = list(range(nd))
    state = rows_tokens * C * b  # one boundary, every calibration row
    kept = sorted({i for i in range(L + 1) if i % every == 0} | {L})
    dev_of = [idx[i] if i < L else idx[-1] for i in range(L + 1)]
    weights = {d: 0.0 for d in labels}
    weights[0] += shape.embed_params * b
    for i in range(L):
        weights[idx[i]] += shape.block_params[i] * b
    head = shape.head_params + (shape.head_weight if shape.tied and idx[-1] != 0 else 0)
    weights[idx[-1]] += head * b
    cache = {d: 0.0 for d in labels}
    host = 0.0
    for i in kept:
        if cfg.cache.offload:
            host += state
        else:
            cache[dev_of[i]] += state
    runs = prefix_runs(cfg, searchers, ks)
    run_bytes = {d: 0.0 for d in labels}
    for i in range(L + 1):  # a run's bound: every boundary (it starts at its first removed block)
        if cfg.cache.offload:
            host += runs * state
        else:
            run_bytes[dev_of[i]] += runs * state
    # working memory on the busiest device: the larger of preparation and scoring
    mbstate = m * T * C * b
    attn_scores = 0 if cfg.resolved_device().startswith("cuda") else m * shape.heads * T * T * b
    block_act = (
        m * T * (4 * C + (shape.heads + 2 * shape.kv_heads) * shape.head_dim + 3 * shape.intermediate) * b + attn_scores
    )
    chunk = int((cfg.objective_params or {}).get("head_chunk", 1024))
    head_act = min(chunk, m * T) * shape.vocab * 4 * 2.5  # logits, log-softmax, allocator slack between chunks
    stats = (L + 1) * 512 * C * 4 * 2 + (L + 1) ** 2 * 512 * 4 * 3
    full_mb = {d: sum(mbstate for i in range(L + 1) if dev_of[i] == d) for d in labels}
    per_device, working_total = {}, 0.0
    for d in labels:
        prep = full_mb[d] + (stats if d == 0 else 0)
        score = block_act + (head_act if d == idx[-1] else 0)
        work = max(prep, score)
        working_total += work
        per_device[d] = weights[d] + cache[d] + run_bytes[d] + work
    parts = {
        "weights": sum(weights.values()),
        "cache": sum(cache.values()) + (len(kept) * state if cfg.cache.offload else 0),
        "prefix_runs": sum(run_bytes.values()) + (runs * (L + 1) * state if cfg.cache.offload else 0),
        "working": working_total,
        "kept_boundaries": len(kept),
        "prefix_run_count": runs,
        "state_bytes": state,
        "bytes_per_param": b,
    }
    return Plan(parts, per_device, host, device_memory(cfg), cfg.pool.memory_share, every)


def resolve_every(cfg: MemorySettings, shape: Shape) -> Plan:
    """cache.every as configured, or for auto the densest (smallest) that fits."""
    if cfg.cache.every != "auto":
        return plan_memory(cfg, shape)
    for every in range(1, shape.n_blocks + 1):
        p = plan_memory(cfg, shape, every)
        if p.fits:
            return p
    return plan_memory(cfg, shape, shape.n_blocks)


def fixes(cfg: MemorySettings, shape: Shape, plan: Plan) -> str:
    """The changes that would make the plan fit, each tried alone."""
    import dataclasses

    out = []

    def trial(**changes):
        pool = dataclasses.replace(cast(Any, cfg.pool), **changes.pop("pool", {}))
        cache = dataclasses.replace(cast(Any, cfg.cache), **changes.pop("cache", {}))
        c = dataclasses.replace(cast(Any, cfg), pool=pool, cache=cache, **changes)  # a dataclass: config.Config
        return plan_memory(c, shape, None if c.cache.every == "auto" else int(c.cache.every)).fits

    for n in (2, 4, 8):
        if n > n_devices(cfg) and n <= shape.n_blocks and trial(pool={"gpus_per_actor": float(n), "device_map": None}):
            out.append(f"pool.gpus_per_actor={n}")
            break
    for e in (2, 4, 8):
        if e > plan.every and trial(cache={"every": e}):
            out.append(f"cache.every={e}")
            break
    if not cfg.cache.offload and trial(cache={"offload": True}):
        out.append("cache.offload=true")
    if plan.parts["prefix_run_count"] and trial(cache={"prefix_runs": 1}):
        out.append("cache.prefix_runs=1")
    chunk = int((cfg.objective_params or {}).get("head_chunk", 1024))
    if chunk > 128 and trial(objective_params={**(cfg.objective_params or {}), "head_chunk": 128}):
        out.append("objective_params.head_chunk=128")
    mb = cfg.calibration.micro_batch
    if mb > 1:
        calib = dataclasses.replace(cast(Any, cfg.calibration), micro_batch=max(1, mb // 4))
        if trial(calibration=calib):
            out.append(f"calibration.micro_batch={max(1, mb // 4)}")
    return " or ".join(out) or (
        "more GPUs per actor (pool.gpus_per_actor) with cache.offload=true, or a smaller calibration"
    )


def check_fit(cfg: MemorySettings, shape: Shape | None = None) -> int:
    """One line, before loading, when an actor of ``cfg`` cannot fit its device; else the
    cache.every to use (``auto`` resolved)."""
    if shape is None:
        config = read_config(cfg.model, cfg.trust_remote_code)
        try:
            shape = shape_of(config)
        except Exception as e:  # noqa: BLE001  (a family that cannot be built on the meta device: no plan)
            import logging

            logging.getLogger("ghostsearch").warning(
                "no memory plan for %s (%s); loading without one",
                cfg.model,
                str(e).splitlines()[0][:120] if str(e) else type(e).__name__,
            )
            return 1 if cfg.cache.every == "auto" else int(cfg.cache.every)
    plan = resolve_every(cfg, shape)
    if not plan.fits:
        raise GhostsearchError(
            f"this run does not fit: one scorer needs {plan.line()}; fix: {fixes(cfg, shape, plan)} "
            "(see `ghostsearch plan`)"
        )
    return plan.every


def gib(x: float) -> str:
    return f"{x / GiB:.2f}" if x < 100 * GiB else f"{x / GiB:.0f}"


def fmt_count(x: float) -> str:
    for unit, v in (("T", 1e12), ("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if abs(x) >= v:
            return f"{x / v:.3g}{unit}"
    return f"{x:.3g}"
