"""`ghostsearch --version`, and -v/-q: progress messages go through logging to stderr (prefixed
`ghostsearch:`), -q keeps warnings only, and stdout stays for the JSON result lines."""

import logging
from importlib.metadata import version

import pytest

from ghostsearch.cli.main import main
from ghostsearch.core.logs import progress_enabled, setup_logging
from ghostsearch.data.dataplan import DataPlan, announce


def test_version(capsys):
    with pytest.raises(SystemExit) as e:
        main(["--version"])
    assert e.value.code == 0 and capsys.readouterr().out.strip() == f"ghostsearch {version('ghostsearch')}"


PLAN = DataPlan.from_dict(
    {
        "held_out": [],
        "calibration": [
            {
                "role": "calibration:perplexity",
                "asked": "c4",
                "used": "lambada",
                "fallback": True,
                "part": "calibration half",
                "documents_or_items": 10,
                "n_seq": 4,
                "seq_len": 32,
            },
            {
                "role": "repair",
                "asked": "lambada",
                "used": "lambada",
                "fallback": False,
                "part": "all",
                "documents_or_items": 10,
                "n_seq": 4,
                "seq_len": 32,
            },
        ],
    }
)


@pytest.mark.parametrize("verbosity, info_shown, bars", [(0, True, True), (-1, False, False), (1, True, True)])
def test_levels(verbosity, info_shown, bars, capsys):
    try:
        setup_logging(verbosity)
        announce(PLAN)
        out, err = capsys.readouterr()
        assert out == ""
        assert "ghostsearch: calibration:perplexity: asked c4 -> used lambada (FALLBACK" in err  # a warning: always
        assert ("ghostsearch: repair: asked lambada" in err) == info_shown
        assert progress_enabled() == bars
    finally:
        logging.getLogger("ghostsearch").handlers.clear()
        logging.getLogger("ghostsearch").setLevel(logging.NOTSET)
        logging.getLogger("ghostsearch").propagate = True
