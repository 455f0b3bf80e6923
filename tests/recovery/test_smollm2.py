"""Real SmolLM2-135M: ghosted (and its symmetric ablation), linearpatch, replaceme and none on
WikiText-2 after C4 calibration; recovery-aware scoring equals the physically pruned + repaired
model; export round trips."""

import math
from pathlib import Path

import pytest
import torch

from ghostsearch.core.errors import GhostsearchError
from ghostsearch.recovery import Activations, get_recovery
from ghostsearch.recovery.export import export, pruned_model

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


@torch.no_grad()
def test_every_export_loads_in_plain_transformers(smol, tmp_path):
    """Every repair SmolLM2 accepts, exported with a cut inside and one at the end (replaceme, folded:
    inside only) and loaded in one process where ghostsearch cannot be imported: max |delta logit|
    <= 1e-5 against load_pruned, which equals the in-memory repaired model."""
    import resource

    from huggingface_hub import ModelCard

    from ghostsearch.recovery import RECOVERY
    from ghostsearch.recovery.base import Recovery
    from tests.recovery.test_export import TOL, reference, run_plain

    cpu0 = resource.getrusage(resource.RUSAGE_SELF).ru_utime + resource.getrusage(resource.RUSAGE_CHILDREN).ru_utime
    sc, calib, _ = smol
    inner = window(sc, calib, 4)
    data = Activations.from_scorer(sc, calib)
    ids = sc.prepared[calib].batches[0].input_ids[:2, :48]
    dirs, deltas = [], {}
    for method in RECOVERY.names():
        rec: Recovery = get_recovery(method)
        if rec.unsupported(sc.stack) is not None:
            continue
        removed = inner if method in ("replaceme", "folded") else inner + (sc.stack.n_blocks - 1,)
        ops = None if method == "none" else rec.fit(sc.stack, removed, data)
        out = export(sc.stack.model, removed, method, ops, tmp_path / method, tokenizer=sc.tokenizer)
        reference(out, ids=ids)
        if method == "ghosted":  # load_pruned (its hooks) is the repaired model in memory
            ref = torch.load(str(out) + ".ref.pt")
            want = pruned_model(sc.stack.model, ops)(input_ids=ids).logits
            torch.testing.assert_close(want, ref["logits"], rtol=1e-5, atol=1e-4)
        text = (out / "README.md").read_text()
        assert ModelCard(text).data.base_model == "HuggingFaceTB/SmolLM2-135M-Instruct"
        assert "base_model: HuggingFaceTB/SmolLM2-135M-Instruct" in text and "license: apache-2.0" in text
        assert "Q4_1" in text and "float32" in text
        dirs.append(str(out))
        with pytest.raises(GhostsearchError, match="--force"):
            export(sc.stack.model, removed, method, ops, out)
    got = run_plain(tmp_path, dirs, tokenizer=dirs[0])
    for d in dirs:
        deltas[Path(d).name] = got[d]["delta"]
        assert got[d]["delta"] <= TOL, (d, got[d])
    assert {"ghosted", "linearpatch", "replaceme", "none"} <= set(deltas)
    cpu = resource.getrusage(resource.RUSAGE_SELF).ru_utime + resource.getrusage(resource.RUSAGE_CHILDREN).ru_utime
    print(f"\nSmolLM2 max |delta logit| plain transformers vs load_pruned: {deltas} ({cpu - cpu0:.0f} CPU-s)")


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
