"""LoRP as the paper defines it: the two-phase allocation over the REMAINING eligible blocks of each
cluster (recomputed after every pick), the similarity matrix from text (the perplexity calibration
set) whatever the search objective, and the RLS -> cluster-count rule (ghostsearch's own)."""

from __future__ import annotations

import numpy as np
import pytest

from ghostsearch.core.errors import GhostsearchError
from ghostsearch.search import FunctionEvaluator, Space, make_searcher, run
from ghostsearch.search.lorp import allocate, n_clusters_for, residual_redundancy


def two_clusters() -> tuple[np.ndarray, np.ndarray]:
    """10 blocks; cluster A = 0..5 (0 protected), B = 6..9 (9 protected). In A, blocks 1 and 2 are
    near-twins (0.99), both 0.6 to 3, 4, 5, which are 0.7 to each other; B is uniformly 0.3."""
    S = np.full((10, 10), 0.1)
    S[np.ix_(range(1, 6), range(1, 6))] = 0.6
    S[np.ix_(range(3, 6), range(3, 6))] = 0.7
    S[1, 2] = S[2, 1] = 0.99
    S[np.ix_(range(6, 10), range(6, 10))] = 0.3
    np.fill_diagonal(S, 1.0)
    return S, np.array([0] * 6 + [1] * 4)


def test_phase_two_recomputes_over_the_remaining_blocks():
    S, labels = two_clusters()
    eligible = list(range(1, 9))
    # phase 1: A (residual 0.68) then B: blocks 1 (twin of 2, lower index) and 6. Phase 2: A's
    # remaining {2,3,4,5} still score 0.65 > B's 0.3; with 1 gone, 2 is no longer redundant
    # (0.6 to the rest) while 3 is (0.67): 3, not the twin 2 a fixed per-block score would take.
    assert allocate(S, labels, eligible, 3) == (1, 3, 6)
    assert allocate(S, labels, eligible, 4) == (1, 3, 4, 6)
    assert residual_redundancy(S, [2, 3, 4, 5]) == pytest.approx(0.65)
    assert allocate(S, labels, eligible, 2) == (1, 6)  # phase 1 covers every cluster
    assert allocate(S, labels, eligible, 1) == (1,)  # k < clusters: the most redundant cluster


def test_cluster_score_falls_when_its_redundancy_is_used_up():
    """A: a tight pair (0.95) and nothing else; B: five blocks at 0.5. After phase 1 takes one of
    the pair, A has a single block left (no pairwise similarity): every later pick comes from B."""
    S = np.full((9, 9), 0.05)
    S[1, 2] = S[2, 1] = 0.95
    S[np.ix_(range(3, 8), range(3, 8))] = 0.5
    np.fill_diagonal(S, 1.0)
    labels = np.array([0, 0, 0, 1, 1, 1, 1, 1, 1])
    assert allocate(S, labels, list(range(1, 8)), 4) == (1, 3, 4, 5)
    assert allocate(S, labels, list(range(1, 8)), 7) == tuple(range(1, 8))  # and then A's last one


def test_rls_rule_is_monotone():
    assert [n_clusters_for(r) for r in (0.2, 0.69, 0.7, 0.99, 1.0, 3.0)] == [4, 4, 3, 3, 2, 2]


class SourcedOracle:
    """An in-process oracle with two calibration sources, like PoolClient's."""

    def __init__(self, by_source: dict):
        self.by_source, self.asked = by_source, []
        self.sources = {s: None for s in by_source if s is not None}  # a SourcedOracle: the sources it holds

    def statistic(self, name: str, source: str | None = None):
        self.asked.append((name, source))
        return self.by_source[source][name]


def test_similarity_source_is_asked_for():
    S, _ = two_clusters()
    far = np.eye(10) * 0.9 + 0.1  # a different geometry for the cell's own data
    ev = FunctionEvaluator(lambda r, f: float(sum(r)))
    oracle = SourcedOracle({"perplexity": {"similarity": S}, None: {"similarity": far}})
    s = run(make_searcher("lorp", Space(10, 3), params={"n_clusters": 2}), ev, oracle=oracle)
    assert oracle.asked == [("similarity", "perplexity")] and s.similarity_from == "perplexity"
    own = run(
        make_searcher("lorp", Space(10, 3), params={"n_clusters": 2, "similarity_source": "objective"}),
        ev,
        oracle=SourcedOracle({None: {"similarity": far}}),
    )
    assert own.similarity_from == "objective"
    with pytest.raises(GhostsearchError, match="similarity_source"):
        make_searcher("lorp", Space(10, 3), params={"similarity_source": "c4"})


@pytest.mark.slow
def test_margin_run_clusters_on_the_perplexity_text(tiny_model_dir, data_dir, tmp_path, ray_local):
    """A real margin search with lorp on a real pool: its answer is LoRP's on the similarity of the
    PERPLEXITY calibration set (computed here by a local Scorer). On this tiny model both sets give
    the same choice, so the pool client is also checked directly: with source='perplexity' it
    returns the text similarity, without it the margin items', and an unknown source is refused."""
    from ghostsearch.config import load_config
    from ghostsearch.objectives import ObjectiveSpec
    from ghostsearch.pool.client import PoolClient
    from ghostsearch.pool.pool import release_pool, start_pool
    from ghostsearch.run.runner import search
    from ghostsearch.rundir import Ledger
    from ghostsearch.scoring import scorer_from_config

    items = {
        "model": tiny_model_dir,
        "dtype": "fp32",
        "device": "cpu",
        "objective": "margin",
        "calibration.n_seq": 8,
        "calibration.seq_len": 64,
        "k": 2,
        "searcher": "lorp",
        "seed": 0,
        "out": str(tmp_path / "run"),
        "pool.actors": 1,
        "pool.threads": 1,
        "pool.dashboard": False,
    }
    if data_dir:
        items["data_dir"] = data_dir
    cfg = load_config(None, [f"{k}={v}" for k, v in items.items()])
    got = search(cfg, progress=False)
    sc = scorer_from_config(cfg, threads=1)
    S = {
        obj: np.asarray(sc.statistic(sc.prepare(ObjectiveSpec.make(obj, cfg.calibration_spec(obj))), "similarity"))
        for obj in ("perplexity", "margin")
    }
    assert np.abs(S["perplexity"] - S["margin"]).max() > 1e-3
    want = run(
        make_searcher("lorp", Space(6, 2), seed=0),
        FunctionEvaluator(lambda r, f: 0.0, statistics={"similarity": S["perplexity"]}),
    )
    (cell,) = got["cells"].values()
    assert tuple(cell["removed"]) == want.choice
    broker = start_pool(cfg)
    client = PoolClient(
        broker,
        cfg.objective_spec(),
        Ledger(tmp_path / "client"),
        "c",
        0,
        cfg.model,
        cfg.dtype,
        sources={"perplexity": cfg.calibration_spec("perplexity")},
    )
    try:
        np.testing.assert_allclose(client.statistic("similarity", source="perplexity"), S["perplexity"], atol=1e-6)
        np.testing.assert_allclose(client.statistic("similarity"), S["margin"], atol=1e-6)
        with pytest.raises(GhostsearchError, match="no such calibration source"):
            client.statistic("similarity", source="kl")
    finally:
        release_pool(broker)
        client.ledger.close()
