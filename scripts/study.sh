#!/usr/bin/env bash
# The calibration-versus-search study at small scale (docs/results.md). Resumable: rerun to continue.
#   scripts/study.sh [CONFIG] [key=value ...]
set -euo pipefail
cd "$(dirname "$0")/.."
export HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1
if [ -z "${GHOSTSEARCH_DATA_DIR:-}" ] && [ -d ../shared/data ]; then export GHOSTSEARCH_DATA_DIR="$PWD/../shared/data"; fi
config="${1:-configs/study-smollm2.yaml}"; shift || true
run_dir=$(.venv/bin/python -c "import sys; from ghostsearch.config import load_config; print(load_config(sys.argv[1], sys.argv[2:]).out)" "$config" "$@")
.venv/bin/ghostsearch compare "$config" "$@"
.venv/bin/python bench/study_table.py "$run_dir"
