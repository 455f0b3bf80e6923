"""After a local Ray is shut down (``target`` leaves Ray before its repairs, looks and speed timing),
SIGTERM still ends the driver the way Ctrl-C does: Ray's core worker leaves SIGTERM at the default
action when it shuts down, while Python's ``signal.getsignal`` still names our handler (issue 48:
SIGTERM during target's looks exited 143 with no ``interrupted`` line and the lock left behind)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

pytestmark = pytest.mark.slow  # starts a local Ray

DRIVER = """
import sys, time
from ghostsearch.core import interrupts
from ghostsearch.pool import cluster
interrupts.install()
cluster.connect(dashboard=False, num_cpus=1)
cluster.shutdown()  # as PoolSession.release does; ray.shutdown() alone: the process dies of the SIGTERM
print("shut down", flush=True)
try:
    time.sleep(60)
except KeyboardInterrupt as e:
    print("interrupted", type(e).__name__, flush=True)
    sys.exit(3)
"""


def test_sigterm_after_ray_shutdown_raises_interrupted():
    p = subprocess.Popen([sys.executable, "-c", DRIVER], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        assert p.stdout is not None
        assert p.stdout.readline().strip() == "shut down"
        time.sleep(0.5)
        os.kill(p.pid, signal.SIGTERM)
        out, _ = p.communicate(timeout=60)
    finally:
        if p.poll() is None:
            p.kill()
    assert (p.returncode, out.strip()) == (3, "interrupted Interrupted")
