"""oneshot: the k best blocks by a per-block prior, evaluated once. shortgpt: the same with Block Influence."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from ghostsearch.search.base import EXACT, Candidate, Space
from ghostsearch.search.common import Prior


class OneShot(Prior):
    """Top-k by a per-block prior.

    prior='removal': ask every free single-block removal {i} (len(free) evaluations), keep the k
    with the lowest value, then evaluate that k-set so the answer has a real value.
    prior='block_influence': the k free blocks with the lowest Block Influence, one evaluation.
    """

    name = "oneshot"
    ends_by_itself = True  # the prior, then one k-set
    uses_seed = False  # no random draw: a function of the values told
    cost_class: ClassVar[str | None] = "simple"

    @dataclass
    class Params:
        prior: str = "removal"  # 'removal' | 'block_influence'

    @classmethod
    def expected_evaluations(cls, space: Space, params: Any, budget=None, rows=None) -> tuple[float, str]:
        """Every free single-block removal, then the top-k set (one of them when k = 1); with Block
        Influence, the top-k set alone."""
        return float(cls.min_budget(space, params)), EXACT

    def ask(self) -> list[Candidate]:
        return self.singles() or [Candidate(self.prior_topk())]

    @property
    def done(self) -> bool:
        return not self.singles() and self.prior_topk() in self.memo


class ShortGPT(OneShot):
    """ShortGPT (Men et al., 2024): remove the k blocks with the lowest Block Influence."""

    name = "shortgpt"
    default_prior = "block_influence"
    objective_blind = True  # Block Influence picks the set
    cost_class = None

    @dataclass
    class Params:  # no parameters: the prior is always Block Influence
        pass
