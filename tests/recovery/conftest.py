"""SmolLM2 fixtures (the session model of tests/conftest.py): calibration on C4, 32 x 128 = 4096
tokens (with 16 x 128, 2048 tokens for a 576 x 576 operator, ghosted overfits and lost to
linearpatch on WikiText-2 at k=6); evaluation on WikiText-2 test, 8 x 128; a small
recovery-aware key (C4 8 x 128, max_window 4)."""

import pytest

from tests.corpora import CALIB, PROSE


@pytest.fixture(scope="session")
def smol(smollm2, data_dir):
    from ghostsearch.model.stack import Stack
    from ghostsearch.objectives import CalibrationSpec, ObjectiveSpec
    from ghostsearch.scoring import Scorer

    sc = Scorer(Stack(smollm2[0]), smollm2[1])
    calib = sc.prepare(ObjectiveSpec.make("perplexity", CalibrationSpec(CALIB, 32, 128, 0, data_dir, micro_batch=16)))
    wiki = sc.prepare(
        ObjectiveSpec.make("perplexity", CalibrationSpec(PROSE, 8, 128, 0 if PROSE != CALIB else 1, data_dir))
    )
    return sc, calib, wiki


@pytest.fixture(scope="session")
def aware(smollm2, data_dir):
    from ghostsearch.model.stack import Stack
    from ghostsearch.objectives import AwareSpec, CalibrationSpec, ObjectiveSpec
    from ghostsearch.recovery.aware import prepare
    from ghostsearch.scoring import Scorer

    sc = Scorer(Stack(smollm2[0]), smollm2[1])
    return sc, prepare(
        sc, ObjectiveSpec.make("perplexity", CalibrationSpec(CALIB, 8, 128, 1, data_dir), aware=AwareSpec("ghosted", 4))
    )
