"""What every bench script sets before importing ghostsearch: the repository on sys.path, offline
Hugging Face, and ../shared/data as the data directory when it is there (GHOSTSEARCH_DATA_DIR wins).

    import benchenv  # noqa: F401  (first import of a bench script run as python bench/x.py)
"""

import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
_shared = ROOT.parent / "shared" / "data"
if _shared.is_dir():
    os.environ.setdefault("GHOSTSEARCH_DATA_DIR", str(_shared))


def commit_dir(path: Path, message: str) -> bool:
    """Commits ``path`` alone (``git add -- PATH; git commit -- PATH``), so that other work in the
    checkout is left as it is: how a long bench run (bench/study2*.py --commit) saves its data as it
    goes. Git runs in ``path``'s own repository, not the script's (a copy of bench/ outside the
    checkout still commits the checkout's data); retried while another git command holds the index
    lock. Prints what happened, with git's reason when nothing was committed."""
    path = Path(path).resolve()
    where = path if path.is_dir() else path.parent
    for attempt in range(8):
        a = subprocess.run(["git", "add", "--", str(path)], capture_output=True, text=True, cwd=where)
        r = subprocess.run(
            ["git", "commit", "-q", "-m", message, "--", str(path)], capture_output=True, text=True, cwd=where
        )
        if "index.lock" not in a.stderr + r.stderr + r.stdout:
            break
        time.sleep(5 * (attempt + 1))
    why = (a.stderr + r.stderr + r.stdout).strip().splitlines()
    print(
        "committed:" if r.returncode == 0 else f"not committed ({why[-1] if why else 'nothing new'}):",
        message,
        flush=True,
    )
    return r.returncode == 0
