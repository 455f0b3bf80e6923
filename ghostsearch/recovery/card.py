"""The model card (README.md) of an export, and the one-line warnings where a known consumer's fixed
rule would mis-assign a layer of the pruned model.

The card's front matter is what a model hub reads (``huggingface_hub.ModelCard`` parses it):
``base_model`` (a hub id, only where one is known: the built-in models' ``hub`` in
``model.models.BUILTIN``, or a hub id given as the model), ``base_model_relation``, ``library_name``,
``pipeline_tag``, ``license`` (carried from the base: the built-in's, else the base directory's own
README.md front matter, else ``unknown``) and ``tags``. The text says what the weights are (dtype,
provenance), which blocks were removed, the repair and the data it was fitted on, and, for an export
of a ``ghostsearch target`` run's certified set, the certificate.
"""

from __future__ import annotations

from pathlib import Path

# The hub's base_model_relation values (huggingface.co/docs/hub/model-cards#specifying-a-base-model).
# It has no "pruned": "finetune" is its term for a derived model whose weights changed.
HUB_RELATIONS = ("adapter", "merge", "quantized", "finetune")
RELATION = "finetune"

# Consumers that derive a layer's attention type from a fixed rule on its index instead of reading
# the config's layer_types: llama.cpp's llm_arch hparams (set_swa_pattern: layer il slides unless
# il % period == period - 1).
FIXED_PERIODS = {
    "gemma2": ("llama.cpp's gemma2 rule (odd layers global)", 2),
    "gemma3": ("llama.cpp's gemma3 rule (every 6th layer global)", 6),
}
FAMILY_OF = {"gemma3_text": "gemma3"}


def consumer_warnings(config) -> list[str]:
    """One line per known consumer whose fixed layer-type rule disagrees with this (pruned) config's
    ``layer_types``, and per period field that cannot state them (``stack.period_fields``)."""
    from ghostsearch.model.stack import pattern_types, period_fields

    types = list(getattr(config, "layer_types", None) or [])
    family = FAMILY_OF.get(config.model_type, config.model_type)
    out = []
    if types and family in FIXED_PERIODS:
        who, period = FIXED_PERIODS[family]
        wrong = [i for i, (a, b) in enumerate(zip(types, pattern_types(len(types), period))) if a != b]
        if wrong:
            out.append(
                f"{who} gives layer(s) {wrong} of this export the wrong attention type (and RoPE base): the cut "
                "broke the period; run it where layer_types is read (transformers), not llama.cpp"
            )
    for key, val in period_fields(config).items():
        if val is None and key == "max_window_layers":
            out.append(
                f"max_window_layers cannot state this export's layer_types {types}: a consumer that derives the "
                "sliding layers from it mis-assigns some; use one that reads layer_types (transformers)"
            )
    return out


def base_facts(spec: str | None) -> dict:
    """What the card can say of the base model ``spec`` (a built-in name, a hub id, a local directory
    or a .gguf file): hub id (None: local), licence (None: unknown), provenance of the weights, name."""
    from ghostsearch.core.io import cache_dir
    from ghostsearch.model.models import BUILTIN

    if not spec:
        return {"hub": None, "license": None, "source": "an unnamed model", "name": "model"}
    for name in BUILTIN:  # a built-in's converted cache directory (a model's name_or_path) is that built-in
        if Path(spec).expanduser() == cache_dir() / "models" / name:
            spec = name
    if spec in BUILTIN:
        b = BUILTIN[spec]
        return {
            "hub": b.get("hub"),
            "license": b.get("license"),
            "source": f"ghostsearch's built-in `{spec}`: {b.get('provenance') or 'the ' + b['gguf']}",
            "name": (b.get("hub") or spec).split("/")[-1],
        }
    p = Path(spec).expanduser()
    if p.suffix == ".gguf":
        return {
            "hub": None,
            "license": None,
            "source": f"de-quantised from the local GGUF file `{p.name}`",
            "name": p.stem,
        }
    if p.exists():
        return {
            "hub": None,
            "license": local_license(p),
            "source": f"the local model directory `{p.name}`",
            "name": p.name,
        }
    return {"hub": spec, "license": None, "source": f"the hub model `{spec}`", "name": spec.split("/")[-1]}


def local_license(directory: Path) -> str | None:
    """The ``license`` of a local model directory's own model card, if it states one."""
    readme = directory / "README.md"
    if not readme.is_file():
        return None
    try:
        from huggingface_hub import ModelCard

        lic = getattr(ModelCard(readme.read_text(errors="replace"), ignore_metadata_errors=True).data, "license", None)
    except Exception:  # noqa: BLE001  (an unreadable card states no licence)
        return None
    return lic if isinstance(lic, str) and lic.strip() else None


def certificate_lines(cert: dict) -> list[str]:
    """The card's section for a ``ghostsearch target`` certificate (result.json's ``target`` block)."""
    bound = cert.get("target") or {}
    thresh = f"perplexity ratio <= {bound['max_ratio']}" if "max_ratio" in bound else f"drop <= {bound.get('max_drop')}"
    held = ", ".join(cert.get("held_out") or []) or "the run's held-out evaluation data"
    return [
        "## Certificate (`ghostsearch target`)",
        "",
        f"> {cert.get('statement', '').strip()}",
        "",
        f"- k: {cert.get('certified_k')} blocks removed, {cert.get('removed')}",
        f"- Metric: `{cert.get('metric')}`, target {thresh}",
        f"- Estimate {cert.get('estimate_shown')}, one-sided {cert.get('level')} upper bound {cert.get('upper_shown')}",
        f"- Level: {cert.get('level')} ({cert.get('spending')} spending over looks {cert.get('looks')})",
        f"- Items: {cert.get('items_used')} held-out items (windows for a perplexity) per model, from {held}",
        f"- Repair certified: `{cert.get('recovery')}`; the guarantee holds for this repair fit and these data "
        "(docs/target.md in ghostsearch)",
        "",
    ]


def load_snippet(hooked: bool) -> str:
    if hooked:
        return (
            "```python\nfrom transformers import AutoModelForCausalLM, AutoTokenizer\n"
            'model = AutoModelForCausalLM.from_pretrained("PATH", trust_remote_code=True)\n'
            'tokenizer = AutoTokenizer.from_pretrained("PATH", trust_remote_code=True)\n```\n\n'
            "`trust_remote_code=True` runs this directory's `modeling_ghostsearch.py` (generated by ghostsearch, "
            "short: read it first): the base family's transformers classes plus the repair operators, "
            "fp32 buffers `ghostsearch_repair.boundary_J` applied as h <- h + h M before kept block J. Without "
            "it transformers refuses the directory (AutoTokenizer reads config.json too: without the flag it asks "
            "at a terminal and warns elsewhere). Do not write the base `model_type` back into config.json: "
            "that loads the unrepaired model (transformers then lists the `ghostsearch_repair.*` weights as "
            'UNEXPECTED in its load report). `ghostsearch.load_pruned("PATH")` gives the same model. '
            "PATH: this directory, or its hub id once uploaded."
        )
    return (
        "```python\nfrom transformers import AutoModelForCausalLM, AutoTokenizer\n"
        'model = AutoModelForCausalLM.from_pretrained("PATH")\n'
        'tokenizer = AutoTokenizer.from_pretrained("PATH")\n```\n\n'
        'A standard checkpoint of the base architecture (`ghostsearch.load_pruned("PATH")` gives the same model). '
        "PATH: this directory, or its hub id once uploaded."
    )


def model_card(
    info: dict,
    method: str,
    removed,
    n_blocks: int,
    hooked: bool,
    dtype: str,
    n_params: int,
    warnings: list[str],
) -> str:
    """README.md of an export. ``info``: ``base_model`` (the model spec), ``variant``, ``calibration``
    (the repair's data, None for no fitting), ``search`` (the search's data, a phrase or None),
    ``version``, ``certificate`` (result.json's target block with ``held_out``, or None) and
    ``certificate_note`` (why a run's certificate does not cover this export, or None)."""
    base = base_facts(info.get("base_model"))
    kept = n_blocks - len(removed)
    tags = ["ghostsearch", "depth-pruning", "pruned"] + (["custom_code"] if hooked else [])
    front = ["---"]
    if base["hub"]:
        front += [f"base_model: {base['hub']}", f"base_model_relation: {RELATION}"]
    front += [
        "library_name: transformers",
        "pipeline_tag: text-generation",
        f"license: {base['license'] or 'unknown'}",
        f"tags: [{', '.join(tags)}]",
        "---",
    ]
    if base["hub"]:
        where = f"[{base['hub']}](https://huggingface.co/{base['hub']}) ({base['source']})"
    else:
        where = f"{base['source']}: no hub id known (a local model); `base_model` is left out of the metadata"
    licence = (
        f"{base['license']}, carried from the base model"
        if base["license"]
        else "unknown: the base model states none here; check its terms before sharing"
    )
    repair = {
        "none": "none: the blocks are deleted, nothing fitted",
        "replaceme": "ReplaceMe: a linear map per cut, folded into the `mlp.down_proj` of the block before it",
    }.get(method, f"`{method}`, folded into the weights of the block before each cut")
    if hooked:
        repair = (
            f"`{method}`: a [C x C] operator M per cut, h <- h + h M in fp32 on the state entering the next kept "
            "block (the final norm for a cut at the end), stored in this checkpoint"
        )
    if info.get("variant"):
        repair = repair.replace(":", f" (variant {info['variant']}):", 1)
    lines = [
        *front,
        "",
        f"# {base['name']} with {len(removed)} of {n_blocks} blocks removed ({method})",
        "",
        f"- Base model: {where}",
        f"- Relation: depth-pruned{'' if method == 'none' else ' and repaired'} (`base_model_relation: {RELATION}`: "
        "the hub has no 'pruned' relation)",
        f"- Licence: {licence}",
        f"- Weights: {dtype}, {n_params:,} parameters; from {base['source']}",
        f"- Removed blocks (0-based, of {n_blocks}): {list(removed)}; {kept} blocks kept",
        f"- Repair: {repair}",
        f"- Repair data: {info.get('calibration') or 'none (nothing fitted)'}",
    ]
    if info.get("search"):
        lines.append(f"- Search data (which blocks to remove): {info['search']}")
    lines += [f"- Written by ghostsearch {info.get('version') or ''}".rstrip(), ""]
    if info.get("certificate"):
        lines += certificate_lines(info["certificate"])
    elif info.get("certificate_note"):
        lines += ["## Certificate", "", info["certificate_note"], ""]
    lines += ["## How to load", "", load_snippet(hooked), ""]
    lines += [
        "## Deploying",
        "",
        (
            "transformers (`trust_remote_code=True`). vLLM and llama.cpp cannot run the repair operators: export "
            "a folded repair or `--method none`/`replaceme` for them (ghostsearch docs/recovery.md, Deploying)."
            if hooked
            else "A standard checkpoint: transformers, vLLM, and llama.cpp after GGUF conversion "
            "(ghostsearch docs/recovery.md, Deploying)."
        ),
        "",
    ]
    if warnings:
        lines += ["## Warnings", "", *[f"- {w}" for w in warnings], ""]
    return "\n".join(lines)
