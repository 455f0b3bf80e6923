"""``folded`` on tiny random models of every listed family: the fold into the writers' weights
equals the same maps applied as hooks, the unpruned scoring patches compute the folded model, the
reported alignment is the folded model's, the export is a plain checkpoint of the base family, and
a cut at block 0 is refused in one line."""

import pytest
import torch

from ghostsearch.core.errors import GhostsearchError
from tests.conftest import FAMILIES, tiny_config, tiny_model

REMOVED = (2, 3)


VOCAB = 512  # a small vocabulary: the model build and the logits stay cheap


@pytest.fixture(scope="module")
def batches():
    """Four micro-batches of 2 x 64 seeded random tokens (the model is random too: text would carry
    no more meaning for it); four, so that the attention step is judged on a held-out one."""
    from ghostsearch.model.stack import Batch

    g = torch.Generator().manual_seed(0)
    return [Batch(input_ids=torch.randint(0, VOCAB, (2, 64), generator=g)) for _ in range(4)]


def fitted(family: str, batches, removed=REMOVED):
    from ghostsearch.model.stack import Stack
    from ghostsearch.recovery import Activations, get_recovery

    torch.set_num_threads(2)
    model = tiny_model(family, 6, vocab=VOCAB)
    stack = Stack(model)
    caps = [stack.capture(b) for b in batches]
    data = Activations(stack, batches, caps, [c.states for c in caps])
    rec = get_recovery("folded")
    return model, stack, data, rec, rec.fit(stack, removed, data)


FAST = ("llama",)  # the fast lane's family (matrices); the scales (gemma2/3, olmo2) and the rest are slow


def lanes(families):
    return [f if f in FAST else pytest.param(f, marks=pytest.mark.slow) for f in families]


@pytest.mark.parametrize("family", lanes(FAMILIES))
def test_fold_equals_hooks_patches_and_report(family, batches):
    from ghostsearch.model.stack import Stack, physically_prune
    from ghostsearch.recovery.export import pruned_model

    model, stack, data, rec, ops = fitted(family, batches)
    (row,) = ops.report
    scales = family in ("gemma2", "gemma3", "olmo2")
    assert ops.mats[2].shape == ((2, 64) if scales else (2, 64, 64))
    assert row["maps"] == ("per-channel scales" if scales else "C x C matrices")
    assert set(row["held_out_alignment"]) == {"0.0", "0.5", "1.0"} and row["attention_step"] in (0.0, 0.5, 1.0)
    ids = batches[0].input_ids[:2, :32]
    folded = pruned_model(model, ops)
    hooked = physically_prune(model, REMOVED)
    handles = rec.hook(hooked, ops)
    with torch.no_grad():
        lf, lh = folded(ids).logits, hooked(ids).logits
    for h in handles:
        h.remove()
    assert (lf - lh).abs().max() <= 1e-5  # the fold is the hooked maps, exactly (fp32)
    assert (lf - physically_prune(model, REMOVED)(ids).logits).abs().max() > 1e-3  # and it changed something
    # unpruned scoring with the patches computes the folded model's final state
    cap = stack.capture(batches[0])
    with rec.patches(stack, ops) as p, torch.no_grad():
        h = stack.run(cap.states[1], cap, 1, REMOVED, patches=p)
    want = Stack(folded).capture(batches[0]).states[-1]
    assert (h - want).abs().max() <= 1e-4 * want.abs().max()
    # the reported alignment is the folded block's, measured here on the fitting data
    num = ref = 0.0
    with rec.patches(stack, ops), torch.no_grad():
        for c, _ in data:
            out = stack.block(1, c.states[1], c)
            num += float(((c.states[4] - out).double() ** 2).sum())
            ref += float((c.states[4].double() ** 2).sum())
    assert row["alignment_after"] == pytest.approx((num / ref) ** 0.5, rel=1e-3)
    assert row["alignment_after"] < row["alignment_before"]


@pytest.mark.parametrize("family", [pytest.param(f, marks=pytest.mark.slow) for f in ("llama", "gemma3")])
def test_export_is_a_plain_checkpoint(family, batches, tmp_path):
    from transformers import AutoModelForCausalLM

    from ghostsearch.recovery.export import export, pruned_model

    model, _, _, _, ops = fitted(family, batches)
    out = export(model, REMOVED, "folded", ops, tmp_path / "m")
    assert not (out / "recovery.safetensors").exists()
    plain = AutoModelForCausalLM.from_pretrained(out).eval()  # transformers alone, the base model type
    assert plain.config.model_type == model.config.model_type and plain.config.num_hidden_layers == 4
    ids = batches[0].input_ids[:2, :32]
    with torch.no_grad():
        assert (plain(ids).logits - pruned_model(model, ops)(ids).logits).abs().max() <= 1e-5


def test_a_cut_at_block_0_is_refused_in_one_line():
    from ghostsearch.model.stack import Stack
    from ghostsearch.recovery import Activations, get_recovery

    stack = Stack(tiny_model("llama", 3, vocab=VOCAB))
    with pytest.raises(GhostsearchError, match=r"^folded needs a kept block before the cut 0\.\.1 .*ghosted") as e:
        get_recovery("folded").fit(stack, (0, 1), Activations(stack, []))  # refused before reading any data
    assert "\n" not in str(e.value)


def test_every_listed_family_has_writers_on_the_meta_device():
    from ghostsearch.model.models import on_meta
    from ghostsearch.model.stack import Stack
    from ghostsearch.recovery import RECOVERY

    for family in FAMILIES:
        assert RECOVERY.get("folded").unsupported(Stack(on_meta(tiny_config(family, 3)))) is None
