#!/usr/bin/env bash
# Study 3 (docs/results.md, "Pre-registration: study 3", 2026-12-03) in one command, resumable:
# rerun the same command and nothing evaluated is evaluated again.
#   setsid nice -n 19 scripts/study3.sh > /tmp/study3.log 2>&1 &
# Where the kernel groups CPU by session (sched_autogroup, on in many distributions and on this project's
# machines), niceness counts only inside a session: started in its own session (setsid), the study sets
# that session's group to 19, else it would take a whole session's share beside the caller's work.
# 1. scripts/fetch-gemma3.sh: Gemma-3-270M's GGUF (Q4_K_M, de-quantised to fp32 on load), checked by sha256
# 2. the pilot: ghostsearch compare configs/study3-gemma3-pilot.yaml -> docs/results/study-3/pilot
#    (committed every 20 minutes while it runs and when it ends)
# 3. bench/study3.py --commit: the pre-registered models, looks and contrasts -> docs/results/study-3
#    (committed after every share of models and every look, as study 2 was; skipped once every look is recorded)
# 4. bench/study3.py --perplexity --commit: WikiText-2 per window, model by model, in one process (no Ray):
#    docs/results/study-3/ppl/<eval_key>.json committed alone as each model ends; a rerun skips finished models
# CPU seconds (user + system of every process each stage ran, Ray's included) are appended to
# docs/results/study-3/cpu.jsonl, one line per stage and run.
# STUDY3_CODE=DIR: stages 3 and 4 run DIR/bench/study3.py, so the package they import is DIR/ghostsearch
# (a snapshot, e.g. `git archive HEAD ghostsearch bench | tar -x -C DIR`): edits others make in this
# checkout while a stage runs for hours cannot reach it. Data, configs and commits stay in this checkout.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "$(ps -o sid= -p $$ | tr -d ' ')" = "$$" ] && [ -w /proc/self/autogroup ]; then
  echo 19 >/proc/self/autogroup 2>/dev/null || true  # its own session only (above)
fi
export HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 TOKENIZERS_PARALLELISM=false RAY_USAGE_STATS_ENABLED=0
export RAY_AUTH_MODE=disabled  # the study's own head on 127.0.0.1 (below): its drivers join without a token
if [ -z "${GHOSTSEARCH_DATA_DIR:-}" ] && [ -d ../shared/data ]; then export GHOSTSEARCH_DATA_DIR="$PWD/../shared/data"; fi
out=docs/results/study-3
mkdir -p "$out"
scripts/fetch-gemma3.sh

commit() {  # commit MSG [PATH...]: those paths alone (default: the study's directory; others work in this
            # checkout), retried on the index lock
  local m=$1; shift; local paths=("$@"); [ ${#paths[@]} -gt 0 ] || paths=("$out")
  for i in 1 2 3 4 5 6; do
    git add -- "${paths[@]}" 2>/dev/null || true
    if msg=$(git commit -q -m "$m" -- "${paths[@]}" 2>&1); then echo "committed: $m"; return 0; fi
    case "$msg" in *index.lock*) sleep $((10 * i));; *) echo "not committed ($msg): $m"; return 0;; esac
  done
}

stage() {  # stage NAME CMD...: run it, record its CPU seconds
  local name=$1; shift
  .venv/bin/python - "$out/cpu.jsonl" "$name" "$@" <<'PY'
import json, resource, subprocess, sys, time
log, name, cmd = sys.argv[1], sys.argv[2], sys.argv[3:]
t0 = time.time()
rc = subprocess.call(cmd)
r = resource.getrusage(resource.RUSAGE_CHILDREN)
with open(log, "a") as f:
    f.write(json.dumps({"stage": name, "start": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t0)),
                        "wall_s": round(time.time() - t0, 1), "cpu_s": round(r.ru_utime + r.ru_stime, 1), "rc": rc}) + "\n")
print(f"{name}: rc {rc}, {r.ru_utime + r.ru_stime:.0f} CPU-s, {time.time() - t0:.0f} s", flush=True)
sys.exit(rc)
PY
}

# The study's own Ray head. A local Ray started at nice 19 on a loaded machine misses Ray's fixed
# 30 s start limit (and the driver then hangs), so the head starts at the caller's priority minus
# 19 and every process of it is reniced to 19 at once and every minute: the scorer actors it forks
# afterwards inherit 19. Only this head's processes (found by its port) are touched or stopped.
# Only the pilot (its scorers are Ray actors) needs it: stages 3 and 4 run in their own process.
port=${STUDY3_RAY_PORT:-6397}
ray_pids() {  # the head's processes (their command lines name its port) and the raylet's workers (ray::...)
  local own r
  own=$(pgrep -f -- "[:=]$port( |$)|port=$port( |$)|:$port\b" || true)
  for r in $(pgrep -f -- "raylet.*:$port( |$)" || true); do own="$own $(pgrep -P "$r" || true)"; done
  echo $own
}
ray_up() {
  if ! (exec 3<> "/dev/tcp/127.0.0.1/$port") 2> /dev/null; then  # nothing listens there yet
    nice -n -19 .venv/bin/ray start --head --port="$port" --node-ip-address=127.0.0.1 --num-cpus=2 --include-dashboard=false \
      --disable-usage-stats > /tmp/study3-ray.log 2>&1 || { cat /tmp/study3-ray.log; exit 1; }
  fi
  renice -n 19 -p $(ray_pids) > /dev/null 2>&1 || true
  ( while sleep 60; do renice -n 19 -p $(ray_pids) > /dev/null 2>&1 || true; done ) &
  renicer=$!
  ray_down() {  # SIGTERM to the head's processes, then SIGKILL to what is left after 15 s (its gcs_server can ignore TERM)
    kill $renicer 2>/dev/null || true
    local pids i
    pids=$(ray_pids); [ -n "$pids" ] && kill $pids 2>/dev/null || true
    for i in $(seq 1 15); do pids=$(ray_pids); [ -z "$pids" ] && return 0; sleep 1; done
    kill -9 $pids 2>/dev/null || true
  }
  trap ray_down EXIT
}

if [ ! -f "$out/pilot/comparison.parquet" ]; then
  ray_up
  ( while sleep 1200; do commit "study 3 (issue 37): the pilot's data so far (docs/results/study-3/pilot)"; done ) &
  saver=$!
  trap 'kill $saver 2>/dev/null || true; ray_down' EXIT
  # retried: a run that stops midway resumes from its ledger
  for attempt in $(seq 1 30); do
    if stage pilot .venv/bin/ghostsearch compare configs/study3-gemma3-pilot.yaml --address "127.0.0.1:$port"; then break; fi
    [ "$attempt" = 30 ] && { commit "study 3 (issue 37): the pilot stopped, data so far"; exit 1; }
    echo "the pilot stopped (attempt $attempt); again in 1 minute"; sleep 60
  done
  kill $saver 2>/dev/null || true
  commit "study 3 (issue 37): the pilot has run (docs/results/study-3/pilot: comparison.parquet, eval_items.parquet)"
fi
code=${STUDY3_CODE:-.}
if [ -f "$code/bench/study3.py" ]; then
  stage study .venv/bin/python "$code/bench/study3.py" --commit
  commit "study 3 (issue 37): CPU seconds so far (cpu.jsonl)" "$out/cpu.jsonl"
  stage perplexity .venv/bin/python "$code/bench/study3.py" --perplexity --commit
  commit "study 3 (issue 47): CPU seconds of the perplexity stage (cpu.jsonl)" "$out/cpu.jsonl"
else
  echo "bench/study3.py is not there yet: the pilot is done, the study proper waits for it"
fi
