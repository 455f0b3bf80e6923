"""fastblock (fast-block-select): contiguous windows ranked by the angular distance across them,
the best few re-scored for real. streamline: the single best window (no re-scoring)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from ghostsearch.core.errors import GhostsearchError
from ghostsearch.search.base import EXACT, Candidate, Removed, Space
from ghostsearch.search.common import Memo, require_ints, statistic


def windows(space: Space) -> list[int]:
    """Start indices i of the windows i..i+k-1 that contain no protected block."""
    return [
        i for i in range(space.n_blocks - space.k + 1) if not any(j in space.protected for j in range(i, i + space.k))
    ]


class FastBlock(Memo):
    """Rank every window of k consecutive free blocks by window_distance[k][i] (the angular
    distance between the hidden state entering block i and the one leaving block i+k-1; smallest
    first), evaluate the ``n_rescore`` best windows, keep the best real value."""

    name = "fastblock"
    ends_by_itself = True  # n_rescore windows
    uses_seed = False  # no random draw: a function of the values told
    objective_blind = True  # the windows are ranked by a statistic; the objective only re-scores the few best
    cost_class: ClassVar[str | None] = "simple"

    @dataclass
    class Params:
        n_rescore: int = 4

        def __post_init__(self):
            require_ints(self, "n_rescore")

    @classmethod
    def expected_evaluations(cls, space: Space, params: Any, budget=None, rows=None) -> tuple[float, str]:
        """The n_rescore best windows of k consecutive free blocks (every window when fewer)."""
        return float(min(int(getattr(params, "n_rescore", 1)), len(windows(space)))), EXACT

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        if not windows(self.space):
            raise GhostsearchError(
                f"{self.name}: no {self.space.k} consecutive unprotected blocks; lower k or protect fewer blocks"
            )

    def setup(self, oracle) -> None:
        super().setup(oracle)
        k, starts = self.space.k, windows(self.space)
        dist = statistic(self, "window_distance")
        if k not in dist:
            raise GhostsearchError(f"window_distance has no entry for k={k}; compute it with k in its window sizes")
        d = np.asarray(dist[k], dtype=float)[starts]
        n = getattr(self.params, "n_rescore", 1)
        self.ranked: list[Removed] = [tuple(range(starts[i], starts[i] + k)) for i in np.argsort(d, kind="stable")]
        self.chosen = self.ranked[:n]

    def ask(self) -> list[Candidate]:
        todo = [Candidate(w) for w in self.chosen if w not in self.memo]
        return todo[: self.affordable(len(todo))]

    @property
    def done(self) -> bool:
        return all(w in self.memo for w in self.chosen) or self.affordable(1) == 0


class Streamline(FastBlock):
    """Streamline-style layer selection: remove the contiguous window whose input and output hidden
    states are the most similar (cosine), i.e. fast-block-select without re-scoring."""

    name = "streamline"
    cost_class = None

    @dataclass
    class Params:  # no parameters: one window, the most similar
        pass
