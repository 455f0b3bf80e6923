"""Real SmolLM2-135M: ghosted (and its symmetric ablation), linearpatch, replaceme and none on
WikiText-2 after C4 calibration; recovery-aware scoring equals the physically pruned + repaired
model; export round trips."""

import math

import pytest
import torch

from ghostsearch.core.errors import GhostsearchError
from ghostsearch.recovery import Activations, get_recovery
from ghostsearch.recovery.export import export, load_pruned, pruned_model

pytestmark = pytest.mark.slow


def window(sc, key, k):
    """The contiguous window of k blocks with the smallest angular distance (not touching the ends)."""
    wd = sc.statistic(key, "window_distance")[k]
    i = min(range(1, sc.stack.n_blocks - k), key=lambda i: wd[i])
    return tuple(range(i, i + k))


def wiki_ppl(sc, key, wiki, removed, method, **kw):
    rec = get_recovery(method, **kw)
    ops = rec.fit(sc.stack, removed, Activations.from_scorer(sc, key))
    with rec.patches(sc.stack, ops) as patches:
        return sc.score(wiki, removed, patches=patches).value, ops


@pytest.mark.parametrize("k", [4, 6, 8])
def test_repairs_align_and_help(smol, k):
    """Ghosted and LinearPatch beat none on WikiText-2; Ghosted and ReplaceMe improve the calibration
    alignment (LinearPatch's one symmetric rotation-scaling need not: 0.998 against 0.995 at k=8),
    and the alignment errors are ordered as the operator spaces nest. Which repair wins, and whether
    ReplaceMe's least-squares T transfers to other text, are study questions, not asserted here.
    Measured 2026-11-30 at k=8 (blocks 11-18), WikiText-2 PPL after C4 calibration (../shared/data):
    none 1,120, linearpatch 900, ghosted 484, ReplaceMe 1,204 (it aligns the calibration, 0.16
    against 0.99, and still loses to no repair: the CI failure of stop 19), symmetric ablation
    3.3e5; on the fresh-machine fallback (LAMBADA for both): 1,069 / 764 / 156 / 345 / 2.1e5."""
    sc, calib, wiki = smol
    removed = window(sc, calib, k)
    ppl, ops = {}, {}
    for m, variant in (
        ("none", None),
        ("linearpatch", None),
        ("ghosted", None),
        ("ghosted", "symmetric"),
        ("replaceme", None),
    ):
        name = f"{m} {variant}" if variant else m
        ppl[name], ops[name] = wiki_ppl(sc, calib, wiki, removed, m, variant=variant)
    rep = {m: o.report[0] for m, o in ops.items()}
    align = {m: r["alignment_after"] for m, r in rep.items()}
    print(
        f"\nk={k} removed={removed} wikitext2 PPL {ppl} alignment {align} antisymmetric share of "
        f"W {rep['ghosted']['antisymmetric_share_w']:.3f}, of M {rep['ghosted']['antisymmetric_share']:.3f}; "
        f"linearpatch rotation {rep['linearpatch']['rotation']}"
    )
    assert max(ppl[m] for m in ("linearpatch", "ghosted")) < ppl["none"]
    assert max(align[m] for m in ("ghosted", "replaceme")) < align["none"]
    # LinearPatch's P = H diag(s) H^T is symmetric: the best symmetric M aligns at least as well,
    # and the unconstrained M at least as well as that
    assert align["ghosted"] <= align["ghosted symmetric"] + 1e-9 <= align["linearpatch"] + 2e-9
    assert align["ghosted"] < align["none"]
    assert 0 < rep["ghosted"]["antisymmetric_share_w"] < 1 and 0 < rep["ghosted"]["antisymmetric_share"] < 1
    assert rep["linearpatch"]["rotation"] == "hadamard had36^T x sylvester 16 (quarot)"  # the default since issue 37


@torch.no_grad()
def test_aware_score_equals_pruned_repaired_model(aware):
    sc, calib = aware
    removed = window(sc, calib, 4)
    rows = 4
    aware = sc.score(calib, removed, fidelity=rows / 8).value
    ops = get_recovery("ghosted").fit(sc.stack, removed, Activations.from_scorer(sc, calib))
    model = pruned_model(sc.stack.model, ops)
    ids = sc.prepared[calib].batches[0].input_ids[:rows]
    logits = model(input_ids=ids).logits[:, :-1].float()
    nll = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), ids[:, 1:].reshape(-1))
    assert aware == pytest.approx(math.exp(float(nll)), rel=1e-4)
    with pytest.raises(GhostsearchError, match=r"longer than search.aware_window=\d+; raise it"):
        sc.score(calib, window(sc, calib, 6))


@pytest.mark.parametrize("method", ["ghosted", "replaceme"])
@torch.no_grad()
def test_export_reload_same_logits(smol, method, tmp_path):
    from transformers import AutoModelForCausalLM

    sc, calib, _ = smol
    removed = window(sc, calib, 4) + (sc.stack.n_blocks - 1,)  # a cut inside and one at the end
    if method == "replaceme":
        removed = removed[:-1]
    ops = get_recovery(method).fit(sc.stack, removed, Activations.from_scorer(sc, calib))
    ref = pruned_model(sc.stack.model, ops)
    out = export(sc.stack.model, removed, method, ops, tmp_path / "m", tokenizer=sc.tokenizer)
    ids = sc.prepared[calib].batches[0].input_ids[:1, :48]
    want = ref(input_ids=ids).logits
    reloaded = load_pruned(out)
    got = reloaded(input_ids=ids).logits
    assert reloaded.config.num_hidden_layers == sc.stack.n_blocks - len(removed)
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-4)
    if method == "replaceme":  # a plain checkpoint
        plain = AutoModelForCausalLM.from_pretrained(out)(input_ids=ids).logits
        torch.testing.assert_close(plain, want, rtol=1e-5, atol=1e-4)
    with pytest.raises(GhostsearchError, match="--force"):
        export(sc.stack.model, removed, method, ops, out)
    print(
        f"\n{method} {removed}: "
        + ", ".join(f"cut {r['cut']} align {r['alignment_before']:.3f}->{r['alignment_after']:.3f}" for r in ops.report)
    )


def test_sequential_variant_and_bad_sets(aware):
    sc, calib = aware
    data = Activations.from_scorer(sc, calib)
    removed = (10, 11, 14, 15)
    dense = get_recovery("ghosted", variant="dense").fit(sc.stack, removed, data)
    seq = get_recovery("ghosted", variant="sequential").fit(sc.stack, removed, data)
    assert sorted(dense.mats) == sorted(seq.mats) == [12, 16]
    torch.testing.assert_close(seq.mats[12], dense.mats[12])  # first cut: the same dense input
    assert not torch.allclose(seq.mats[16], dense.mats[16])  # second: fitted on the repaired model
    assert all(math.isfinite(r["alignment_after"]) for r in seq.report)
    with pytest.raises(GhostsearchError, match="leave at least one"):
        get_recovery("ghosted").fit(sc.stack, range(sc.stack.n_blocks), data)
    with pytest.raises(GhostsearchError, match="block before the cut"):
        get_recovery("replaceme").fit(sc.stack, (0, 1), data)
    with pytest.raises(GhostsearchError, match="variant"):
        get_recovery("linearpatch", variant="dense")
