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
    """Commits ``path`` (a directory or a file) alone: :func:`commit_paths` of that one path."""
    return commit_paths([path], message)


def commit_paths(paths: list[Path], message: str) -> bool:
    """Commits these paths alone (``git add -A -- PATHS; git commit -- PATHS``; a removed file: its
    removal), so that other work in the checkout is left as it is: how a long bench run
    (bench/study2*.py, bench/study3.py --commit) saves its data as it goes. Git runs in the paths'
    own repository, not the script's (a copy of bench/ outside the checkout still commits the
    checkout's data); retried while another git command holds the index lock. Prints what happened,
    with git's reason when nothing was committed."""
    resolved = [Path(p).resolve() for p in paths]
    where = resolved[0] if resolved[0].is_dir() else resolved[0].parent

    def known(p: Path) -> bool:  # there, or tracked (a removal to commit)
        ls = subprocess.run(["git", "ls-files", "--error-unmatch", "--", str(p)], capture_output=True, cwd=where)
        return p.exists() or ls.returncode == 0

    names = [str(p) for p in resolved if known(p)]
    for attempt in range(8):
        a = subprocess.run(["git", "add", "-A", "--", *names], capture_output=True, text=True, cwd=where)
        r = subprocess.run(
            ["git", "commit", "-q", "-m", message, "--", *names], capture_output=True, text=True, cwd=where
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
