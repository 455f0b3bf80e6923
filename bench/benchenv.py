"""What every bench script sets before importing ghostsearch: the repository on sys.path, offline
Hugging Face, and ../shared/data as the data directory when it is there (GHOSTSEARCH_DATA_DIR wins).

    import benchenv  # noqa: F401  (first import of a bench script run as python bench/x.py)
"""

import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
_shared = ROOT.parent / "shared" / "data"
if _shared.is_dir():
    os.environ.setdefault("GHOSTSEARCH_DATA_DIR", str(_shared))
