"""lorp: redundant blocks from the geometry of the block inputs (similarity clusters).

The similarity matrix comes from text (the perplexity objective's calibration set, C4 by default)
whatever the search objective, as in the paper (128 C4 sequences; ghostsearch uses the configured
perplexity n_seq x seq_len): ``similarity_source: perplexity``. ``similarity_source: objective``
reads it from the cell's own calibration data instead (e.g. Commonsense items for ``margin``).
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from typing import Any

import numpy as np

from ghostsearch.core.errors import GhostsearchError
from ghostsearch.search.base import EXACT, Candidate, Removed, SourcedOracle, Space, canonical
from ghostsearch.search.common import Memo, require_ints, statistic

SOURCES = ("perplexity", "objective")


def rls(S: np.ndarray) -> float:
    """Representation-level similarity: -log2 of the mean off-diagonal cosine (clipped above 0)."""
    off = S[~np.eye(len(S), dtype=bool)]
    return float(-np.log2(max(off.mean(), 1e-6)))


def n_clusters_for(r: float) -> int:
    """Cluster count from RLS: ghostsearch's own rule. The paper only says a higher RLS (localised
    redundancy) means coarser clusters and that K is set by hand from RLS ranges it does not give;
    these thresholds (2 from RLS 1.0, 3 from 0.7, else 4) are ours."""
    return 2 if r >= 1.0 else 3 if r >= 0.7 else 4


def cluster(S: np.ndarray, n_clusters: int, seed: int) -> np.ndarray:
    """Spectral clustering of the blocks on the affinity (S + 1) / 2; labels [L]."""
    from sklearn.cluster import SpectralClustering

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "graph is not fully connected" on near-zero affinities
        sc = SpectralClustering(n_clusters=n_clusters, affinity="precomputed", random_state=seed)
        return sc.fit_predict((np.asarray(S) + 1.0) / 2.0)


def redundancy(S: np.ndarray, i: int, rest: list[int]) -> float:
    """Block i's mean similarity to the other blocks of ``rest`` (-inf when it has none)."""
    mates = [j for j in rest if j != i]
    return float(S[i, mates].mean()) if mates else -np.inf


def residual_redundancy(S: np.ndarray, rest: list[int]) -> float:
    """Mean pairwise similarity among ``rest`` (-inf below two blocks): the paper's cluster score."""
    if len(rest) < 2:
        return -np.inf
    sub = S[np.ix_(rest, rest)]
    return float(sub[~np.eye(len(rest), dtype=bool)].mean())


def allocate(S: np.ndarray, labels: np.ndarray, eligible: list[int], k: int) -> Removed:
    """The paper's two-phase allocation over the REMAINING eligible blocks of each cluster, every
    quantity recomputed after every pick. A block's redundancy: its mean similarity to the other
    remaining eligible blocks of its cluster; a cluster's: the mean pairwise similarity among them.
    Phase 1 (coverage): the most redundant eligible block of each cluster. Phase 2: repeatedly,
    the cluster with the highest residual redundancy gives its most redundant remaining block.
    Ghostsearch's rules where the paper is silent: with k below the number of clusters, phase 1
    visits clusters in order of residual redundancy; a cluster with one remaining block scores
    -inf (it is chosen only when no other cluster has blocks left); ties go to the lower index."""
    left = {c: [i for i in eligible if labels[i] == c] for c in sorted(set(labels[eligible]))}
    chosen: list[int] = []

    def pick(c) -> None:
        i = max(left[c], key=lambda i: (redundancy(S, i, left[c]), -i))
        left[c].remove(i)
        chosen.append(i)

    for c in sorted(left, key=lambda c: (-residual_redundancy(S, left[c]), c)):
        if len(chosen) < k:
            pick(c)
    while len(chosen) < k:
        pick(max((c for c in left if left[c]), key=lambda c: (residual_redundancy(S, left[c]), -c)))
    return canonical(chosen)


class LoRP(Memo):
    """LoRP: cluster the blocks by the similarity of their inputs, remove the most redundant ones
    spread over the clusters (see ``allocate``). The first and last block are always protected.
    Evaluates its one answer. After setup: ``self.rls``, ``self.labels`` (cluster per block),
    ``self.n_clusters``, ``self.choice`` and ``self.similarity_from`` (where S came from) for reports."""

    name = "lorp"
    ends_by_itself = True  # one allocation
    objective_blind = True  # the similarity of block inputs picks the set

    @dataclass
    class Params:
        n_clusters: int | None = None  # None: from RLS
        similarity_source: str = "perplexity"  # or "objective" (the cell's own calibration data)

        def __post_init__(self):
            require_ints(self, "n_clusters")
            if self.similarity_source not in SOURCES:
                raise ValueError(f"similarity_source must be one of: {', '.join(SOURCES)}")

    @classmethod
    def expected_evaluations(cls, space: Space, params: Any, budget=None, rows=None) -> tuple[float, str]:
        """Its one allocation, scored once."""
        return 1.0, EXACT

    @classmethod
    def same_set_for_every_objective(cls, params: Any) -> bool:
        """S from a fixed source (perplexity's text by default), not the cell's objective: one set."""
        return params.similarity_source != "objective"

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        L = self.space.n_blocks
        self.eligible = [i for i in self.space.free if i not in (0, L - 1)]
        if self.space.k > len(self.eligible):
            raise GhostsearchError(
                f"lorp protects the first and last block: k={self.space.k} is more than the "
                f"{len(self.eligible)} blocks left; lower k"
            )

    def setup(self, oracle) -> None:
        super().setup(oracle)
        S = np.asarray(self.similarity(), dtype=float)
        L = self.space.n_blocks
        if S.shape != (L, L):
            raise GhostsearchError(f"similarity has shape {S.shape}, expected ({L}, {L})")
        self.rls = rls(S)
        self.n_clusters = min(self.params.n_clusters or n_clusters_for(self.rls), L)
        self.labels = cluster(S, self.n_clusters, self.seed)
        self.choice = allocate(S, self.labels, self.eligible, self.space.k)

    def similarity(self):
        """S from ``similarity_source``. A plain ``Oracle`` (in-process evaluators with one set of
        statistics) is read as it is (``similarity_from = 'oracle'``); a ``SourcedOracle`` (the pool's
        client) is asked for the source's."""
        src = self.params.similarity_source
        if src == "objective" or not isinstance(self.oracle, SourcedOracle):
            self.similarity_from = "objective" if src == "objective" else "oracle"
            return statistic(self, "similarity")
        self.similarity_from = src
        return self.oracle.statistic("similarity", source=src)

    def ask(self) -> list[Candidate]:
        return [Candidate(self.choice)]

    @property
    def done(self) -> bool:
        return self.choice in self.memo
