#!/usr/bin/env bash
# One prepared check for a GPU machine; every step has its own timeout: at most 13.5 minutes on one GPU
# (15 with two), inside the 15 minutes a lent device gives a session, start-up included; far less when
# every step passes quickly:
#   1. the exactness tests (prefix-cached scoring == the physically pruned model; per-row losses)
#      with device=cuda, in fp32 and bf16;
#   2. bench/scoring.py --device cuda --model llama3-8b-random (per-candidate seconds, the FLOP-floor
#      ratio, and a raced greedy step against the exact one);
#   3. a 2-actor search on SmolLM2 with device=cuda;
#   4. placement (issue 25): the split exactness tests over cuda:0 and the CPU, and over cuda:0,cuda:1
#      when two GPUs are visible (tests/model/test_placement.py with GHOSTSEARCH_TEST_DEVICE_MAP);
#   5. plan --measure against a measured run: the planned wall time of a 1-actor greedy search on
#      SmolLM2 (k=2, 16 x 256) next to the measured one (a ratio).
#   6. what pruning buys (issue 36): bench/speed.py on CUDA, SmolLM2 in bf16, prefill and decode speed-up
#      at k = 4, 8, 12 (unrepaired and Ghosted) against L / (L - k), peak memory by torch.cuda's
#      allocator statistics (2 minutes at most).
# Prints one summary at the end. Nothing here has run on a GPU yet: run it when a GPU is lent and
# put its output in docs/benchmarks.md.
#   ./scripts/gpu-check.sh [OUT_DIR]
set -u
cd "$(dirname "$0")/.."
OUT=${1:-${OUT:-runs/gpu-check}}
mkdir -p "$OUT"
export HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 TOKENIZERS_PARALLELISM=false RAY_USAGE_STATS_ENABLED=0
PY=${PY:-.venv/bin/python}
declare -A RC

step() {  # name seconds command...
    local name=$1 secs=$2; shift 2
    echo "=== $name (limit ${secs}s)" | tee -a "$OUT/summary.txt"
    timeout "$secs" "$@" > "$OUT/$name.log" 2>&1
    RC[$name]=$?
    tail -n 15 "$OUT/$name.log"
}

nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader > "$OUT/gpu.txt" 2>&1

for dt in float32 bfloat16; do
    step "exactness-$dt" 90 env GHOSTSEARCH_TEST_DEVICE=cuda GHOSTSEARCH_TEST_DTYPE=$dt \
        "$PY" -m pytest tests/scoring/test_scoring.py -q -x -k "prefix_runs or row_losses"
done
step bench-scoring 150 "$PY" bench/scoring.py --device cuda --dtype bf16 --model llama3-8b-random \
    --n-seq 16 --seq-len 256 --workloads ad --race-steps 1 --naive-every 4 --threads 4
step search-2actors 90 "$PY" -m ghostsearch search configs/smollm2-quick.yaml device=cuda pool.actors=2 \
    pool.gpus_per_actor=0.5 out="$OUT/search" search.params.greedy.race=true searcher=greedy

step split-cuda-cpu 90 env GHOSTSEARCH_TEST_DEVICE_MAP=cuda:0,cpu "$PY" -m pytest tests/model/test_placement.py -q -x \
    -k "values_of_one_device or split_model"
NGPU=$(nvidia-smi -L 2>/dev/null | wc -l)
if [ "$NGPU" -ge 2 ]; then
    step split-2gpus 90 env GHOSTSEARCH_TEST_DEVICE_MAP=cuda:0,cuda:1 "$PY" -m pytest tests/model/test_placement.py -q -x \
        -k "values_of_one_device or split_model"
fi
PLAN_ARGS="configs/smollm2-quick.yaml device=cuda dtype=bf16 pool.actors=1 pool.gpus_per_actor=1 searcher=greedy k=2 calibration.n_seq=16 calibration.seq_len=256 compare.searchers=null"
step plan-measure 150 "$PY" -m ghostsearch plan $PLAN_ARGS --measure --command search  # it runs probe cells now
step plan-run 90 "$PY" -m ghostsearch search $PLAN_ARGS out="$OUT/plan-run"
step speed 120 "$PY" bench/speed.py --device cuda --dtype bf16 --batch 1 16 --seq-len 512 --decode-tokens 64 \
    --repeats 5 --out "$OUT/speed.json"
"$PY" - "$OUT" <<'PYEOF' | tee -a "$OUT/summary.txt" > "$OUT/plan-vs-run.log"
import json, re, sys
out = sys.argv[1]
try:
    m = re.search(r"wall [0-9.]+ h \(([0-9]+) s\)", open(f"{out}/plan-measure.log").read())
    res = json.load(open(f"{out}/plan-run/result.json"))
    cell = next(iter((res.get("cells") or res["searchers"]).values()))  # "searchers": run dirs before issue 26
    planned, measured = float(m.group(1)), float(cell["wall_seconds"])
    print(f"plan-vs-run: planned {planned:.0f} s, measured {measured:.1f} s (the cell: prepare + scoring), "
          f"planned/measured {planned / max(measured, 1e-9):.2f}")
except Exception as e:  # noqa: BLE001
    print(f"plan-vs-run: not compared ({type(e).__name__}: {e})")
PYEOF

{
    echo "--- summary ($(cat "$OUT/gpu.txt" 2>/dev/null))"
    for name in exactness-float32 exactness-bfloat16 bench-scoring search-2actors split-cuda-cpu split-2gpus \
            plan-measure plan-run plan-vs-run speed; do
        echo "$name: rc=${RC[$name]:-not run} $(grep -E 'passed|failed|speed-up|steps/s|same answer|DIFFERENT|total:|rate:|memory per actor|measured_wall|planned|^\\| k=|wall_s' "$OUT/$name.log" 2>/dev/null | tail -n 4 | tr '\n' ' ')"
    done
} | tee -a "$OUT/summary.txt"
