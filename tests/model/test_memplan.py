"""The memory plan (ghostsearch/model/memplan.py): exact weights and cache for Llama-3.1-8B/70B from their
shipped configs (no weights), one-line refusals, cache.every: auto, and SmolLM2's measured peak."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ghostsearch.config import load_config
from ghostsearch.core.errors import GhostsearchError
from ghostsearch.model.memplan import check_fit, plan_memory, read_config, shape_of

ROOT = Path(__file__).resolve().parents[2]
MODELS = {  # the model configs plan ships (configs/models/<hub id>/config.json)
    "llama-3.1-8b": ROOT / "configs/models/meta-llama/Llama-3.1-8B",
    "llama-3.1-70b": ROOT / "configs/models/meta-llama/Llama-3.1-70B",
    "gemma-3-270m": ROOT / "configs/models/google/gemma-3-270m",
}


def _cfg(model: str, *over: str):
    return load_config(
        None,
        [
            f"model={MODELS[model]}",
            "dtype=bf16",
            "device=cuda",
            "pool.device_memory_gib=80",
            "calibration.n_seq=32",
            "calibration.seq_len=2048",
            "searcher=ga",
            *over,
        ],
    )


def _hand_params(V, C, L, heads, kv, inter):
    hd = C // heads
    block = C * heads * hd + 2 * C * kv * hd + heads * hd * C + 3 * C * inter + 2 * C  # q, k, v, o, MLP, 2 norms
    return V * C + L * block + C + V * C  # embeddings, final norm, head


@pytest.mark.parametrize(
    "model, dims, published",
    [
        ("llama-3.1-8b", (128256, 4096, 32, 32, 8, 14336), 8.03e9),
        ("llama-3.1-70b", (128256, 8192, 80, 64, 8, 28672), 70.6e9),
    ],
)
def test_llama_weights_and_cache_by_hand(model, dims, published):
    shape = shape_of(read_config(str(MODELS[model])))
    n = _hand_params(*dims)
    assert shape.params == n
    assert abs(n - published) / published < 0.001
    C, L = dims[1], dims[2]
    cfg = _cfg(model, "cache.every=4", "pool.device_memory_gib=1000")
    p = plan_memory(cfg, shape)
    assert p.parts["weights"] == n * 2  # bf16: 2 bytes a parameter
    kept = len({i for i in range(0, L + 1, 4)} | {L})  # 0, 4, ..., L
    assert kept == L // 4 + 1
    # n_seq x seq_len x hidden x bytes per boundary
    assert p.parts["cache"] == 32 * 2048 * C * 2 * kept
    assert p.parts["prefix_runs"] == 0  # ga keeps no prefix runs
    off = plan_memory(_cfg(model, "cache.every=4", "cache.offload=true", "pool.device_memory_gib=1000"), shape)
    assert off.host == p.parts["cache"] and off.device_peak == pytest.approx(p.device_peak - p.parts["cache"])


def test_split_puts_the_weights_on_every_device():
    shape = shape_of(read_config(str(MODELS["llama-3.1-70b"])))
    one = plan_memory(_cfg("llama-3.1-70b", "cache.every=4"), shape)
    four = plan_memory(_cfg("llama-3.1-70b", "cache.every=4", "pool.gpus_per_actor=4"), shape)
    assert not one.fits and four.fits
    assert len(four.per_device) == 4
    assert four.device_peak < one.device_peak / 3


def test_a_run_that_cannot_fit_is_one_line_naming_the_numbers_and_fixes():
    shape = shape_of(read_config(str(MODELS["llama-3.1-70b"])))
    with pytest.raises(GhostsearchError) as e:
        check_fit(_cfg("llama-3.1-70b"), shape)
    msg = str(e.value)
    assert "\n" not in msg
    assert "does not fit" in msg and "weights 131.42" in msg and "of 80.0 GiB" in msg
    assert "pool.gpus_per_actor=" in msg


def test_cache_every_auto_is_the_densest_that_fits():
    shape = shape_of(read_config(str(MODELS["llama-3.1-8b"])))
    # weights ~15 GiB; every boundary (33 x 0.5 GiB) does not fit 32 GiB, every fourth does
    cfg = _cfg("llama-3.1-8b", "cache.every=auto", "pool.device_memory_gib=32")
    every = check_fit(cfg, shape)
    assert every > 1
    assert plan_memory(cfg, shape, every).fits and not plan_memory(cfg, shape, every - 1).fits


@pytest.mark.parametrize(
    "over, line",
    [
        ("pool.gpus_per_actor=1.5", "pool.gpus_per_actor=1.5: a model is split over whole GPUs; use an integer"),
        ("cache.every=sometimes", "cache.every='sometimes'; use a positive integer or auto"),
        ("pool.memory_share=1.5", "pool.memory_share=1.5; use a share in (0, 1]"),
    ],
)
def test_bad_keys_are_one_line(over, line):
    with pytest.raises(GhostsearchError, match=line.replace("(", r"\(").replace(")", r"\)").replace("[", r"\[")):
        load_config(None, [over])


def _measured_vs_planned(config: str, over: list[str]):
    env = dict(os.environ, HF_HUB_OFFLINE="1", HF_DATASETS_OFFLINE="1", TOKENIZERS_PARALLELISM="false")
    out = subprocess.run(
        [sys.executable, "-m", "tests.model.peak", config, *over],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    measured = json.loads(out.stdout.strip().splitlines()[-1])
    cfg = load_config(str(ROOT / config), over)
    return measured, plan_memory(cfg, shape_of(read_config(cfg.model)))


SMALL = ["dtype=fp32", "device=cpu", "calibration.micro_batch=4", "pool.threads=1", "searcher=ga"]


@pytest.mark.slow
def test_smollm2_peak_within_20_percent_of_measured():
    """A fresh process measures its peak RSS growth while loading SmolLM2, preparing perplexity and
    scoring three sets (tests/model/peak.py); the plan predicts it within 20%."""
    measured, p = _measured_vs_planned(
        "configs/smollm2-quick.yaml", SMALL + ["calibration.n_seq=8", "calibration.seq_len=256"]
    )
    assert p.parts["weights"] == measured["weights"]
    assert abs(p.peak - measured["peak"]) <= 0.2 * measured["peak"], (p.parts, measured)


@pytest.mark.slow
def test_gemma3_270m_shape_peak_within_20_percent_of_measured(tmp_path, smollm2_tokenizer_dir):
    """Gemma-3-270M's architecture (its public config: 18 blocks, hidden 640, a 262,144-token
    vocabulary, tied head) with random weights (the real checkpoint is not on this offline
    machine; memory depends on the shape only): planned within 20% of the measured peak."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    config = read_config(str(MODELS["gemma-3-270m"]))
    torch.manual_seed(0)
    AutoModelForCausalLM.from_config(config, dtype=torch.float32).save_pretrained(tmp_path, safe_serialization=True)
    AutoTokenizer.from_pretrained(smollm2_tokenizer_dir).save_pretrained(tmp_path)
    measured, p = _measured_vs_planned(
        "configs/smollm2-quick.yaml", SMALL + [f"model={tmp_path}", "calibration.n_seq=4", "calibration.seq_len=128"]
    )
    assert shape_of(config).params == 268_098_176  # Gemma-3-270M's published count
    assert p.parts["weights"] == measured["weights"] == 268_098_176 * 4
    assert abs(p.peak - measured["peak"]) <= 0.2 * measured["peak"], (p.parts, measured)
