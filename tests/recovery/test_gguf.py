"""``ghostsearch export --format gguf``: a tiny Llama exported with ``folded`` and read back by
transformers' GGUF loader gives the safetensors export's logits; hooked repairs and other families
are refused in one line before any work."""

import json

import pytest
import torch
import yaml

from ghostsearch.cli import main
from tests.conftest import tiny_config
from tests.corpora import CALIB


def config(tmp_path, model, data_dir) -> str:
    cfg = {
        "model": model,
        "dtype": "fp32",
        "data_dir": data_dir,
        "recovery": {"dataset": CALIB, "n_seq": 8, "seq_len": 64},  # 512 tokens: 8 per channel at C = 64
    }
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return str(path)


@pytest.mark.slow
def test_gguf_round_trip_of_a_folded_tiny_llama(tiny_model_dir, tmp_path, data_dir, capsys):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    out = tmp_path / "m"
    args = ["--remove", "2,3", "--method", "folded", "--out", str(out), "--format", "gguf-f32"]
    assert main(["export", config(tmp_path, tiny_model_dir, data_dir), *args]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed["gguf"] == str(out / "model-f32.gguf")
    plain = AutoModelForCausalLM.from_pretrained(out).eval()
    back = AutoModelForCausalLM.from_pretrained(out, gguf_file="model-f32.gguf", dtype=torch.float32).eval()
    assert back.config.num_hidden_layers == 4
    ids = torch.randint(0, plain.config.vocab_size, (2, 24), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        assert (back(ids).logits - plain(ids).logits).abs().max() <= 1e-5  # q/k permuted and un-permuted exactly
    text = "The cut is repaired, <|im_start|>user hello"
    gguf_tok = AutoTokenizer.from_pretrained(out, gguf_file="model-f32.gguf")
    assert gguf_tok(text).input_ids == AutoTokenizer.from_pretrained(out)(text).input_ids


def test_gguf_refuses_hooked_repairs_and_other_families_before_any_work(tiny_model_dir, tmp_path, data_dir, capsys):
    from ghostsearch.recovery.gguf import unsupported

    out = tmp_path / "m"
    cfg = config(tmp_path, tiny_model_dir, data_dir)
    assert main(["export", cfg, "--remove", "2,3", "--method", "ghosted", "--out", str(out), "--format", "gguf"]) == 2
    err = capsys.readouterr().err.strip()
    assert "--method ghosted" in err and "--method folded" in err and len(err.splitlines()) == 1
    assert not out.exists()
    assert "writes llama and qwen2 models, not gemma3_text" in unsupported(tiny_config("gemma3", 3))
    assert unsupported(tiny_config("qwen2", 3)) is None


@pytest.mark.slow
def test_gguf_round_trip_of_qwen2_with_biases(tiny_model_dir, tmp_path):
    """Qwen2 (q/k/v biases, no permutation), f16: within f16 rounding of the model."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from ghostsearch.recovery.gguf import write_gguf
    from tests.conftest import tiny_model

    model = tiny_model("qwen2", 3)
    with torch.no_grad():
        for p in model.parameters():
            if p.dim() == 1 and p.shape[0] != model.config.hidden_size:
                p.normal_(0, 0.1)  # random biases (their init is 0), so a dropped bias would show
    write_gguf(model, AutoTokenizer.from_pretrained(tiny_model_dir), tmp_path / "q.gguf", dtype="f16")
    back = AutoModelForCausalLM.from_pretrained(tmp_path, gguf_file="q.gguf", dtype=torch.float32).eval()
    ids = torch.randint(0, 1000, (1, 16), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        want = model(ids).logits
        assert (back(ids).logits - want).abs().max() <= 2e-3 * want.abs().max()


@pytest.mark.slow
def test_gguf_of_a_gguf_base_carries_its_tokenizer(tmp_path):
    """A base read from a GGUF (the built-in SmolLM2): every tokenizer.* field is copied as it is (the
    named pre-tokenizer included; the ids of a tokenizer built from them are the CLI test's check)."""
    import gguf

    from ghostsearch.recovery.gguf import source_gguf, write_gguf
    from tests.conftest import tiny_model

    src = source_gguf("smollm2-135m")
    write_gguf(tiny_model("llama", 2), None, tmp_path / "t.gguf", dtype="f32", source_gguf=src)
    fields = [gguf.GGUFReader(str(p)).fields for p in (src, tmp_path / "t.gguf")]
    names = [sorted(k for k in f if k.startswith("tokenizer.")) for f in fields]
    assert names[0] == names[1] and "tokenizer.ggml.merges" in names[0]
    for k in names[0]:
        assert fields[1][k].contents() == fields[0][k].contents(), k
    assert fields[1]["tokenizer.ggml.pre"].contents() == "smollm"
