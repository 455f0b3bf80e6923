"""The driver's own thread pools while a pool it started on this machine scores (issues 48, 49).

A driver is a plain Python process: NumPy's and SciPy's OpenBLAS (two pthreads libraries) and torch (OpenMP, MKL)
each run one thread per core. The searcher runs in it, and the model-based ones call threaded BLAS on every ask
(bo's Gaussian process: Optuna on torch and SciPy; cbo's quadratic fit: NumPy). OpenBLAS's idle threads busy-wait
(about 0.1 s after each threaded call; OMP_WAIT_POLICY does not reach them), so a driver's extra threads spin on
the cores its local scorers need, and on a busy machine they take half of what the run's session gets while the
ask runs. While a ``PoolSession`` holds pools it started on a local Ray it started itself, the driver's pools
run ``driver_threads``: the cores the pools leave, at least 1 (on this 2-core machine with the default 2 scorers
x 1 thread: 1). Released with the pools. Left alone: a Ray the driver joined (a cluster's scorers are elsewhere,
and its cores are not the driver's to count), a GPU pool (its scorers take no CPU), and an environment that sets
a thread count itself (``THREAD_VARS``: the user's choice wins). Measured: bench/driver_threads.py.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

THREAD_VARS = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")


def cores() -> int:
    """The cores this process may run on (its affinity: a container's or taskset's share)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def driver_threads(pool_cpus: float, cores: int, env: Mapping[str, str]) -> int | None:
    """The driver's threads beside local pools that take ``pool_cpus`` of this machine's ``cores``: what they
    leave, at least 1; None (left as they are) when they leave every core or ``env`` sets a thread count."""
    if pool_cpus <= 0 or any(env.get(v) for v in THREAD_VARS):
        return None
    return max(1, cores - int(pool_cpus))


class Limited:
    """Every thread pool of this process at ``n`` threads until ``restore``: threadpoolctl's (both OpenBLAS
    libraries, OpenMP) and torch's (MKL, its OpenMP)."""

    def __init__(self, n: int):
        import scipy.linalg  # noqa: F401  SciPy's OpenBLAS is its own library, loaded on first use: load it now
        import threadpoolctl
        import torch

        self.n, self.torch = n, torch.get_num_threads()
        self.limiter = threadpoolctl.threadpool_limits(limits=n)
        torch.set_num_threads(n)

    def restore(self) -> None:
        import torch

        self.limiter.restore_original_limits()
        torch.set_num_threads(self.torch)
