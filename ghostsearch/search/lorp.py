"""lorp: redundant blocks from the geometry of the block inputs (similarity clusters)."""
from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np

from ghostsearch.errors import GhostsearchError
from ghostsearch.search.base import Candidate, Removed, canonical
from ghostsearch.search.common import Memo, require_ints, statistic


def rls(S: np.ndarray) -> float:
    """Representation-level similarity: -log2 of the mean off-diagonal cosine (clipped above 0)."""
    off = S[~np.eye(len(S), dtype=bool)]
    return float(-np.log2(max(off.mean(), 1e-6)))


def n_clusters_for(r: float) -> int:
    return 2 if r >= 1.0 else 3 if r >= 0.7 else 4


def cluster(S: np.ndarray, n_clusters: int, seed: int) -> np.ndarray:
    """Spectral clustering of the blocks on the affinity (S + 1) / 2; labels [L]."""
    from sklearn.cluster import SpectralClustering

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "graph is not fully connected" on near-zero affinities
        sc = SpectralClustering(n_clusters=n_clusters, affinity="precomputed", random_state=seed)
        return sc.fit_predict((np.asarray(S) + 1.0) / 2.0)


def allocate(S: np.ndarray, labels: np.ndarray, eligible: list[int], k: int) -> Removed:
    """Two-phase allocation. A block's redundancy is its mean similarity to the rest of its cluster.
    Phase 1: the most redundant eligible block of each cluster, clusters in order of their mean
    redundancy (while fewer than k are chosen). Phase 2: repeatedly, the cluster whose remaining
    eligible blocks have the highest mean redundancy gives its most redundant remaining block."""
    red = {}
    for i in eligible:
        mates = [j for j in np.flatnonzero(labels == labels[i]) if j != i]
        red[i] = float(S[i, mates].mean()) if mates else -np.inf
    left = {c: sorted((i for i in eligible if labels[i] == c), key=lambda i: (-red[i], i)) for c in set(labels[eligible])}

    def score(c):  # the mean redundancy of the cluster's remaining eligible blocks
        return np.mean([red[i] for i in left[c]]) if left[c] else -np.inf

    chosen: list[int] = []
    for c in sorted(left, key=lambda c: (-score(c), c)):
        if len(chosen) < k:
            chosen.append(left[c].pop(0))
    while len(chosen) < k:
        c = max(sorted(left), key=score)
        chosen.append(left[c].pop(0))
    return canonical(chosen)


class LoRP(Memo):
    """LoRP: cluster the blocks by the similarity of their inputs, remove the most redundant ones
    spread over the clusters (see ``allocate``). The first and last block are always protected.
    Evaluates its one answer. After setup: ``self.rls``, ``self.labels`` (cluster per block),
    ``self.n_clusters`` and ``self.choice`` for reports."""

    name = "lorp"

    @dataclass
    class Params:
        n_clusters: int | None = None  # None: from RLS

        def __post_init__(self):
            require_ints(self, "n_clusters")

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        L = self.space.n_blocks
        self.eligible = [i for i in self.space.free if i not in (0, L - 1)]
        if self.space.k > len(self.eligible):
            raise GhostsearchError(
                f"lorp protects the first and last block: k={self.space.k} is more than the "
                f"{len(self.eligible)} blocks left; lower k")

    def setup(self, oracle) -> None:
        super().setup(oracle)
        S = np.asarray(statistic(self, "similarity"), dtype=float)
        L = self.space.n_blocks
        if S.shape != (L, L):
            raise GhostsearchError(f"similarity has shape {S.shape}, expected ({L}, {L})")
        self.rls = rls(S)
        self.n_clusters = min(self.params.n_clusters or n_clusters_for(self.rls), L)
        self.labels = cluster(S, self.n_clusters, self.seed)
        self.choice = allocate(S, self.labels, self.eligible, self.space.k)

    def ask(self) -> list[Candidate]:
        return [Candidate(self.choice)]

    @property
    def done(self) -> bool:
        return self.choice in self.memo
