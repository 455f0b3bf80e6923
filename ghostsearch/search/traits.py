"""What the rest of ghostsearch reads of a searcher without running it: its traits, class attributes
with defaults that a searcher states in its own file (or keeps). ``plan`` and the memory plan read
``uses_prefix``, ``blocks_run``, ``prefix_runs`` and ``same_set_for_every_objective``; compare's
claims ``objective_blind`` and ``cost_class``; ``target`` ``nested_path``; bench/search.py and the
conformance suite ``uses_seed`` and ``conformance_variants``. No module outside the searcher's own
file names a searcher to decide something (tests/architecture/test_searcher_names.py).

``search.base.Searcher`` inherits them; the base itself keeps what every searcher needs to run (its
parameters, budget, ask/tell/done and the contract's checks)."""

from __future__ import annotations

from typing import Any, ClassVar


class Traits:
    uses_prefix: ClassVar[bool] = False
    """Asks R + {j} with R's cached hidden states as ``Candidate.prefix`` (greedy, beam): an
    evaluation then runs only the blocks from j on (``blocks_run``), and an actor keeps prefix runs
    (``prefix_runs``)."""
    objective_blind: ClassVar[bool] = False
    """Its set is not found by searching the objective's values: a dense statistic picks it (shortgpt,
    streamline, lorp) or a few statistic-ranked windows (fastblock). The claim "objectives shape the
    removed set" leaves such searchers out."""
    cost_class: ClassVar[str | None] = None
    """The claim "complex searchers gain little over simple ones": ``"complex"`` (ga, bo, cbo, beam),
    ``"simple"`` (oneshot, fastblock) or None (in neither group)."""
    nested_path: ClassVar[bool] = False
    """True: one run at k passes through a set of every smaller k, each containing the one before
    (greedy's accepted path), so ``target`` runs it once at the largest k and reads the others from
    the path (study/target.py ``nested_path``)."""
    uses_seed: ClassVar[bool] = True
    """False: no seed enters its run (greedy, beam, oneshot, fastblock: a race's row order is fixed
    too), so one run stands for every seed (bench/search.py --matched runs it once). The conformance
    suite checks that another seed gives the same run."""
    conformance_variants: ClassVar[dict[str, dict]] = {}
    """Extra parameter sets the conformance suite runs besides the defaults and ``+race``, by label
    suffix (``{"+endgame": {"race": True, "endgame": 0.5}}`` gives the case ``ga+endgame``)."""

    @classmethod
    def blocks_run(cls, n_blocks: int, k: int) -> float:
        """Expected blocks one evaluation runs, prefix caching included: a searcher with a prefix
        (``uses_prefix``) starts R + {j} at j, on average half the free depth; a k-subset starts at its
        first removed block (the deepest cached dense state before it), on average L/(k+1)."""
        if cls.uses_prefix:
            return max(1.0, (n_blocks - k) / 2)
        return max(1.0, n_blocks - n_blocks / (k + 1) - k)

    @classmethod
    def prefix_runs(cls, params: Any, k: int) -> int:
        """Prefix runs (the hidden states of an accepted set, cached) an actor may hold for one run of
        this searcher at ``k`` (memplan); 0 without ``uses_prefix``."""
        return 0

    @classmethod
    def same_set_for_every_objective(cls, params: Any) -> bool:
        """True when this searcher's set does not depend on the cell's objective at all (lorp with
        ``similarity_source: perplexity``: one set for every objective, evaluated once; plan counts
        it once)."""
        return False
