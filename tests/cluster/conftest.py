"""tests/cluster: manifest checks (fast) and the real multi-node test (marker ``multinode``)."""

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:  # helpers (localcluster.py) importable whatever the rootdir/import mode
    sys.path.insert(0, str(HERE))


def pytest_configure(config):
    config.addinivalue_line(
        "markers",
        "multinode: starts a real two-node Ray cluster on this machine (separate `ray start` "
        "processes on 127.0.0.2/127.0.0.3, token auth); ~2 GB RAM, ~1-2 min",
    )
