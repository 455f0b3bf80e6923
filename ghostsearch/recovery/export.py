"""Export a pruned (and repaired) model directory, and load it back.

Layout of DIR: the Hugging Face checkpoint of the physically pruned model (safetensors, config
with the new depth, per-layer lists sliced, layer indices renumbered; tokenizer when given),
plus ``recovery.json`` (method, removed set, per-cut report) and, for operator methods (ghosted,
linearpatch), ``recovery.safetensors`` with one fp32 C x C matrix per cut. ``load_pruned(DIR)``
re-attaches the operators as forward pre-hooks (x + x M in fp32) on the next kept block, or on
the final norm for a cut at the end. A ``replaceme`` export has its maps folded into
``down_proj``: a plain checkpoint that ``AutoModelForCausalLM.from_pretrained`` loads as it is
(so is ``none``).

An operator export cannot be misused as an unrepaired model: its config.json says
``model_type: ghostsearch_pruned`` (the base type kept under ``ghostsearch.base_model_type``) and
``architectures: [GhostsearchPrunedForCausalLM]``, so plain ``AutoModelForCausalLM`` fails loudly
and ``ghostsearch.load_pruned`` loads it. Every export has a model card (README.md) and a marker
(``.ghostsearch-export``): ``--force`` only ever replaces a directory carrying that marker.

Nothing is half-written: the directory is built under a temporary name beside DIR and renamed.
"""

from __future__ import annotations

import dataclasses
import errno
import json
import os
import shutil
import tempfile
from pathlib import Path

from ghostsearch.core.errors import GhostsearchError
from ghostsearch.model.stack import Stack, check_removed, physically_prune
from ghostsearch.recovery.base import META_FILE, Operators, get_recovery, recovery_for


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
    for parent in [out, *out.parents]:
        if parent.exists() and not parent.is_dir():
            raise GhostsearchError(f"--out {out_dir}: {parent} is a file; choose a directory path")
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


def model_card(info: dict, method: str, removed, n_blocks: int, hooked: bool) -> str:
    """README.md of an export: what it is, how it was made, how to load it."""
    load = (
        (
            "```python\nimport ghostsearch\nfrom transformers import AutoTokenizer\n\n"
            'model = ghostsearch.load_pruned("PATH")  # re-attaches the '
            f'{method} operators\ntokenizer = AutoTokenizer.from_pretrained("PATH")\n```\n\n'
            "Plain `transformers.AutoModelForCausalLM` refuses this directory on purpose: without the "
            'operators it would be the unrepaired model. Its error ("model type `ghostsearch_pruned` ... does '
            'not recognize this architecture ... upgrade Transformers") is not about the transformers version: '
            "upgrading does not help; load it with `ghostsearch.load_pruned`. After `import ghostsearch` and a "
            "`load_pruned`, AutoModelForCausalLM says so in one line."
        )
        if hooked
        else (
            "```python\nfrom transformers import AutoModelForCausalLM\nmodel = "
            'AutoModelForCausalLM.from_pretrained("PATH")\n'
            '```\n\n(`ghostsearch.load_pruned("PATH")` works too.)'
        )
    )
    lines = [
        "---",
        f"base_model: {info.get('base_model', 'unknown')}",
        "tags: [ghostsearch, depth-pruning]",
        "---",
        "",
        f"# {info.get('base_model', 'model')} with {len(removed)} of {n_blocks} blocks removed",
        "",
        f"- Base model: `{info.get('base_model', 'unknown')}`",
        f"- Removed blocks (0-based, of {n_blocks}): {list(removed)}",
        f"- Repair: `{method}`" + (f" ({info['variant']})" if info.get("variant") else ""),
        f"- Calibration data: {info.get('calibration', 'none (no fitting)')}",
        f"- Written by ghostsearch {info.get('version') or ''}".rstrip(),
        "",
        "## How to load",
        "",
        load,
        "",
    ]
    return "\n".join(lines)


def _mark_config(directory: Path) -> None:
    """config.json of an operator export: a model type plain transformers refuses (see module doc)."""
    path = directory / "config.json"
    cfg = json.loads(path.read_text())
    cfg["ghostsearch"] = {
        "base_model_type": cfg["model_type"],
        "base_architectures": cfg.get("architectures"),
        "loader": "ghostsearch.load_pruned",
    }
    cfg["model_type"], cfg["architectures"] = MODEL_TYPE, [ARCH]
    path.write_text(json.dumps(cfg, indent=2))


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
    pruned = pruned_model(model, operators)
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
        folded = getattr(recovery_for(operators), "folds", False)
        (dataclasses.replace(operators, mats={}) if folded else operators).save(tmp)
        data = (info or {}).get("data")
        if data:  # which data the repair (and the search) read: eval holds them out
            meta = json.loads((tmp / META_FILE).read_text())
            meta["data"] = data
            (tmp / META_FILE).write_text(json.dumps(meta, indent=1))
        hooked = bool(operators.mats) and not folded
        if hooked:
            _mark_config(tmp)
        (tmp / "README.md").write_text(model_card(info or {}, method, removed, operators.n_blocks, hooked))
        (tmp / MARKER).write_text(json.dumps({"method": method, "removed": list(removed)}))
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


def base_config(directory):
    """The transformers config of an export (an operator export's base model type restored)."""
    from transformers import AutoConfig

    d = Path(directory)
    raw = json.loads((d / "config.json").read_text())
    if raw.get("model_type") != MODEL_TYPE:
        return AutoConfig.from_pretrained(d)
    base = raw.pop("ghostsearch")
    raw.update(model_type=base["base_model_type"], architectures=base["base_architectures"])
    return AutoConfig.for_model(**raw)


PLAIN_TRANSFORMERS = (
    "{path} is a ghostsearch export with {method} repair operators (recovery.safetensors) that plain "
    "transformers cannot apply (it would be the unrepaired model): load it with "
    "ghostsearch.load_pruned({path!r})"
)
_REGISTERED: list = []


def register_auto() -> None:
    """Teach transformers' Auto classes the operator export's model type, once per process:
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
    """The tokenizer saved with an export (no transformers warning about its model type)."""
    from transformers import AutoTokenizer

    register_auto()
    return AutoTokenizer.from_pretrained(Path(directory).expanduser())


def load_pruned(directory, dtype=None, device: str = "cpu"):
    """A model exported by ``export``, its recovery operators re-attached (and the export's model
    type registered with transformers: ``register_auto``)."""
    from transformers import AutoModelForCausalLM

    register_auto()
    d = Path(directory).expanduser()
    if not (d / "config.json").exists():
        raise GhostsearchError(f"{d} is not a model directory (no config.json); point at a ghostsearch export")
    model = (
        AutoModelForCausalLM.from_pretrained(d, config=base_config(d), dtype=dtype or "auto", use_safetensors=True)
        .eval()
        .to(device)
    )
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
