"""Export a pruned (and repaired) model directory, and load it back.

Layout of DIR: the Hugging Face checkpoint of the physically pruned model (safetensors, config
with the new depth, per-layer lists sliced, layer indices renumbered; tokenizer when given),
plus ``recovery.json`` (method, removed set, per-cut report) and, for operator methods (ghosted,
linearpatch), ``recovery.safetensors`` with one fp32 C x C matrix per cut. ``load_pruned(DIR)``
re-attaches the operators as forward pre-hooks (x + x M in fp32) on the next kept block, or on
the final norm for a cut at the end. A ``replaceme`` export has its maps folded into
``down_proj``: a plain checkpoint that ``AutoModelForCausalLM.from_pretrained`` loads as it is.

Nothing is half-written: the directory is built under a temporary name beside DIR and renamed.
"""
from __future__ import annotations

import dataclasses
import os
import shutil
import tempfile
from pathlib import Path

from ghostsearch.errors import GhostsearchError
from ghostsearch.recovery.base import META_FILE, Operators, get_recovery, recovery_for
from ghostsearch.stack import Stack, check_removed, physically_prune


def pruned_model(model, operators: Operators):
    """A repaired deep copy of ``model`` with ``operators.removed`` deleted (hooks or folded weights)."""
    pruned = physically_prune(model, operators.removed)
    recovery_for(operators).apply(pruned, operators)
    return pruned


def export(model, removed, method: str, operators: Operators | None, out_dir, force: bool = False,
           tokenizer=None) -> Path:
    out = Path(out_dir).expanduser()
    if out.exists() and not force:
        raise GhostsearchError(f"export directory {out} already exists; pass --force to replace it or choose another --out")
    removed = check_removed(removed, Stack(model).n_blocks)
    if operators is None:
        if method != "none":
            raise GhostsearchError(f"export --method {method} needs fitted operators; fit them first")
        operators = get_recovery("none").operators(removed, Stack(model).n_blocks, {}, [])
    if operators.method != method or tuple(operators.removed) != removed:
        raise GhostsearchError(f"the operators were fitted for {operators.method} on {list(operators.removed)}, "
                               f"not {method} on {list(removed)}; fit them for this removed set")
    pruned = pruned_model(model, operators)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=out.parent, prefix=f".{out.name}.tmp-"))
    try:
        pruned.save_pretrained(tmp, safe_serialization=True)
        if tokenizer is not None:
            tokenizer.save_pretrained(tmp)
        folded = getattr(recovery_for(operators), "folds", False)
        (dataclasses.replace(operators, mats={}) if folded else operators).save(tmp)
        if out.exists():
            old = Path(tempfile.mkdtemp(dir=out.parent, prefix=f".{out.name}.old-"))
            os.replace(out, old / "x")
            os.replace(tmp, out)
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.replace(tmp, out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return out


def load_pruned(directory, dtype=None, device: str = "cpu"):
    """A model exported by ``export``, its recovery operators re-attached."""
    from transformers import AutoModelForCausalLM

    d = Path(directory).expanduser()
    if not (d / "config.json").exists():
        raise GhostsearchError(f"{d} is not a model directory (no config.json); point at a ghostsearch export")
    model = AutoModelForCausalLM.from_pretrained(d, dtype=dtype or "auto", use_safetensors=True).to(device).eval()
    if (d / META_FILE).exists():
        ops = Operators.load(d)
        depth = Stack(model).n_blocks
        if depth != ops.n_blocks - len(ops.removed):
            raise GhostsearchError(f"{d}: {META_FILE} is for {ops.n_blocks - len(ops.removed)} blocks but the "
                                   f"checkpoint has {depth}; re-export the model")
        if ops.mats:
            recovery_for(ops).apply(model, ops)
    return model
