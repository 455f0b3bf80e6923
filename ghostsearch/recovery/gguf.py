"""GGUF files of plain exports (``ghostsearch export ... --format gguf``), for llama.cpp and the
tools built on it, written with the ``gguf`` package (llama.cpp's own Python writer; its
``TensorNameMap`` gives the tensor names and its constants the metadata keys).

What is written: the pruned (and folded) model as it is in memory, every tensor in f16 (``f16``, the
default, as llama.cpp's converter) or f32, 1-D tensors (norms, biases) always in f32; the metadata
of the family (``{arch}.block_count`` the pruned depth, heads, widths, RoPE base, norm epsilon); the
tokenizer. Supported families: ``llama`` (SmolLM2, Llama 2/3 without RoPE scaling) and ``qwen2``
(without sliding window); anything else is refused in one line before any work. Llama's q_proj and
k_proj rows are permuted as llama.cpp's converter does (its RoPE pairs channel i with i + d/2 of a
head's interleaved halves); transformers' GGUF loader undoes it.

Tokenizer: when the base model was itself read from a GGUF (the built-in ``smollm2-135m``, a
``model=*.gguf``), its ``tokenizer.*`` metadata is copied as it is (the exact tokenizer llama.cpp
already runs for it, pre-tokenizer and chat template included). Otherwise it is built from the
Hugging Face fast tokenizer, which must be a byte-level BPE (``tokenizer.ggml.model = gpt2``);
its pre-tokenizer type is then ``default``, which llama.cpp may split differently from the
original: the docs' manual llama.cpp check says how to see it.

Exports that need a hook at inference (``ghosted``, ``linearpatch``) have no GGUF: llama.cpp would
run the unrepaired model. ``refusal`` says so before any work and names ``folded``.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import torch

from ghostsearch.core.errors import GhostsearchError

ARCHS = {"llama": "LLAMA", "qwen2": "QWEN2"}  # model_type -> gguf.MODEL_ARCH member
DTYPES = ("f16", "f32")


def refusal(method: str, folds: bool, identity: bool) -> str | None:
    """Why ``method``'s export cannot be a GGUF (None: it can): its repair is a hook."""
    if folds or identity:
        return None
    return (
        f"--format gguf needs a plain checkpoint, and --method {method} repairs with a hook that llama.cpp "
        "would not run (the GGUF would be the unrepaired model); use --method folded (the same fit restricted to "
        "the weights before each cut), replaceme or none"
    )


def unsupported(config) -> str | None:
    """Why ``config``'s family cannot be written (None: it can), from the config alone."""
    mt = getattr(config, "model_type", None)
    if mt not in ARCHS:
        return (
            f"--format gguf writes {' and '.join(ARCHS)} models, not {mt}; export safetensors and convert "
            "the directory with llama.cpp's convert_hf_to_gguf.py"
        )
    rope = getattr(config, "rope_parameters", None) or getattr(config, "rope_scaling", None) or {}
    if rope.get("rope_type", "default") not in ("default", None):
        return f"--format gguf does not write RoPE scaling ({rope.get('rope_type')}); export safetensors"
    if mt == "qwen2" and getattr(config, "use_sliding_window", False):
        return "--format gguf does not write Qwen2's sliding window; export safetensors"
    return None


def rope_theta(config) -> float:
    theta = getattr(config, "rope_theta", None)
    if theta is None:
        theta = (getattr(config, "rope_parameters", None) or {}).get("rope_theta", 10000.0)
    return float(theta)


def permute_rows(w: torch.Tensor, n_head: int) -> torch.Tensor:
    """llama.cpp's q/k row order: per head, rows (0, d/2, 1, d/2 + 1, ...) of the HF half-split
    layout become consecutive pairs (the interleaved RoPE pairs its kernels rotate)."""
    d = w.shape[0] // n_head
    return w.reshape(n_head, 2, d // 2, *w.shape[1:]).transpose(1, 2).reshape(w.shape)


def tensors(model, arch) -> list[tuple[str, torch.Tensor]]:
    """(gguf name, tensor) for every weight of ``model`` (a tied LM head left out)."""
    import gguf

    cfg = model.config
    names = gguf.get_tensor_name_map(arch, cfg.num_hidden_layers)
    tied = bool(getattr(cfg, "tie_word_embeddings", False))
    out = []
    for hf, t in model.state_dict().items():
        if tied and hf == "lm_head.weight":
            continue
        base, suffix = hf.rsplit(".", 1)
        name = names.get_name(base)
        if name is None:
            raise GhostsearchError(f"--format gguf: no GGUF name for the tensor {hf}; export safetensors")
        t = t.detach().float().cpu()
        if arch == gguf.MODEL_ARCH.LLAMA and name.endswith(("attn_q", "attn_k")):
            t = permute_rows(t, cfg.num_attention_heads if name.endswith("attn_q") else cfg.num_key_value_heads)
        out.append((f"{name}.{suffix}", t))
    return out


def copy_tokenizer(writer, source: Path) -> None:
    """Every ``tokenizer.*`` field of the GGUF ``source`` into ``writer``, as it is."""
    import gguf

    reader = gguf.GGUFReader(str(source))
    for key, field in reader.fields.items():
        if not key.startswith("tokenizer."):
            continue
        vtype = field.types[0]
        sub = field.types[-1] if vtype == gguf.GGUFValueType.ARRAY else None
        writer.add_key_value(key, field.contents(), vtype, sub)


def hf_tokenizer(writer, tokenizer, vocab_size: int) -> None:
    """A byte-level BPE Hugging Face fast tokenizer as gpt2 GGUF metadata."""
    import gguf

    backend = getattr(tokenizer, "backend_tokenizer", None)
    spec = json.loads(backend.to_str()) if backend is not None else {}
    model = spec.get("model", {})
    if model.get("type") != "BPE":
        raise GhostsearchError(
            "--format gguf writes byte-level BPE tokenizers (and tokenizers of a GGUF base); this one is "
            f"{model.get('type') or type(tokenizer).__name__}: export safetensors and use convert_hf_to_gguf.py"
        )
    added = {t["id"]: t for t in spec.get("added_tokens", [])}
    by_id = {i: tok for tok, i in model["vocab"].items()} | {i: t["content"] for i, t in added.items()}
    n = max(vocab_size, max(by_id) + 1)
    tokens, types = [], []
    for i in range(n):
        if i not in by_id:
            tokens.append(f"[PAD{i}]")
            types.append(gguf.TokenType.UNUSED)
        else:
            tokens.append(by_id[i])
            special = added.get(i, {}).get("special")
            types.append(
                gguf.TokenType.CONTROL
                if special
                else gguf.TokenType.USER_DEFINED
                if i in added
                else gguf.TokenType.NORMAL
            )
    merges = [m if isinstance(m, str) else " ".join(m) for m in model.get("merges", [])]
    writer.add_tokenizer_model("gpt2")
    writer.add_tokenizer_pre("default")
    writer.add_token_list(tokens)
    writer.add_token_types([int(t) for t in types])
    writer.add_token_merges(merges)
    for what, value in (
        ("bos", tokenizer.bos_token_id),
        ("eos", tokenizer.eos_token_id),
        ("unk", tokenizer.unk_token_id),
        ("pad", tokenizer.pad_token_id),
    ):
        if value is not None:
            getattr(writer, f"add_{what}_token_id")(int(value))
    if getattr(tokenizer, "chat_template", None):
        writer.add_chat_template(tokenizer.chat_template)


def write_gguf(model, tokenizer, path, dtype: str = "f16", source_gguf: Path | None = None, name: str = "") -> Path:
    """Write ``model`` (a plain, pruned checkpoint in memory) to the GGUF file ``path``."""
    import gguf

    if dtype not in DTYPES:
        raise GhostsearchError(f"GGUF dtype {dtype!r}; use one of: {', '.join(DTYPES)}")
    cfg = model.config
    why = unsupported(cfg)
    if why is not None:
        raise GhostsearchError(why)
    arch = getattr(gguf.MODEL_ARCH, ARCHS[cfg.model_type])
    path = Path(path)
    w = gguf.GGUFWriter(str(path), gguf.MODEL_ARCH_NAMES[arch])
    w.add_name(name or cfg.model_type)
    w.add_context_length(int(cfg.max_position_embeddings))
    w.add_embedding_length(int(cfg.hidden_size))
    w.add_block_count(int(cfg.num_hidden_layers))
    w.add_feed_forward_length(int(cfg.intermediate_size))
    w.add_head_count(int(cfg.num_attention_heads))
    w.add_head_count_kv(int(cfg.num_key_value_heads))
    w.add_layer_norm_rms_eps(float(cfg.rms_norm_eps))
    w.add_rope_freq_base(rope_theta(cfg))
    head_dim = getattr(cfg, "head_dim", None) or cfg.hidden_size // cfg.num_attention_heads
    if arch == gguf.MODEL_ARCH.LLAMA:
        w.add_rope_dimension_count(int(head_dim))
    w.add_vocab_size(int(cfg.vocab_size))
    w.add_file_type(gguf.LlamaFileType.MOSTLY_F16 if dtype == "f16" else gguf.LlamaFileType.ALL_F32)
    if source_gguf is not None:
        copy_tokenizer(w, Path(source_gguf))
    else:
        hf_tokenizer(w, tokenizer, int(cfg.vocab_size))
    for tname, t in tensors(model, arch):
        a = t.numpy()
        w.add_tensor(tname, a.astype(np.float16) if dtype == "f16" and a.ndim > 1 else a.astype(np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


# ---------------------------------------------------------------- `ghostsearch export --format`
FORMATS = ("safetensors", "gguf", "gguf-f32")  # gguf: f16 (llama.cpp's converter's default)


def check(model: str, trust_remote_code: bool, method: str, fmt: str) -> None:
    """``export --format gguf``'s refusals, before any data or weights are read: a repair that is a
    hook, a family or setting the writer does not handle (from the config of ``model`` on the meta device)."""
    if fmt == "safetensors":
        return
    from ghostsearch.recovery.base import RECOVERY

    cls = RECOVERY.get(method)
    why = refusal(method, cls.folds, cls.identity)
    if why is None:
        from ghostsearch.model.models import model_skeleton

        why = unsupported(model_skeleton(model, trust_remote_code).config)
    if why is not None:
        raise GhostsearchError(why)


def source_gguf(spec: str) -> Path | None:
    """The GGUF file the model ``spec`` is read from (the built-in, or a ``*.gguf`` path), else None."""
    from ghostsearch.model.models import BUILTIN

    if str(spec).endswith(".gguf"):
        return Path(spec).expanduser()
    if spec in BUILTIN:
        import importlib.util

        found = importlib.util.find_spec(BUILTIN[spec]["package"])
        if found is not None and found.submodule_search_locations:
            path = Path(list(found.submodule_search_locations)[0]) / BUILTIN[spec]["gguf"]
            return path if path.exists() else None
    return None


def write_export(directory, fmt: str, spec: str) -> Path | None:
    """The GGUF file of the plain export ``directory`` (read back from what was written), beside
    its safetensors: ``model-f16.gguf`` or ``model-f32.gguf``; None for ``safetensors``."""
    if fmt == "safetensors":
        return None
    import os

    from transformers import AutoModelForCausalLM, AutoTokenizer

    d = Path(directory)
    dtype = "f32" if fmt == "gguf-f32" else "f16"
    model = AutoModelForCausalLM.from_pretrained(d, dtype=torch.float32).eval()
    src = source_gguf(spec)
    tok = None if src is not None else AutoTokenizer.from_pretrained(d)
    out, tmp = d / f"model-{dtype}.gguf", d / f".model-{dtype}.gguf.tmp-{os.getpid()}"
    try:
        write_gguf(model, tok, tmp, dtype=dtype, source_gguf=src, name=d.name)
        os.replace(tmp, out)
    except BaseException as e:
        tmp.unlink(missing_ok=True)
        if isinstance(e, GhostsearchError):
            raise GhostsearchError(f"{e} (the safetensors export in {d} is complete; no GGUF was written)") from None
        raise
    with open(d / "README.md", "a") as f:
        f.write(
            f"\n## GGUF\n\n`{out.name}`: the same model for llama.cpp ({dtype}; norms and biases f32), "
            f'e.g. `llama-cli -m {out.name} -p "..."`.\n'
        )
    return out
