"""Config: one validated structure, YAML + key=value overrides, one-line errors before any model work."""

from pathlib import Path

import pytest
import torch

from ghostsearch.config import load_config
from ghostsearch.core.errors import GhostsearchError

CONFIGS = sorted((Path(__file__).parents[2] / "configs").glob("*.yaml"))


@pytest.mark.parametrize("path", CONFIGS, ids=[p.name for p in CONFIGS])
def test_every_shipped_config_validates(path):
    load_config(str(path))


def test_overrides_are_typed_and_nested():
    cfg = load_config(None, ["k=6", "calibration.n_seq=16", "compare.ks=4,6", "search.params.ga.budget=30"])
    assert cfg.k == 6 and cfg.calibration.n_seq == 16
    assert cfg.compare.ks == [4, 6]
    assert cfg.search.params["ga"]["budget"] == 30


@pytest.mark.parametrize(
    "overrides, message",
    [
        (["calibration.nseq=4"], "did you mean calibration.n_seq"),
        (["k=six"], "k='six' has the wrong type"),
        (["k=0"], "must remove at least one block"),
        (["objective=perplexty"], "perplexity"),
        (["calibration.per_objective.margn.n_seq=4"], "margin"),
        (["calibration.per_objective.margin.n_sq=4"], "did you mean calibration.per_objective.margin.n_seq"),
        (["calibration.per_objective.margin.n_seq=0"], "calibration.per_objective.margin.n_seq must be positive"),
        (["objective=margin", "calibration.per_objective.margin.dataset=c4"], "does not suit objective 'margin'"),
        (["just-a-word"], "is not key=value"),
        (["compare.seeds=[]"], "compare.seeds is empty"),
        (["eval.protocol=fast"], "eval.protocol='fast'; use quick"),
        (["compare.recovery=[]"], "compare.recovery is empty"),
        (["compare.recovery=[none,magic]"], "compare.recovery has 'magic'"),
        (["compare.budget=equal"], "compare.budget='equal'; use matched"),
        (["recovery.dataset=arc_easy"], "repair calibrates on text"),
        (["objective_params.recovery=ghosted"], "search.recovery_aware=ghosted"),
        (["search.recovery_aware=linearpatch"], "supports ghosted"),
    ],
)
def test_bad_input_is_one_clear_line(overrides, message):
    with pytest.raises(GhostsearchError, match=message) as e:
        load_config(None, overrides)
    assert "\n" not in str(e.value)


def test_calibration_per_objective_overrides_only_that_objective():
    cfg = load_config(
        None, ["calibration.n_seq=4", "calibration.seq_len=128", "calibration.per_objective.margin.n_seq=12"]
    )
    ppl, margin = cfg.calibration_spec("perplexity"), cfg.calibration_spec("margin")
    assert (ppl.n_seq, ppl.seq_len) == (4, 128)
    assert (margin.n_seq, margin.seq_len) == (12, 128)
    # the overrides are part of the run fingerprint: a changed margin set is a different run
    other = load_config(
        None, ["calibration.n_seq=4", "calibration.seq_len=128", "calibration.per_objective.margin.n_seq=8"]
    )
    assert cfg.fingerprint() != other.fingerprint()


def test_per_objective_does_not_inherit_a_dataset_that_does_not_suit_it():
    """calibration.dataset=lambada with a margin entry naming no dataset: margin gets its own default
    (commonsense), perplexity keeps lambada; a dataset named in the entry itself is still checked."""
    cfg = load_config(
        None,
        [
            "calibration.dataset=lambada",
            "compare.objectives=[perplexity,margin]",
            "calibration.per_objective={margin: {n_seq: 4}}",
        ],
    )
    assert (cfg.calibration_spec("margin").dataset, cfg.calibration_spec("margin").n_seq) == ("commonsense", 4)
    assert cfg.calibration_spec("perplexity").dataset == "lambada"
    with pytest.raises(GhostsearchError, match="does not suit objective 'margin'"):  # no entry: not silently changed
        load_config(None, ["calibration.dataset=lambada", "compare.objectives=[perplexity,margin]"])


def test_replaceme_cosine_optimiser_from_the_config():
    from ghostsearch.recovery.repair import recovery_from_config

    cfg = load_config(
        None,
        [
            "recovery.method=replaceme",
            "recovery.variant=cosine",
            "recovery.steps=7",
            "recovery.lr=0.01",
            "calibration.seed=3",
        ],
    )
    rec = recovery_from_config(cfg)
    assert (rec.variant, rec.steps, rec.lr, rec.seed) == ("cosine", 7, 0.01, 3)
    with pytest.raises(GhostsearchError, match="recovery.steps=0"):
        load_config(None, ["recovery.steps=0"])


def test_calibration_seeds_draw_each_cells_sample_by_its_seed():
    """compare.calibration_seeds: a cell's calibration draw is calibration.seed + the cell's seed, so
    two seeds of a deterministic searcher see different calibration windows; off, every cell shares one."""
    from ghostsearch.data.corpora import sample_windows

    ids = torch.arange(10_000)
    for on in (False, True):
        cfg = load_config(None, ["calibration.seed=3", f"compare.calibration_seeds={str(on).lower()}"])
        specs = [cfg.objective_spec("perplexity", s) for s in (0, 1)]
        assert [c.calibration.seed for c in specs] == ([3, 4] if on else [3, 3])
        assert (specs[0].key() != specs[1].key()) == on  # the pool's cache and the ledger key by it
        w = [sample_windows(ids, 4, 32, c.calibration.seed) for c in specs]
        assert torch.equal(w[0], w[1]) != on
    assert cfg.objective_spec("perplexity").calibration.seed == 3  # `search` (no cell): calibration.seed
