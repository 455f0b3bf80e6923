"""ga: a prior-guided genetic algorithm on k-subsets (DEAP), with EvoPress-style multi-step selection.

The searcher owns its random generators: each generation draws from its own ``random.Random``
seeded by (seed, generation), so a resumed run continues exactly and any number of GA searchers
may share a process (threads included). DEAP's ``selTournament`` draws from the global
``random``, so tournament selection is written here (``select_tournament``, the same draws);
DEAP still gives the fitness, the individuals and ``selBest`` (which draws nothing)."""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from operator import attrgetter

import numpy as np
from deap import base, tools

from ghostsearch.search.base import Candidate, Removed, canonical
from ghostsearch.search.common import ModelBased, prior_weights, require_ints, sample_unseen
from ghostsearch.search.racing import Race, race_params

UNIT = {"range": (0, 1)}  # a probability or a fraction (Searcher.parse_params checks it)


class FitnessMin(base.Fitness):
    weights = (-1.0,)


class Individual(list):
    """A k-set as a DEAP individual (a sorted list of block indices with a fitness)."""

    def __init__(self, blocks, value: float):
        super().__init__(blocks)
        self.fitness = FitnessMin((value,))


def select_tournament(rng: random.Random, individuals: list, k: int, tournsize: int) -> list:
    """DEAP's ``tools.selTournament`` drawing from ``rng`` instead of the global ``random``: k times,
    the fittest of ``tournsize`` individuals drawn with replacement (the same draws, in the same order)."""
    return [max((rng.choice(individuals) for _ in range(tournsize)), key=attrgetter("fitness")) for _ in range(k)]


def cx_subset(a, b, k: int, rng: random.Random) -> Removed:
    """Cardinality-preserving crossover: keep what both parents share, fill up from the rest of their union."""
    common = set(a) & set(b)
    rest = sorted((set(a) | set(b)) - common)
    return canonical(list(common) + rng.sample(rest, k - len(common)))


def mut_swap(s: Removed, free: list[int], weight: dict[int, float], rng: random.Random) -> Removed:
    """Swap mutation biased by the prior: a block that looks important (low weight) tends to leave
    the set, a block that looks cheap to remove (high weight) tends to enter it."""
    out = rng.choices(s, weights=[1.0 / weight[i] for i in s])[0]
    pool = [i for i in free if i not in s]
    into = rng.choices(pool, weights=[weight[i] for i in pool])[0]
    return canonical([i for i in s if i != out] + [into])


class GA(ModelBased):
    """Phase 0: every single-block removal (the prior). Phase 1: an initial population of
    ``pop_size`` k-sets, the prior's top-k plus sets sampled with prior weights, at full fidelity.
    Each generation: ``offspring`` new sets (tournament selection, ``cx_prob`` crossover,
    ``mut_prob`` swap mutation; duplicates re-drawn) are screened at fidelity ``screen``, the
    ``promote`` best are scored at full fidelity, and the next population is the best ``pop_size``
    of parents and promoted children (elitism). Only full-fidelity values rank individuals.

    With ``race`` (``auto``, the default: on when the calibration has >= 32 rows) the screen/promote
    split is a race instead: each generation's affordable offspring are raced, the ``promote`` best
    end at full fidelity (search/racing.py), spending at most one evaluation per offspring; ``screen`` is then
    unused. The single-block prior is raced too.

    Endgame (``endgame``, a fraction of the budget; 0 = off, the old behaviour): once at most
    ``endgame`` x the budget is left, at a generation's start, ga stops breeding and spends the rest
    on a one-swap local search around its best full-fidelity k-set: that set's neighbours (one
    block out, one block in), unscored ones only (neither full nor partial in the memo), in a fixed
    order (the prior's: swapping in a block whose single removal is cheap for one whose removal is
    costly first; ties by set), ``offspring`` at a time, raced keeping 1 (exact without a race:
    ``promote`` at a time); after each batch the centre is the best k-set so far. No random draw, so
    a seed's run and its resume by ledger replay are deterministic. When the centre has no unscored
    neighbour left (a local optimum), breeding resumes."""

    name = "ga"
    conformance_variants = {  # tests/search/test_search_conformance.py runs these besides ga and ga+race
        "+endgame": {"race": True, "endgame": 0.5},
        "+endgame-exact": {"race": False, "endgame": 0.5},
    }

    @dataclass
    class Params:
        pop_size: int = 6
        offspring: int = 16
        promote: int = 3
        screen: float = field(default=0.25, metadata=UNIT)  # fidelity of the screening step; 1.0 = no screening
        cx_prob: float = field(default=0.7, metadata=UNIT)
        mut_prob: float = field(default=0.7, metadata=UNIT)
        tournament: int = 2
        temperature: float = 1.0  # of the prior weights; larger = closer to uniform
        race: bool | str | dict = "auto"  # race each generation (and the prior); false: screen, then promote
        warm_start: bool = False  # the first population starts with the shared cache's best k-sets
        warm_n: int = 4  # how many of them
        # the last fraction of the budget: a one-swap local search around the best (0: off)
        endgame: float = field(default=0.0, metadata=UNIT)

        def __post_init__(self):
            race_params(self.race)
            require_ints(self, "pop_size", "offspring", "promote", "tournament", "warm_n")
            if self.promote > self.offspring:
                raise ValueError("promote must be <= offspring")
            if not 0 < self.screen <= 1 or self.temperature <= 0:
                raise ValueError("screen must be in (0, 1] and temperature > 0")

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.population: list[Removed] | None = None
        self.generation = 0
        self.screened: dict[Removed, float] | None = None  # this generation's screening values

    def weights(self) -> dict[int, float]:
        return dict(zip(self.space.free, prior_weights(self.prior, self.params.temperature)))

    def breed(self, n: int) -> list[Removed]:
        """n new distinct unseen k-sets from the population, drawn from this generation's own
        ``random.Random`` (seeded by (seed, generation); nothing global)."""
        rng = random.Random(self.seed * 1_000_003 + self.generation)
        p, k, w = self.params, self.space.k, self.weights()
        toolbox = base.Toolbox()
        toolbox.register("select", select_tournament, rng, tournsize=p.tournament)
        toolbox.register("mate", cx_subset, k=k, rng=rng)
        toolbox.register("mutate", mut_swap, free=self.space.free, weight=w, rng=rng)
        pop = [Individual(s, self.memo[s]) for s in (self.population or [])]
        out: list[Removed] = []
        for _ in range(50 * n):
            if len(out) == n:
                break
            a, b = toolbox.select(pop, 2)
            child = toolbox.mate(a, b) if rng.random() < p.cx_prob else tuple(a)
            if rng.random() < p.mut_prob or self.seen(child) or child in out:
                child = toolbox.mutate(child)
            if not self.seen(child) and child not in out:
                out.append(child)
        if len(out) < n:  # the population has converged: explore with the prior
            np_rng = np.random.default_rng([self.seed, self.generation])
            out += sample_unseen(
                np_rng,
                self.space,
                np.array(list(w.values())),
                set(self.memo) | set(self.partial) | set(out),
                n - len(out),
            )
        return out

    def centre(self) -> Removed | None:
        """The best full-fidelity k-set so far (ties: the smaller set)."""
        k = self.space.k
        sets = [(v, s) for s, v in self.memo.items() if len(s) == k]
        return min(sets)[1] if sets else None

    def neighbours(self) -> list[Removed]:
        """The centre's unscored one-swap neighbours in the endgame's fixed order: by prior(in) -
        prior(out) (a low prior = cheap to remove), then by set."""
        c = self.centre()
        if c is None:
            return []
        prior = dict(zip(self.space.free, self.prior))
        out = []
        for o in c:
            for i in self.space.free:
                if i in c:
                    continue
                s = canonical([b for b in c if b != o] + [i])
                if not self.seen(s):
                    out.append((prior[i] - prior[o], s))
        return [s for _, s in sorted(out)]

    def in_endgame(self) -> bool:
        """At a generation's start, with at most ``endgame`` x the budget left and a neighbour to score."""
        total, e = self.budget.evaluations, self.params.endgame
        if not e or total is None or self.population is None or self.screened is not None:
            return False
        return self.budget_left <= e * total + 1e-9 and bool(self.neighbours())

    def phase(self) -> str:
        if self.singles():
            return "singles"
        if self.population is None:
            return "init"
        if self.in_endgame():
            return "endgame"
        if self.racing():
            return "race"
        return "screen" if self.screened is None else "promote"

    def plan(self) -> int:
        """How many offspring this generation can screen, leaving enough budget to promote."""
        p, left = self.params, self.budget_left
        if p.screen == 1:
            return self.affordable(p.offspring)
        m = min(p.promote, self.affordable(p.promote))
        return min(p.offspring, int((left - m) / p.screen + 1e-9)) if m else 0

    def ask(self) -> list[Candidate] | Race:
        phase = self.phase()
        if phase == "singles":
            return self.ask_singles()
        if phase == "endgame":
            raced = self.racing() is not None
            n = self.affordable(self.params.offspring if raced else self.params.promote)
            return self.raced([Candidate(s) for s in self.neighbours()[:n]], keep=1)
        if phase == "race":
            n = self.affordable(self.params.offspring)  # a race of n costs at most n: one it can afford
            return self.raced([Candidate(s) for s in self.breed(n)], keep=min(self.params.promote, n))
        if phase == "init":
            rng = np.random.default_rng([self.seed, 2**31])
            first = self.first(self.prior_topk())[: self.params.pop_size]
            first += sample_unseen(
                rng,
                self.space,
                prior_weights(self.prior, self.params.temperature),
                set(first),
                self.params.pop_size - len(first),
            )
            return [Candidate(s) for s in first[: self.affordable(len(first))]]
        if phase == "screen":
            return [Candidate(s, fidelity=self.params.screen) for s in self.breed(self.plan())]
        screened = self.screened or {}  # the promote phase comes only after a screen
        best = sorted(screened, key=lambda s: (screened[s], s))
        return [Candidate(s) for s in best[: self.affordable(self.params.promote)]]

    def tell(self, candidates, values) -> None:
        phase = self.phase()
        super().tell(candidates, values)
        if phase == "init":
            self.population = [c.removed for c in candidates]
        elif phase == "screen" and self.params.screen < 1:
            self.screened = {c.removed: float(v) for c, v in zip(candidates, values)}
        elif phase != "singles":  # promoted children, race winners, full-fidelity offspring when screen == 1,
            # or the endgame's neighbours (the population stays the best pop_size, should breeding resume)
            children = [c.removed for c in candidates if c.fidelity >= 1.0]
            pop = [Individual(s, self.memo[s]) for s in (self.population or []) + children]
            self.population = [canonical(i) for i in tools.selBest(sorted(pop), self.params.pop_size)]
            self.generation += 1
            self.screened = None

    @property
    def done(self) -> bool:
        phase = self.phase()
        if phase == "singles":
            return False
        if phase == "promote":
            return self.affordable(1) == 0
        exhausted = sum(len(s) == self.space.k for s in {**self.memo, **self.partial}) >= self.space.n_subsets()
        return exhausted or (self.affordable(1) == 0 if phase in ("init", "race", "endgame") else self.plan() == 0)
