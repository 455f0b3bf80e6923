"""Exports load in plain transformers (issue 46): every supported family (tiny random models) x every
repair it accepts is exported, then loaded, run and generated from in ONE subprocess where
``import ghostsearch`` fails, and compared with ``ghostsearch.load_pruned``; config period fields
checked against the kept layers; model cards parsed by ``huggingface_hub.ModelCard``; the first
operator layout (model_type ghostsearch_pruned, recovery.safetensors) still loads."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch

from ghostsearch.core.errors import GhostsearchError
from ghostsearch.model.stack import Batch, Stack, physically_prune
from ghostsearch.recovery import RECOVERY, Activations, get_recovery
from ghostsearch.recovery.export import export, load_pruned
from tests.conftest import FAMILIES, tiny_config

VOCAB, T = 512, 24  # T > every tiny model's sliding window (8, mistral 16): sliding layers differ from full ones
REMOVED = (1, 2, 5)  # a cut inside and one at the end (the final norm's input)
TOL = 1e-5


def family_model(family: str, n_layers: int = 6, seed: int = 0):
    """A tiny random model of ``family`` whose layer types depend on the index: Qwen2/Qwen3 with the
    sliding window on above layer 3, Gemma-3 with period 3, Gemma-2 alternating."""
    import transformers as tf
    from transformers import AutoModelForCausalLM

    if family in ("qwen2", "qwen3"):
        cfg = tiny_config(family, n_layers, VOCAB).to_dict()
        cfg.update(use_sliding_window=True, sliding_window=8, max_window_layers=3, layer_types=None)
        cfg = (tf.Qwen2Config if family == "qwen2" else tf.Qwen3Config)(**cfg)
    elif family == "gemma3":
        cfg = tiny_config(family, n_layers, VOCAB).to_dict()
        cfg.update(layer_types=None, sliding_window_pattern=3)
        cfg = tf.Gemma3TextConfig(**cfg)
    else:
        cfg = tiny_config(family, n_layers, VOCAB)
    torch.manual_seed(seed)
    return AutoModelForCausalLM.from_config(cfg, dtype=torch.float32).eval()


def fitted(model, method: str, removed=REMOVED):
    """Operators of ``method`` fitted on random token ids (what is tested is the export, not the fit)."""
    if method == "none":
        return None
    g = torch.Generator().manual_seed(1)
    batch = Batch(torch.randint(0, VOCAB, (6, 32), generator=g))
    stack = Stack(model)
    cap = stack.capture(batch)  # captured once: every pass of the fit reads these states
    return get_recovery(method).fit(stack, removed, Activations(stack, [batch], [cap], [cap.states]))


def accepted(model) -> list[str]:
    return [m for m in RECOVERY.names() if RECOVERY.get(m).unsupported(Stack(model)) is None]


CHILD = textwrap.dedent(
    """
    import json, logging, shutil, sys
    import torch
    try:
        import ghostsearch  # noqa: F401
        sys.exit("ghostsearch was importable in the plain-transformers process")
    except ImportError:
        pass
    from transformers import AutoModelForCausalLM, AutoTokenizer

    class Grab(logging.Handler):
        def __init__(self):
            super().__init__(); self.lines = []
        def emit(self, record):
            self.lines.append(record.getMessage())

    grab = Grab()
    logging.getLogger("transformers").addHandler(grab)
    jobs, out = json.loads(open(sys.argv[1]).read()), {}
    for d in jobs["dirs"]:
        ref = torch.load(d + ".ref.pt")
        hooked = "auto_map" in json.load(open(d + "/config.json"))
        row = {}
        if hooked:
            try:
                AutoModelForCausalLM.from_pretrained(d)
                row["refused_without_trust"] = False
            except Exception as e:  # transformers' own refusal
                row["refused_without_trust"] = "trust_remote_code" in str(e)
        m = AutoModelForCausalLM.from_pretrained(d, trust_remote_code=hooked).eval()
        with torch.no_grad():
            row["delta"] = float((m(input_ids=ref["ids"]).logits - ref["logits"]).abs().max())
            ids = ref["ids"][:, :8]
            row["generated"] = m.generate(
                ids, attention_mask=torch.ones_like(ids), max_new_tokens=4, do_sample=False
            ).tolist()
        row["class"] = type(m).__name__
        row["mro"] = [c.__module__ + "." + c.__name__ for c in type(m).__mro__]
        row["layers"] = m.config.num_hidden_layers
        if jobs.get("tokenizer") == d:
            row["tokenizer"] = type(AutoTokenizer.from_pretrained(d, trust_remote_code=hooked)).__name__
        out[d] = row
    for d in jobs["unhooked"]:  # a user writes the base model_type back: loads, but not silently
        fake = d + "-base-type"
        shutil.copytree(d, fake)
        cfg = json.load(open(fake + "/config.json"))
        cfg["model_type"] = cfg["ghostsearch"]["base_model_type"]
        open(fake + "/config.json", "w").write(json.dumps(cfg))
        ref = torch.load(d + ".ref.pt")
        grab.lines.clear()
        m = AutoModelForCausalLM.from_pretrained(fake).eval()
        with torch.no_grad():
            delta = float((m(input_ids=ref["ids"]).logits - ref["logits"]).abs().max())
        out[fake] = {"class": type(m).__name__, "delta": delta, "log": "\\n".join(grab.lines)}
    open(sys.argv[2], "w").write(json.dumps(out))
    """
)


def run_plain(tmp: Path, dirs: list[str], unhooked: list[str] = (), tokenizer: str | None = None) -> dict:
    """Load ``dirs`` in one process where ``import ghostsearch`` fails (a package of that name that
    raises ImportError first on PYTHONPATH), with transformers' remote-code cache under ``tmp``."""
    block = tmp / "no-ghostsearch" / "ghostsearch"
    block.mkdir(parents=True, exist_ok=True)
    (block / "__init__.py").write_text("raise ImportError('ghostsearch is not installed in this process')\n")
    (tmp / "child.py").write_text(CHILD)
    (tmp / "jobs.json").write_text(json.dumps({"dirs": dirs, "unhooked": list(unhooked), "tokenizer": tokenizer}))
    env = {
        **os.environ,
        "PYTHONPATH": str(block.parent),
        "HF_MODULES_CACHE": str(tmp / "hf-modules"),
        "HF_HUB_OFFLINE": "1",
        "OMP_NUM_THREADS": "1",
    }
    proc = subprocess.run(
        [sys.executable, str(tmp / "child.py"), str(tmp / "jobs.json"), str(tmp / "out.json")],
        cwd=str(tmp),
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads((tmp / "out.json").read_text())


@torch.no_grad()
def reference(directory: Path, seed: int = 2, ids: torch.Tensor | None = None) -> None:
    """load_pruned's logits on ``ids`` (default: T random ids), saved beside the export for the plain process."""
    if ids is None:
        ids = torch.randint(0, VOCAB, (2, T), generator=torch.Generator().manual_seed(seed))
    m = load_pruned(directory)
    torch.save({"ids": ids, "logits": m(input_ids=ids).logits}, str(directory) + ".ref.pt")


def period_disagreements(cfg: dict) -> list[str]:
    """Config fields that state the layer types by a rule on the index and disagree with layer_types:
    Gemma's ``(i + 1) % sliding_window_pattern`` and Qwen's ``i >= max_window_layers`` (written out
    here, not taken from ghostsearch)."""
    types, bad = cfg.get("layer_types"), []
    if not types:
        return bad
    n = len(types)
    for key in ("sliding_window_pattern", "_sliding_window_pattern"):
        p = cfg.get(key)
        if p is not None and [("sliding" if (i + 1) % p else "full") + "_attention" for i in range(n)] != types:
            bad.append(f"{key}={p}")
    if cfg.get("max_window_layers") is not None and cfg.get("sliding_window") is not None:
        w = cfg["max_window_layers"]
        if [("sliding" if i >= w else "full") + "_attention" for i in range(n)] != types:
            bad.append(f"max_window_layers={w}")
    return bad


def check_card(directory: Path, method: str, hooked: bool) -> str:
    from huggingface_hub import ModelCard

    text = (directory / "README.md").read_text()
    card = ModelCard(text)  # the hub library's own parser (raises on bad metadata)
    data = card.data.to_dict()
    assert data["library_name"] == "transformers" and data["pipeline_tag"] == "text-generation"
    assert data["license"] and ("custom_code" in data["tags"]) == hooked
    assert data.get("base_model_relation", "finetune") in ("adapter", "merge", "quantized", "finetune")
    assert "None" not in text.replace("`none`", ""), text  # no Python None printed
    assert str(list(REMOVED)) in text and method in text
    return text


@pytest.mark.slow  # 37 exports and their loads (one subprocess): seconds, not the fast lane's
def test_every_family_and_method_loads_in_plain_transformers(tmp_path, smollm2_tokenizer_dir):
    """The issue's matrix, one subprocess for all of it; max |delta logit| <= 1e-5 against load_pruned."""
    from transformers import AutoTokenizer

    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # tiny matrices: more threads only spin (10x slower on a loaded machine)
    try:
        matrix(tmp_path, AutoTokenizer.from_pretrained(smollm2_tokenizer_dir))
    finally:
        torch.set_num_threads(threads)


def matrix(tmp_path: Path, tok) -> None:
    dirs, meta, unhooked, tok_dir = [], {}, [], None
    refused = {}
    for family in FAMILIES:
        model = family_model(family)
        methods = accepted(model)
        refused[family] = sorted(set(RECOVERY.names()) - set(methods))
        for method in methods:
            out = tmp_path / f"{family}-{method}"
            export(model, REMOVED, method, fitted(model, method), out, tokenizer=tok if tok_dir is None else None)
            tok_dir = tok_dir or str(out)
            reference(out)
            cfg = json.loads((out / "config.json").read_text())
            hooked = "auto_map" in cfg
            meta[str(out)] = (family, method, hooked, cfg)
            assert period_disagreements(cfg) == [], (family, method, cfg)
            check_card(out, method, hooked)
            dirs.append(str(out))
            if hooked and method == "ghosted" and family in ("llama", "gemma3"):
                unhooked.append(str(out))
    got = run_plain(tmp_path, dirs, unhooked, tok_dir)
    table = {}
    for d, (family, method, hooked, cfg) in meta.items():
        row = got[d]
        table[f"{family}/{method}"] = row["delta"]
        assert row["delta"] <= TOL, (family, method, row)
        assert row["layers"] == 6 - len(REMOVED)
        if hooked:
            assert row["refused_without_trust"] is True
            base = "transformers.models.{0}.modeling_{0}.{1}".format(
                family, cfg["ghostsearch"]["base_architectures"][0]
            )
            assert row["class"].startswith("Ghostsearch") and base in row["mro"], row["mro"]
            assert (
                cfg["model_type"] != cfg["ghostsearch"]["base_model_type"]
                and not (Path(d) / "recovery.safetensors").exists()
            )
            generated = (Path(d) / "modeling_ghostsearch.py").read_text() + (
                Path(d) / "configuration_ghostsearch.py"
            ).read_text()
            assert not re.search(r"^\s*(import|from)\s+ghostsearch\b", generated, re.M)
        ids = torch.load(d + ".ref.pt")["ids"][:, :8]
        want = load_pruned(d).generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=4, do_sample=False)
        want = want.tolist()
        assert row["generated"] == want, (family, method)
    assert got[tok_dir]["tokenizer"]
    for d in unhooked:  # the base model_type written back: the unrepaired model, and transformers says so
        row = got[d + "-base-type"]
        assert "UNEXPECTED" in row["log"] and "ghostsearch_repair.boundary_" in row["log"], row["log"]
        assert row["delta"] > 1e-2 and not row["class"].startswith("Ghostsearch")
    for family in ("gemma2", "gemma3", "olmo2"):
        assert "replaceme" in refused[family]
    print("\nmax |delta logit| plain transformers vs load_pruned:", json.dumps(table, indent=0))


@pytest.mark.parametrize(
    "family,removed,want",
    [
        ("qwen2", (1, 2), {"max_window_layers": 1}),  # kept [0, 3, 4, 5]: full, sliding x 3
        ("qwen3", (4, 5), {"max_window_layers": 3}),  # kept [0..3]: all full (depth 4 >= 4 none slide)
        ("gemma3", (1, 2), {"_sliding_window_pattern": 4}),  # s s s f
        ("gemma3", (2,), {"_sliding_window_pattern": 5}),  # s s s s f
        ("gemma3", (0,), {"_sliding_window_pattern": None}),  # s f s s f: no period states it
    ],
)
def test_period_fields_rewritten(family, removed, want):
    cfg = physically_prune(family_model(family), removed).config
    assert {k: getattr(cfg, k) for k in want} == want
    assert period_disagreements(cfg.to_dict()) == []


def test_consumer_warnings(tmp_path):
    """A one-line warning (CLI log and card) where llama.cpp's fixed rule mis-assigns a layer."""
    from ghostsearch.recovery.card import consumer_warnings

    g2 = physically_prune(family_model("gemma2"), (1,)).config  # odd-length cut: every later layer flips
    (w,) = consumer_warnings(g2)
    assert "llama.cpp" in w and "[1, 2, 3, 4]" in w and "\n" not in w
    assert consumer_warnings(physically_prune(family_model("gemma2"), (1, 2)).config) == []
    g3 = physically_prune(family_model("gemma3"), (1,)).config  # period 3 model: llama.cpp assumes 6
    assert "gemma3" in consumer_warnings(g3)[0]
    assert consumer_warnings(physically_prune(family_model("llama"), (1,)).config) == []
    out = export(family_model("gemma2"), (1,), "none", None, tmp_path / "g2")
    assert "llama.cpp" in (out / "README.md").read_text()
    assert json.loads((out / ".ghostsearch-export").read_text())["warnings"] == [w]


def test_first_layout_still_loads(tmp_path):
    """An export written before the remote-code layout (model_type ghostsearch_pruned, the matrices in
    recovery.safetensors) loads with load_pruned, equal to the same operators' new export."""
    from ghostsearch.recovery.base import new_index

    model = family_model("llama")
    ops = fitted(model, "ghosted")
    old = tmp_path / "old"
    physically_prune(model, REMOVED).save_pretrained(old)
    ops.save(old)  # recovery.json + recovery.safetensors, as the first layout wrote them
    cfg = json.loads((old / "config.json").read_text())
    cfg["ghostsearch"] = {"base_model_type": cfg["model_type"], "base_architectures": cfg["architectures"]}
    cfg["model_type"], cfg["architectures"] = "ghostsearch_pruned", ["GhostsearchPrunedForCausalLM"]
    (old / "config.json").write_text(json.dumps(cfg))
    (old / ".ghostsearch-export").write_text("{}")
    new = export(model, REMOVED, "ghosted", ops, tmp_path / "new")
    ids = torch.randint(0, VOCAB, (1, T), generator=torch.Generator().manual_seed(3))
    with torch.no_grad():
        a, b = load_pruned(old)(input_ids=ids).logits, load_pruned(new)(input_ids=ids).logits
        bare = physically_prune(model, REMOVED)(input_ids=ids).logits
    assert float((a - b).abs().max()) <= TOL and float((a - bare).abs().max()) > 1e-2
    from ghostsearch.recovery.base import Operators

    back = Operators.load(new)  # the matrices read back from the checkpoint, by original boundary
    assert sorted(back.mats) == sorted(ops.mats) == [3, 6] and new_index(6, REMOVED) == 3
    for b_, m in ops.mats.items():
        torch.testing.assert_close(back.mats[b_], m.float(), rtol=0, atol=0)
    with pytest.raises(GhostsearchError, match="load_pruned"):
        from transformers import AutoModelForCausalLM

        AutoModelForCausalLM.from_pretrained(old)


def test_operators_stay_fp32_in_bf16(tmp_path):
    """Loaded in bf16, the generated class keeps the operators fp32 (``_keep_in_fp32_modules_strict``) and
    gives load_pruned's bf16 logits."""
    from transformers import AutoModelForCausalLM

    model = family_model("llama")
    out = export(model, REMOVED, "ghosted", fitted(model, "ghosted"), tmp_path / "m")
    plain = AutoModelForCausalLM.from_pretrained(out, trust_remote_code=True, dtype=torch.bfloat16)
    assert {b.dtype for n, b in plain.named_buffers() if n.startswith("ghostsearch_repair.")} == {torch.float32}
    assert plain.model.layers[0].mlp.down_proj.weight.dtype == torch.bfloat16
    ids = torch.randint(0, VOCAB, (2, T), generator=torch.Generator().manual_seed(4))
    with torch.no_grad():
        got = plain(input_ids=ids).logits.float()
        want = load_pruned(out, dtype=torch.bfloat16)(input_ids=ids).logits.float()
    assert float((got - want).abs().max()) <= TOL


def test_tokenizer_of_an_operator_export_loads_without_prompt_or_warning(tmp_path, smollm2_tokenizer_dir, capfd):
    """transformers 5's AutoTokenizer reads config.json first: on an operator export, without
    ``trust_remote_code`` it asks at a terminal ("Do you wish to run the custom code? [y/N]"), then
    warns "You are using a model of type ghostsearch_ghosted_llama to instantiate a model of type ``".
    ghostsearch's own reader (eval of an export) hands it the base config; the card's snippet passes the flag."""
    from transformers import AutoTokenizer

    from ghostsearch.recovery.export import load_tokenizer

    model = family_model("llama")
    tok = AutoTokenizer.from_pretrained(smollm2_tokenizer_dir)
    out = export(model, REMOVED, "ghosted", fitted(model, "ghosted"), tmp_path / "m", tokenizer=tok)
    capfd.readouterr()
    got = load_tokenizer(out)
    err = capfd.readouterr().err
    assert "You are using a model of type" not in err and "custom code" not in err, err
    assert got("The capital of France").input_ids == tok("The capital of France").input_ids
    snippet = (out / "README.md").read_text()
    assert 'AutoTokenizer.from_pretrained("PATH", trust_remote_code=True)' in snippet
