#!/usr/bin/env bash
# The study of docs/results.md, in one command. Resumable: rerun the same command to continue.
#   scripts/study.sh [CONFIG] [key=value ...]      (default configs/study-smollm2.yaml)
# 1. ghostsearch compare: the searcher grid (finalists unrepaired and Ghosted-repaired)
# 2. bench/ghosted_study.py: repairs compared on the grid's fixed sets, saturation, calibration data
# 3. bench/study_table.py: tables and the claims' verdicts (ghostsearch.study.claims), as docs/results.md quotes them
# Outputs: RUN_DIR (config out=), RUN_DIR/ghosted.parquet (+ _items), RUN_DIR/study.md
set -euo pipefail
cd "$(dirname "$0")/.."
export HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 TOKENIZERS_PARALLELISM=false RAY_USAGE_STATS_ENABLED=0
if [ -z "${GHOSTSEARCH_DATA_DIR:-}" ] && [ -d ../shared/data ]; then export GHOSTSEARCH_DATA_DIR="$PWD/../shared/data"; fi
config="${1:-configs/study-smollm2.yaml}"; shift || true
run_dir=$(.venv/bin/python -c "import sys; from ghostsearch.config import load_config; print(load_config(sys.argv[1], sys.argv[2:]).out)" "$config" "$@")
.venv/bin/ghostsearch compare "$config" "$@"
if [ ! -f "$run_dir/ghosted.parquet" ]; then
  .venv/bin/python bench/ghosted_study.py "$run_dir" --out "$run_dir/ghosted" > "$run_dir/ghosted.md"
fi
{ .venv/bin/python bench/study_table.py "$run_dir"
  echo; echo "## Ghosted Layers: repairs on fixed removed sets"; echo
  .venv/bin/python bench/ghosted_study.py "$run_dir" --out "$run_dir/ghosted" --claims-only; } > "$run_dir/study.md"
echo "wrote $run_dir/study.md"
