"""Behaviour particular to one searcher: BO's journal storage, CBO's annealing path, LoRP's clusters."""

from __future__ import annotations

import warnings

import optuna
from search_synthetic import Synthetic

from ghostsearch.search import SEARCHERS, Budget, FunctionEvaluator, Space, make_searcher, run
from ghostsearch.search.base import canonical
from ghostsearch.search.common import ModelBased

SYN = Synthetic.random(12, seed=0)
SPACE = Space(12, 4)


def test_bo_journal_resumes_and_opens(tmp_path):
    """Interrupted, then replayed from its evaluations (resume), BO with a journal file ends where an
    uninterrupted run ends; the journal holds exactly the resumed study's trials (no duplicates
    from the interrupted run), so optuna-dashboard shows the real study."""
    params = {"sampler": "tpe", "storage": str(tmp_path / "optuna-cell.log"), "race": False, "batch": 1}
    ledger = {}

    def recorded(removed, fidelity):
        return ledger.setdefault(removed, SYN.value(removed))

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        whole = run(
            make_searcher("bo", SPACE, budget=Budget(30), params={**params, "storage": str(tmp_path / "a.log")}),
            SYN.evaluator(),
        )
        run(
            make_searcher("bo", SPACE, budget=Budget(30), params=params),
            FunctionEvaluator(recorded),
            stop=lambda: len(ledger) >= 20,
        )
        resumed = run(make_searcher("bo", SPACE, budget=Budget(30), params=params), FunctionEvaluator(recorded))
    assert resumed.result() == whole.result() and resumed.used == whole.used and resumed.history == whole.history
    study = optuna.load_study(
        study_name="ghostsearch-bo-k4-seed0",
        storage=optuna.storages.JournalStorage(optuna.storages.journal.JournalFileBackend(params["storage"])),
    )
    assert len(study.get_trials(states=(optuna.trial.TrialState.COMPLETE,))) == len(resumed.trials)


def test_cbo_annealing_finds_the_optimum_when_enumeration_is_off():
    best, value, _ = SYN.optimum(4)
    s = run(make_searcher("cbo", SPACE, params={"enumerate_limit": 0}), SYN.evaluator())
    assert s.result() == (best, value)


def test_cbo_fits_the_log_of_positive_values_only():
    """transform 'auto' fits log(value) while every value is > 0 (perplexity-like) and the values as
    they are once one is <= 0 (the margin objective); 'none' always as they are; others refused."""
    import numpy as np
    import pytest

    from ghostsearch.core.errors import GhostsearchError
    from ghostsearch.search.cbo import fitted_scale

    pos, mixed = np.array([150.0, 210.0, 3000.0]), np.array([-1.2, 0.4, 2.0])
    assert np.allclose(fitted_scale(pos, "auto"), np.log(pos))
    assert np.array_equal(fitted_scale(mixed, "auto"), mixed) and np.array_equal(fitted_scale(pos, "none"), pos)
    with pytest.raises(GhostsearchError, match="transform must be one of"):
        make_searcher("cbo", SPACE, params={"transform": "sqrt"})


def test_lorp_exposes_rls_and_clusters():
    s = run(make_searcher("lorp", SPACE), SYN.evaluator())
    assert s.n_clusters in (2, 3, 4) and len(s.labels) == 12 and 0 not in s.choice and 11 not in s.choice
    assert len(set(s.labels.tolist())) == s.n_clusters


def test_warm_start_puts_the_given_sets_first_and_charges_them():
    """ga, bo and cbo with warm_start: after the prior, their first k-sets are the warm sets (best
    first), each asked and charged once; without warm_start (the default) they are ignored."""
    from ghostsearch.search import Candidate

    warm = [SYN.optimum(4)[0], (1, 2, 3, 4), (1, 2, 3, 4), (1, 2, 3)]  # a repeat and a wrong size are dropped

    class Recording:
        def __init__(self):
            self.inner, self.asked = SYN.evaluator(), []

        def evaluate(self, candidates, searcher=""):
            self.asked += [c.removed for c in candidates if len(c.removed) == 4]
            return self.inner.evaluate(candidates, searcher)

        def statistic(self, name):
            return self.inner.statistic(name)

    warm_starters = [n for n in SEARCHERS.names() if issubclass(SEARCHERS.get(n), ModelBased)]  # ga, bo, cbo
    assert warm_starters
    for name in warm_starters:
        for on in (True, False):
            s = make_searcher(name, SPACE, budget=Budget(24), params={"warm_start": on, "race": False})
            s.warm = [Candidate(w).removed for w in warm]
            ev = Recording()
            run(s, ev)
            firsts = ev.asked[:2]
            if on:
                assert firsts == [canonical(warm[0]), (1, 2, 3, 4)], name
                assert ev.asked.count((1, 2, 3, 4)) == 1 and s.used <= 24
            else:  # the prior's top-k comes first, as it always did
                assert firsts[0] == s.prior_topk() != canonical(warm[0]) and firsts[1] != (1, 2, 3, 4), name
