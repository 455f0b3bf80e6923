#!/usr/bin/env bash
# The test command: every test, the slow (SmolLM2, Ray) and multi-node ones included.
#   scripts/test.sh                      every test (what .ci/run runs)
#   scripts/test.sh --fast               the fast lane: every module's unit behaviour, nothing that loads
#                                        SmolLM2, starts Ray or a cluster (-m "not slow and not multinode");
#                                        run it on every change (README.md, "Tests")
#   scripts/test.sh tests/stats -x       only the paths given (any pytest arguments; --fast combines with them)
# Each run prints its 25 slowest tests (pytest --durations); TEST_JUNIT=FILE also writes every test's
# duration as JUnit XML there (.ci/run does).
# Tests run in TEST_JOBS parallel processes (pytest-xdist; default 2, one per core here; TEST_JOBS=0:
# one process, e.g. for --pdb). A module's tests stay in one process (--dist loadfile: its fixtures
# load once), and OpenMP threads sleep instead of spinning while they wait (OMP_WAIT_POLICY=PASSIVE:
# two processes' torch threads on two cores otherwise spin against each other, 10-100x slower).
# NumPy's OpenBLAS (pthreads: OMP_WAIT_POLICY does not reach it) gets one thread for the same reason: its
# second thread busy-waits; measured on the Optuna-GP test beside two busy processes, 130 -> 51 s wall and
# alone 58 -> 30 CPU-s at the same 30 s wall (session 6). Ray gives each actor OMP_NUM_THREADS = its num_cpus,
# which OpenBLAS also reads: a 1-thread scorer has one already.
# Every test has a time limit (pytest-timeout, pyproject.toml): a hang fails that test, not CI.
set -euo pipefail
cd "$(dirname "$0")/.."
export HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 TOKENIZERS_PARALLELISM=false RAY_USAGE_STATS_ENABLED=0
paths=(tests)
args=()
for a in "$@"; do
  case "$a" in
    --fast) args+=(-m "not slow and not multinode") ;;
    *) args+=("$a") ;;
  esac
done
for a in "$@"; do case "$a" in tests|tests/*|./tests/*) paths=(); break;; esac; done
jobs=${TEST_JOBS:-2}
par=()
if [ "$jobs" != 0 ]; then
  par=(-n "$jobs" --dist loadfile)
  export OMP_WAIT_POLICY=PASSIVE OPENBLAS_NUM_THREADS=${OPENBLAS_NUM_THREADS:-1}
fi
report=()
[ -n "${TEST_JUNIT:-}" ] && report=(--junitxml "$TEST_JUNIT")
exec .venv/bin/python -m pytest "${paths[@]}" -q --durations=25 "${par[@]}" "${report[@]}" "${args[@]}"
