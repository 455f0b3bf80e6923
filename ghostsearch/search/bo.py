"""bo: prior-guided Bayesian optimisation of k-subsets with Optuna (ask/tell)."""

from __future__ import annotations

import zlib
from dataclasses import dataclass

import numpy as np
import optuna
from optuna.distributions import FloatDistribution
from optuna.trial import TrialState

from ghostsearch.search.base import Candidate, Removed, canonical
from ghostsearch.search.common import ModelBased, prior_weights, require_ints, sample_unseen
from ghostsearch.search.racing import Race, race_params

SAMPLERS = ("gp", "tpe")


class BO(ModelBased):
    """Encoding: one float key in [0, 1] per free block; the k blocks with the largest keys are
    removed (ties: lower index), so every point is a feasible k-set.

    Starts: after the prior (see ``Prior``), the prior's top-k set and ``n_prior_samples`` sets drawn
    with prior weights are enqueued (keys 1 for removed blocks, 0 for kept). Then the sampler
    (GPSampler, or multivariate TPE) proposes ``batch`` points per ask.

    Duplicates: different keys can give a k-set already scored. Such a proposal is marked failed
    in the study and replaced by its nearest unseen neighbour (the cheapest exchange of two keys,
    see ``nearest_unseen``), enqueued and told its real value, so every trial costs exactly one
    evaluation and the sampler never learns a value for keys that did not produce it.

    Determinism and resume: the sampler is rebuilt before every ask with a seed drawn from (seed,
    completed trials), so a replayed run (resume replays the ledger) proposes exactly what an
    uninterrupted one would. With ``storage`` (a file path) the study is an Optuna JournalStorage
    file that ``optuna-dashboard`` opens; a fresh searcher starts the study afresh there (a resumed
    run rebuilds it by replay), so the sampler never sees a trial twice.

    Racing (``race``: ``auto``, the default, races when the calibration has >= 32 rows): the starts
    and every ask's ``batch`` proposals (as many as the budget affords) are raced, keeping 1, and the
    single-block prior too. A dropped proposal is told to the study with its partial value (an
    estimate on the rows it saw); local moves start from the best full-fidelity trial."""

    name = "bo"
    conformance_variants = {"-batch1": {"race": False, "batch": 1}}  # one proposal per ask (the conformance suite)

    @classmethod
    def run_params(cls, params: dict, run_dir, cell: str) -> dict:
        """The study's journal lives in the run directory (RUN_DIR/optuna-<cell>.log) unless set."""
        return {"storage": str(run_dir / f"optuna-{cell}.log"), **params}

    @dataclass
    class Params:
        sampler: str = "gp"  # 'gp' | 'tpe'
        prior: str = "removal"  # 'removal' | 'block_influence'
        n_prior_samples: int = 8
        n_random: int = 0  # random trials after the starts before the model takes over
        temperature: float = 0.5  # of the prior weights; larger = closer to uniform
        batch: int = 8  # proposals per ask (raced; without racing each costs a full evaluation)
        race: bool | str | dict = "auto"
        local_every: int = 3  # every local_every-th trial is a local move around the incumbent; 0: never
        storage: str | None = None  # JournalStorage file, e.g. RUN_DIR/optuna-<cell>.log
        study_name: str | None = None
        warm_start: bool = False  # the starts begin with the shared cache's best k-sets
        warm_n: int = 4  # how many of them

        def __post_init__(self):
            race_params(self.race)
            if self.sampler not in SAMPLERS:
                raise ValueError(f"sampler must be one of {SAMPLERS}")
            require_ints(self, "batch", "warm_n")
            require_ints(self, "n_prior_samples", "n_random", "local_every", least=0)
            if self.temperature <= 0:
                raise ValueError("temperature must be > 0")

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.trials: list[tuple[list[float], float, bool]] = []  # completed trials: keys, value, full fidelity
        self.asked: dict[int, Removed] = {}  # trial number -> set, between ask and tell
        self.study: optuna.Study | None = None

    # ---------- encoding ----------
    def keys_name(self, i: int) -> str:
        return f"x{i:03d}"

    def decode(self, params: dict) -> Removed:
        keys = [(-params[self.keys_name(i)], i) for i in self.space.free]
        return canonical(i for _, i in sorted(keys)[: self.space.k])

    def encode(self, s: Removed) -> dict:
        return {self.keys_name(i): float(i in s) for i in self.space.free}

    @property
    def distributions(self) -> dict:
        return {self.keys_name(i): FloatDistribution(0.0, 1.0) for i in self.space.free}

    # ---------- the study ----------
    def open_study(self) -> optuna.Study:
        """A new study (in ``storage`` when set, replacing one this searcher wrote before)."""
        optuna.logging.set_verbosity(optuna.logging.WARNING)
        storage = None
        if self.params.storage:
            from optuna.storages.journal import JournalFileBackend, JournalStorage

            storage = JournalStorage(JournalFileBackend(self.params.storage))
        name = self.params.study_name or f"ghostsearch-{self.name}-k{self.space.k}-seed{self.seed}"
        if storage is not None and name in {st.study_name for st in optuna.get_all_study_summaries(storage)}:
            optuna.delete_study(study_name=name, storage=storage)  # ours, from an earlier run (replayed now)
        return optuna.create_study(storage=storage, study_name=name, direction="minimize")

    def opened(self) -> optuna.Study:
        """The study, opened on first use."""
        if self.study is None:
            self.study = self.open_study()
        return self.study

    def sampler(self) -> optuna.samplers.BaseSampler:
        seed = zlib.crc32(f"{self.seed}/{len(self.trials)}".encode())
        startup = len(self.first(self.prior_topk())) + self.params.n_prior_samples + self.params.n_random
        if self.params.sampler == "tpe":
            return optuna.samplers.TPESampler(seed=seed, multivariate=True, n_startup_trials=startup)
        return optuna.samplers.GPSampler(seed=seed, n_startup_trials=startup, deterministic_objective=True)

    def starts(self) -> list[Removed]:
        rng = np.random.default_rng([self.seed, 7])
        w = prior_weights(self.prior, self.params.temperature)
        first = self.first(self.prior_topk())
        return first + sample_unseen(rng, self.space, w, set(first), self.params.n_prior_samples)

    def complete(self, trial: optuna.Trial | int, s: Removed, value: float, full: bool = True) -> None:
        number = trial if isinstance(trial, int) else trial.number
        study = self.opened()
        params = study.get_trials(deepcopy=False)[number].params  # .trials deep-copies them all: 88% of bo's CPU
        study.tell(number, value)
        self.trials.append(([params[n] for n in self.distributions], float(value), full))

    def nearest_unseen(self, keys: dict, taken: set) -> dict | None:
        """Keys closest to ``keys`` whose set is unseen: the cheapest single swap of a removed block
        i with a kept block j (cost key_i - key_j), done by exchanging their two keys."""
        s = self.decode(keys)
        swaps = sorted(
            (keys[self.keys_name(i)] - keys[self.keys_name(j)], i, j) for i in s for j in self.space.free if j not in s
        )
        for _, i, j in swaps:
            t = canonical(set(s) - {i} | {j})
            if t not in self.memo.keys() | self.partial.keys() | taken:
                ki, kj = self.keys_name(i), self.keys_name(j)
                swapped = {**keys, ki: keys[kj], kj: keys[ki]}
                # tied keys (a GP proposal at the bounds) swap into the same set: ask for t itself
                return swapped if self.decode(swapped) == t else self.encode(t)
        return None

    def ask_one(self, taken: set) -> tuple[optuna.Trial, Removed]:
        """One trial whose set is unseen and not in ``taken``. A proposal that decodes to a set
        already scored is marked failed and replaced by its nearest unseen neighbour (enqueued)."""
        every, study = self.params.local_every, self.opened()
        if every and len(self.trials) % every == every - 1:  # a local move around the incumbent
            best = min(self.trials, key=lambda t: (not t[2], t[1]))  # the best full-fidelity trial
            keys = self.nearest_unseen(dict(zip(self.distributions, best[0])), taken)
        else:
            study.sampler = self.sampler()
            trial = study.ask(self.distributions)
            s = self.decode(trial.params)
            if not self.seen(s) and s not in taken:
                return trial, s
            study.tell(trial, state=TrialState.FAIL)
            keys = self.nearest_unseen(trial.params, taken)
        if keys is None:  # every neighbour is scored: jump to an unseen prior-weighted set
            rng = np.random.default_rng([self.seed, len(self.trials)])
            w = prior_weights(self.prior, self.params.temperature)
            keys = self.encode(sample_unseen(rng, self.space, w, set(self.memo) | set(self.partial) | taken, 1)[0])
        study.enqueue_trial(keys)
        trial = study.ask(self.distributions)
        return trial, self.decode(trial.params)

    # ---------- protocol ----------
    def ask(self) -> list[Candidate] | Race:
        if self.singles():
            return self.ask_singles()
        study = self.opened()
        todo = [s for s in self.starts() if not self.seen(s)]
        taken: set = set()
        for s in todo[: self.affordable(len(todo))]:  # raced or not, what it asks it can afford
            study.enqueue_trial(self.encode(s))
            self.asked[study.ask(self.distributions).number] = s
            taken.add(s)
        if not taken:
            unseen = self.space.n_subsets() - self.n_seen()
            n = self.affordable(self.params.batch)
            for _ in range(min(n, unseen)):
                trial, s = self.ask_one(taken)
                self.asked[trial.number] = s
                taken.add(s)
        return self.raced([Candidate(s) for s in self.asked.values()])

    def n_seen(self) -> int:
        return sum(len(s) == self.space.k for s in {**self.memo, **self.partial})

    def tell(self, candidates, values) -> None:
        super().tell(candidates, values)
        told = {c.removed: (v, c.fidelity >= 1.0) for c, v in zip(candidates, values)}
        for number, s in self.asked.items():
            if s in told:
                self.complete(number, s, *told[s])
            else:  # the race could not afford to score it
                self.opened().tell(number, state=TrialState.FAIL)
        self.asked = {}

    @property
    def done(self) -> bool:
        if self.singles():
            return False
        return self.affordable(1) == 0 or self.n_seen() >= self.space.n_subsets()
