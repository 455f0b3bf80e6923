"""The one repair path from a validated config, used by ``recover``, ``eval``, ``export`` and
``compare``: which method (``RECOVERY`` registry, ``none`` included), which calibration data, and
the pruned (and repaired) model."""

from __future__ import annotations

from typing import Protocol

import torch

from ghostsearch.recovery.base import Activations, Operators, Recovery, get_recovery


class RepairSection(Protocol):
    """What the repair reads of the ``recovery`` section (``config.Recovery`` is one)."""

    method: str
    variant: str
    ridge: float
    steps: int
    lr: float
    linearpatch_rotation: str
    linearpatch_scale: str
    dataset: str | None
    n_seq: int
    seq_len: int


class CalibrationDraw(Protocol):
    """What the repair reads of the ``calibration`` section: the seed of its draw, the micro-batch."""

    seed: int
    micro_batch: int


class CacheBudget(Protocol):
    """What the repair reads of the ``eval`` section: the GiB the captured activations may hold."""

    cache_gib: float


class RepairSettings(Protocol):
    """What the repair reads of a run's settings (``config.Config`` is one): its section, the
    calibration draw, eval's cache budget, the data directory, and the perplexity default (C4 or,
    where C4 is missing, its fallback)."""

    @property
    def recovery(self) -> RepairSection: ...

    @property
    def calibration(self) -> CalibrationDraw: ...

    @property
    def eval(self) -> CacheBudget: ...

    @property
    def data_dir(self) -> str | None: ...

    def default_dataset(self, objective: str) -> str: ...


def recovery_from_config(cfg: RepairSettings, method: str | None = None) -> Recovery:
    """cfg.recovery (method, variant, ridge); a variant the method does not have falls back to
    the method's default only when it is the config default ``dense``."""
    method = method or cfg.recovery.method
    extra: dict[str, object] = (
        {"steps": cfg.recovery.steps, "lr": cfg.recovery.lr, "seed": cfg.calibration.seed}
        if method == "replaceme"
        else {}
    )  # its cosine fit's optimiser
    if method == "linearpatch":  # its Hadamard construction and scale estimator
        extra = {"rotation": cfg.recovery.linearpatch_rotation, "scale": cfg.recovery.linearpatch_scale}
    rec = get_recovery(method, ridge=cfg.recovery.ridge, **extra)
    variant = cfg.recovery.variant
    if variant != rec.variant and not (variant == "dense" and variant not in rec.variants):
        rec = get_recovery(method, variant=variant, ridge=cfg.recovery.ridge, **extra)
    return rec


def repair_spec(cfg: RepairSettings):
    """The repair's calibration data: recovery.dataset (auto: the perplexity default, C4, or its
    fallback where C4 is not available), recovery.n_seq x recovery.seq_len, the calibration seed."""
    from ghostsearch.objectives import CalibrationSpec

    r = cfg.recovery
    dataset = r.dataset if r.dataset not in (None, "auto") else cfg.default_dataset("perplexity")
    return CalibrationSpec(
        dataset=dataset,
        n_seq=r.n_seq,
        seq_len=r.seq_len,
        seed=cfg.calibration.seed,
        data_dir=cfg.data_dir,
        micro_batch=cfg.calibration.micro_batch,
    )


def describe(spec) -> str:
    """'c4 32x256 seed 0': a calibration spec in words (recovery.parquet, recovery.json, model cards)."""
    return f"{spec.dataset} {spec.n_seq}x{spec.seq_len} seed {spec.seed}"


# A repair fits a C x C operator per cut: with fewer than this many tokens per channel it overfits its
# calibration data (docs/recovery.md, "How much repair data": SmolLM2, C = 576, 2,048 tokens overfit).
MIN_TOKENS_PER_CHANNEL = 6
_WARNED: set = set()


def check_repair_size(cfg: RepairSettings, hidden: int) -> bool:
    """One warning line (once per process and size) when the repair data, recovery.n_seq x
    recovery.seq_len tokens, is under MIN_TOKENS_PER_CHANNEL x the model's width; True when it is."""
    import logging

    r = cfg.recovery
    tokens, need = r.n_seq * r.seq_len, MIN_TOKENS_PER_CHANNEL * int(hidden)
    if tokens >= need:
        return False
    if (tokens, need) not in _WARNED:
        _WARNED.add((tokens, need))
        logging.getLogger("ghostsearch.recovery").warning(
            f"recovery.n_seq x recovery.seq_len = {r.n_seq} x {r.seq_len} = {tokens:,} repair tokens for a "
            f"{hidden} x {hidden} operator: under {need:,} ({MIN_TOKENS_PER_CHANNEL} per channel) the repair "
            f"overfits its data and can look harmful; raise recovery.n_seq (default 32 x 256 = 8,192; docs/recovery.md)"
        )
    return True


def activations_from_config(stack, tok, cfg: RepairSettings) -> Activations:
    """Recovery calibrates on text (``repair_spec``: recovery.dataset, n_seq x seq_len tokens, the
    calibration seed), whatever objective the search used: the operators only need dense
    activations. Micro-batches are captured lazily (one at a time). Too few tokens for the model's
    width: one warning line (``check_repair_size``)."""
    from ghostsearch.objectives import OBJECTIVES

    hidden = getattr(stack.model.config, "hidden_size", None) or getattr(stack.blocks[0], "hidden_size", None)
    if hidden:
        check_repair_size(cfg, hidden)
    return Activations(stack, OBJECTIVES.get("perplexity")(repair_spec(cfg)).build(tok, stack.dtype))


def captured_once(data: Activations, cap_bytes: float) -> Activations:
    """``data`` with every micro-batch captured once and every boundary's state kept, when those
    states fit in ``cap_bytes``: then any number of fits (finalists, methods, cuts) read one dense
    pass instead of one per cut and finalist. Else ``data`` as it is (re-captured per pass)."""
    stack = data.stack
    tokens = sum(b.input_ids.numel() for b in data.batches)
    width = stack.model.config.hidden_size
    need = tokens * width * (stack.n_blocks + 1) * torch.empty((), dtype=stack.dtype).element_size()
    if data.states is not None or need > cap_bytes:
        return data
    caps = [stack.capture(b) for b in data.batches]
    return Activations(stack, data.batches, caps, [c.states for c in caps])


def fit_all(model, tok, specs, cfg: RepairSettings) -> list[Operators | None]:
    """Operators for each (removed, method) of ``specs`` (None for ``none``), every fit reading the
    same dense calibration activations, captured once while they fit in ``eval.cache_gib``."""
    from ghostsearch.model.stack import Stack

    stack, data = Stack(model), None
    out: list[Operators | None] = []
    for removed, method in specs:
        rec = None if method in (None, "none") else recovery_from_config(cfg, method)
        if rec is None or rec.identity:
            out.append(None)
            continue
        if data is None:
            data = captured_once(activations_from_config(stack, tok, cfg), cfg.eval.cache_gib * (1 << 30))
        out.append(rec.fit(stack, list(removed), data))
    return out


def fit(model, tok, removed, cfg: RepairSettings, method: str | None = None) -> Operators:
    """Operators of ``method`` (default cfg.recovery.method) for ``removed``; a method that adds
    nothing (``none``) needs no calibration pass."""
    from ghostsearch.model.stack import Stack

    stack = Stack(model)
    rec = recovery_from_config(cfg, method)
    if rec.identity:
        return rec.operators(removed, stack.n_blocks, {}, [])
    return rec.fit(stack, removed, activations_from_config(stack, tok, cfg))


def repair(model, tok, removed, cfg: RepairSettings, method: str | None = None):
    """A deep copy of ``model`` with ``removed`` deleted and repaired by ``method``
    (default cfg.recovery.method; ``none``: only pruned)."""
    from ghostsearch.recovery.export import pruned_model

    return pruned_model(model, fit(model, tok, removed, cfg, method))
