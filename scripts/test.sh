#!/usr/bin/env bash
# The test command: every test, the slow (SmolLM2, Ray) and multi-node ones included.
set -euo pipefail
cd "$(dirname "$0")/.."
export HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 TOKENIZERS_PARALLELISM=false RAY_USAGE_STATS_ENABLED=0
exec .venv/bin/python -m pytest tests -q --durations=15 "$@"
