#!/usr/bin/env bash
# The test command: every test, the slow (SmolLM2, Ray) and multi-node ones included.
#   scripts/test.sh                      every test (what .ci/run runs)
#   scripts/test.sh tests/report -x      only the paths given (any pytest arguments)
set -euo pipefail
cd "$(dirname "$0")/.."
export HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 TOKENIZERS_PARALLELISM=false RAY_USAGE_STATS_ENABLED=0
paths=(tests)
for a in "$@"; do case "$a" in tests|tests/*|./tests/*) paths=(); break;; esac; done
exec .venv/bin/python -m pytest "${paths[@]}" -q --durations=15 "$@"
