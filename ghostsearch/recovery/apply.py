"""Recovery from a validated config: which method, which calibration data (used by the CLI,
``ghostsearch eval`` and export)."""
from __future__ import annotations

from ghostsearch.recovery.base import Calibration, Operators, Recovery, get_recovery


def recovery_from_config(cfg, method: str | None = None) -> Recovery:
    """cfg.recovery (method, variant, ridge); a variant the method does not have falls back to
    the method's default only when it is the config default ``dense``."""
    method = method or cfg.recovery.method
    rec = get_recovery(method, ridge=cfg.recovery.ridge)
    variant = cfg.recovery.variant
    if variant != rec.variant and not (variant == "dense" and variant not in rec.variants):
        rec = get_recovery(method, variant=variant, ridge=cfg.recovery.ridge)
    return rec


def calibration_from_config(stack, tok, cfg) -> Calibration:
    """The configured objective's calibration micro-batches, captured lazily (one at a time)."""
    """Recovery calibrates on text (recovery.dataset, n_seq x seq_len tokens, the calibration seed),
    whatever objective the search used: the operators only need dense activations."""
    from ghostsearch.config import default_dataset
    from objectives import CalibrationSpec, get_objective

    r = cfg.recovery
    spec = CalibrationSpec(dataset=r.dataset or default_dataset("perplexity", cfg.data_dir), n_seq=r.n_seq,
                           seq_len=r.seq_len, seed=cfg.calibration.seed, data_dir=cfg.data_dir,
                           micro_batch=cfg.calibration.micro_batch)
    return Calibration(stack, get_objective("perplexity")(spec).build(tok, stack.dtype))


def fit_from_config(model, tok, removed, cfg, method: str | None = None) -> Operators:
    from ghostsearch.stack import Stack

    stack = Stack(model)
    return recovery_from_config(cfg, method).fit(stack, removed, calibration_from_config(stack, tok, cfg))


def repaired_model(model, tok, removed, cfg):
    """A deep copy of ``model`` with ``removed`` deleted and repaired by cfg.recovery.method."""
    from ghostsearch.recovery.export import pruned_model

    return pruned_model(model, fit_from_config(model, tok, removed, cfg))
