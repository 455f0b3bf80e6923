"""Export a pruned (and repaired) model directory, and load it back.

Layout of DIR: the Hugging Face checkpoint of the physically pruned model (safetensors, config
with the new depth, per-layer lists sliced and the layer-period fields rewritten to agree with them
(``stack.period_fields``), layer indices renumbered; tokenizer when given), ``recovery.json``
(method, removed set, per-cut report, data), a model card (README.md, ``card.model_card``) and a
marker (``.ghostsearch-export``: ``--force`` only ever replaces a directory carrying it).

* ``none``, ``replaceme`` (its maps folded into ``down_proj``) and any repair that ``folds``: a
  standard checkpoint of the base architecture; ``AutoModelForCausalLM.from_pretrained`` loads it.
* ``ghosted``, ``linearpatch`` (operators h <- h + h M that no stock layer can hold): a self-contained
  checkpoint that plain transformers loads with ``trust_remote_code=True`` (``recovery/remote.py``:
  the operators are weights of the checkpoint, a generated modeling file applies them, and the
  ``model_type`` is never the base's).

``load_pruned(DIR)`` reads both, and the first operator layout (``model_type: ghostsearch_pruned``,
the matrices in ``recovery.safetensors``), re-attaching the operators as forward pre-hooks (x + x M
in fp32) on the next kept block, or on the final norm for a cut at the end, without running the
export's generated code.

Nothing is half-written: the directory is built under a temporary name beside DIR and renamed.
"""

from __future__ import annotations

import dataclasses
import errno
import json
import logging
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

from ghostsearch.core.errors import GhostsearchError
from ghostsearch.model.stack import Stack, check_removed, physically_prune
from ghostsearch.recovery import remote
from ghostsearch.recovery.base import META_FILE, Operators, get_recovery, new_index, recovery_for
from ghostsearch.recovery.card import consumer_warnings, model_card

log = logging.getLogger("ghostsearch")


def pruned_model(model, operators: Operators):
    """A repaired deep copy of ``model`` with ``operators.removed`` deleted (hooks or folded weights)."""
    pruned = physically_prune(model, operators.removed)
    recovery_for(operators).apply(pruned, operators)
    return pruned


MARKER, MODEL_TYPE, ARCH = ".ghostsearch-export", "ghostsearch_pruned", "GhostsearchPrunedForCausalLM"


def check_target(out_dir, force: bool = False) -> Path:
    """Where an export may go: a new path, an empty directory, or (with force) a previous export.
    Never a run directory, a file, or a directory ghostsearch export did not write."""
    out = Path(out_dir).expanduser()
    if out.is_symlink() and not out.exists():  # tests/fuzz found it refused only after the model and the fit
        raise GhostsearchError(f"--out {out_dir} is a symbolic link to a path that does not exist; give another --out")
    for parent in [out, *out.parents]:
        if parent.exists() and not parent.is_dir():
            raise GhostsearchError(f"--out {out_dir}: {parent} is a file; choose a directory path")
    from ghostsearch.core.io import RUN_FILES, RUN_FOLDERS, run_dir_of

    run = run_dir_of(out.absolute().parent)
    if run is not None and out.absolute().relative_to(run).parts[0] in RUN_FOLDERS + RUN_FILES:
        raise GhostsearchError(  # tests/fuzz found an export written into a run directory's ledger/
            f"--out {out_dir} is inside {out.absolute().relative_to(run).parts[0]} of the run directory {run}; "
            f"export beside them (e.g. {run}/model)"
        )
    from ghostsearch.core.io import check_writable

    check_writable(out, f"--out {out_dir}:", "choose another --out")  # a read-only or full disk, before any work
    if not out.exists() or not any(out.iterdir()):
        return out
    if any((out / f).exists() for f in ("config.yaml", "ledger", "result.json")):
        raise GhostsearchError(
            f"--out {out_dir} is a ghostsearch run directory; export into another directory "
            f"(e.g. {str(out_dir).rstrip('/')}/model)"
        )
    if not (out / MARKER).exists():
        raise GhostsearchError(
            f"--out {out_dir} exists and was not written by ghostsearch export; --force only "
            "replaces a previous export: choose another --out"
        )
    if not force:
        raise GhostsearchError(
            f"export directory {out_dir} already exists; pass --force to replace it or choose another --out"
        )
    return out


def export(
    model,
    removed,
    method: str,
    operators: Operators | None,
    out_dir,
    force: bool = False,
    tokenizer=None,
    info: dict | None = None,
) -> Path:
    """Write the pruned (and repaired) model to ``out_dir``; ``info`` feeds the model card
    (base_model, calibration, variant, version) and, under ``data``, recovery.json's record of the
    data the repair and the search read (``{"repair": {dataset, ...} | None, "search": [...]}``):
    ``ghostsearch eval DIR`` holds those out."""
    out = check_target(out_dir, force)
    info = {"base_model": getattr(model, "name_or_path", None) or None, **(info or {})}  # the card's base
    removed = check_removed(removed, Stack(model).n_blocks)
    if operators is None:
        if method != "none":
            raise GhostsearchError(f"export --method {method} needs fitted operators; fit them first")
        operators = get_recovery("none").operators(removed, Stack(model).n_blocks, {}, [])
    if operators.method != method or tuple(operators.removed) != removed:
        raise GhostsearchError(
            f"the operators were fitted for {operators.method} on {list(operators.removed)}, "
            f"not {method} on {list(removed)}; fit them for this removed set"
        )
    recovery = recovery_for(operators)
    folded = getattr(recovery, "folds", False)
    hooked = bool(operators.mats) and not folded
    pruned: Any = physically_prune(model, operators.removed) if hooked else pruned_model(model, operators)
    if hooked:  # the operators become weights of the checkpoint (recovery/remote.py)
        remote.attach(pruned, {new_index(b, removed): m for b, m in operators.mats.items()})
    out.parent.mkdir(parents=True, exist_ok=True)
    remove_stale_temps(out)
    tmp = Path(tempfile.mkdtemp(dir=out.parent, prefix=f".{out.name}.tmp-{os.getpid()}-"))
    try:
        try:
            pruned.save_pretrained(tmp, safe_serialization=True)
        except Exception as e:  # safetensors' own error for a full disk: the OSError it is (one line)
            if "os error 28" in str(e) or "StorageFull" in str(e):
                raise OSError(errno.ENOSPC, "No space left on device", str(out.parent)) from None
            raise
        if tokenizer is not None:
            tokenizer.save_pretrained(tmp)
        dataclasses.replace(operators, mats={}).save(tmp)  # recovery.json (the matrices: in the checkpoint)
        meta = json.loads((tmp / META_FILE).read_text())
        if hooked:
            stack = Stack(pruned)
            meta.update(boundaries=sorted(operators.mats), stored="checkpoint")
            remote.write(
                tmp,
                pruned,
                {
                    "format": remote.FORMAT,
                    "method": method,
                    "variant": operators.variant,
                    "removed": list(removed),
                    "n_blocks": operators.n_blocks,
                    "boundaries": sorted(new_index(b, removed) for b in operators.mats),
                    "hidden_size": int(next(iter(operators.mats.values())).shape[0]),
                    "blocks": remote.module_path(pruned, stack.blocks),
                    "norm": remote.module_path(pruned, stack.norm),
                },
                info,
            )
        data = info.get("data")
        if data:  # which data the repair (and the search) read: eval holds them out
            meta["data"] = data
        (tmp / META_FILE).write_text(json.dumps(meta, indent=1))
        warnings = [] if hooked else consumer_warnings(pruned.config)  # a remote-code export: transformers only
        for w in warnings:
            log.warning("export: warning: %s", w)
        n_params = sum(p.numel() for p in pruned.parameters())
        dtype = str(Stack(pruned).dtype).removeprefix("torch.")
        card = model_card(info, method, removed, operators.n_blocks, hooked, dtype, n_params, warnings)
        (tmp / "README.md").write_text(card)
        (tmp / MARKER).write_text(json.dumps({"method": method, "removed": list(removed), "warnings": warnings}))
        if force and out.exists():
            old = Path(tempfile.mkdtemp(dir=out.parent, prefix=f".{out.name}.old-{os.getpid()}-"))
            os.replace(out, old / "x")
            os.replace(tmp, out)
            shutil.rmtree(old, ignore_errors=True)
        else:
            try:  # atomic: fails when another export (or anything) filled --out meanwhile
                os.rename(tmp, out)
            except OSError as e:
                if e.errno not in (errno.ENOTEMPTY, errno.EEXIST, errno.ENOTDIR):
                    raise
                raise GhostsearchError(
                    f"--out {out_dir} was written by another process while this export ran (two exports to one "
                    "--out?); nothing of this one was kept: rerun with --force to replace it, or choose another --out"
                ) from None
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return out


def remove_stale_temps(out: Path) -> None:
    """Remove what an export killed mid-write left beside ``out`` (``.NAME.tmp-PID-*``, ``.NAME.old-PID-*``)
    when that PID is no longer running; a running export's temporaries are left alone."""
    for p in out.parent.glob(f".{out.name}.*-*"):
        parts = p.name[len(out.name) + 2 :].split("-")
        if len(parts) < 3 or parts[0] not in ("tmp", "old") or not parts[1].isdigit() or not p.is_dir():
            continue
        try:
            os.kill(int(parts[1]), 0)
        except ProcessLookupError:
            shutil.rmtree(p, ignore_errors=True)
        except PermissionError:  # another user's live process
            pass


def remote_code(directory) -> bool:
    """Whether an export is the self-contained operator layout (loads with ``trust_remote_code=True``)."""
    return remote.is_remote(json.loads((Path(directory) / "config.json").read_text()))


def base_config(directory):
    """The transformers config of an export as its base family's (an operator export's base model
    type restored, its remote-code fields dropped)."""
    from transformers import AutoConfig

    d = Path(directory)
    raw = json.loads((d / "config.json").read_text())
    if remote.is_remote(raw):
        spec = raw.pop("ghostsearch")
        raw.pop("auto_map", None)
        raw.update(model_type=spec["base_model_type"], architectures=spec["base_architectures"])
        return AutoConfig.for_model(**raw)
    if raw.get("model_type") != MODEL_TYPE:
        return AutoConfig.from_pretrained(d)
    base = raw.pop("ghostsearch")  # the first layout (model_type ghostsearch_pruned, recovery.safetensors)
    raw.update(model_type=base["base_model_type"], architectures=base["base_architectures"])
    return AutoConfig.for_model(**raw)


def base_class(config):
    """The transformers causal-LM class of a base config (its ``architectures`` when transformers has it)."""
    import transformers
    from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING

    for name in config.architectures or []:
        cls = getattr(transformers, name, None)
        if isinstance(cls, type):
            return cls
    return MODEL_FOR_CAUSAL_LM_MAPPING[type(config)]


PLAIN_TRANSFORMERS = (
    "{path} is a ghostsearch export with {method} repair operators (recovery.safetensors) that plain "
    "transformers cannot apply (it would be the unrepaired model): load it with "
    "ghostsearch.load_pruned({path!r})"
)
_REGISTERED: list = []


def register_auto() -> None:
    """Teach transformers' Auto classes the FIRST operator layout's model type (``ghostsearch_pruned``:
    exports written before the remote-code layout), once per process:
    AutoConfig (and so AutoTokenizer) then read an export without transformers' "You are using a
    model of type ghostsearch_pruned to instantiate a model of type ..." warning, and
    AutoModelForCausalLM refuses it with one line saying how to load it (PLAIN_TRANSFORMERS). A
    process that never imports ghostsearch gets transformers' own "does not recognize this
    architecture" error; the export's README.md says why."""
    if _REGISTERED:
        return
    from transformers import AutoConfig, AutoModelForCausalLM, PretrainedConfig

    class GhostsearchPrunedConfig(PretrainedConfig):
        model_type = MODEL_TYPE

    class GhostsearchPrunedForCausalLM:  # noqa: D401  (not a model: the one-line refusal)
        config_class = GhostsearchPrunedConfig

        @classmethod
        def from_pretrained(cls, path, *args, **kwargs):
            method = "operator"
            try:
                method = json.loads((Path(path) / META_FILE).read_text())["method"]
            except (OSError, ValueError, KeyError, TypeError):
                pass
            raise GhostsearchError(PLAIN_TRANSFORMERS.format(path=str(path), method=method))

        @classmethod
        def from_config(cls, config, *args, **kwargs):
            raise GhostsearchError(PLAIN_TRANSFORMERS.format(path="this export", method="operator"))

    AutoConfig.register(MODEL_TYPE, GhostsearchPrunedConfig, exist_ok=True)
    AutoModelForCausalLM.register(GhostsearchPrunedConfig, GhostsearchPrunedForCausalLM, exist_ok=True)
    _REGISTERED.append(True)


def load_tokenizer(directory):
    """The tokenizer saved with an export, without transformers' model-type warning and without its
    remote-code prompt: AutoTokenizer reads config.json first (transformers 5), and an operator
    export's config is remote code, so it is handed the base family's config instead."""
    from transformers import AutoTokenizer

    register_auto()
    d = Path(directory).expanduser()
    if remote_code(d):
        return AutoTokenizer.from_pretrained(d, config=base_config(d))
    return AutoTokenizer.from_pretrained(d)


def load_pruned(directory, dtype=None, device: str = "cpu"):
    """A model exported by ``export``, its recovery operators re-attached (and the export's model
    type registered with transformers: ``register_auto``)."""
    register_auto()
    d = Path(directory).expanduser()
    if not (d / "config.json").exists():
        raise GhostsearchError(f"{d} is not a model directory (no config.json); point at a ghostsearch export")
    config = base_config(d)
    base = cls = base_class(config)
    if remote_code(d):  # its operators load below, not as weights
        cls = type(base.__name__, (base,), {"_keys_to_ignore_on_load_unexpected": [rf"^{remote.PATCH}\."]})
    model = cls.from_pretrained(d, config=config, dtype=dtype or "auto", use_safetensors=True).eval().to(device)
    model.__class__ = base  # the base family's class, as the export's weights are its (plus the operators)
    if (d / META_FILE).exists():
        ops = Operators.load(d)
        depth = Stack(model).n_blocks
        if depth != ops.n_blocks - len(ops.removed):
            raise GhostsearchError(
                f"{d}: {META_FILE} is for {ops.n_blocks - len(ops.removed)} blocks but the "
                f"checkpoint has {depth}; re-export the model"
            )
        if ops.mats:
            recovery_for(ops).apply(model, ops)
    return model
