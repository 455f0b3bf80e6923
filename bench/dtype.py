"""dtype on this CPU: what `dtype: auto` trades. Candidate scoring time in bf16 vs fp32, and how far
each dtype's objective values move with the thread count.

  python bench/dtype.py [--config configs/smollm2-quick.yaml --n-seq 8 --seq-len 128 --reps 3]

SmolLM2 scorers (one per dtype x thread count, all in this process) score the dense model and four
fixed k = 4 sets on the same calibration windows; reps interleave the dtypes, and the median rep is
reported. Prints, per thread count, the fp32 / bf16 time ratio (the baseline is fp32, measured in the
same run), and per set the values of every (dtype, threads) with their largest relative gap to fp32 at
1 thread. On an AVX2-only CPU bf16 is emulated and much slower; where the CPU has AVX512-BF16 or AMX
it is faster, but its values depend on the thread count (the reduction order of the matmuls).
"""

from __future__ import annotations

import argparse
import statistics
import time

import benchenv  # noqa: F401  (the repository on sys.path, offline HF, ../shared/data as the data directory)
import torch

from ghostsearch.config import load_config  # noqa: E402
from ghostsearch.model.models import cpu_has_native_bf16  # noqa: E402
from ghostsearch.scoring import scorer_from_config  # noqa: E402

SETS = [(), (3, 5, 7, 9), (10, 12, 14, 16), (4, 8, 20, 22), (2, 6, 11, 25)]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--config", default="configs/smollm2-quick.yaml")
    ap.add_argument("--n-seq", type=int, default=8)
    ap.add_argument("--seq-len", type=int, default=128)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--threads", default="1,2")
    a = ap.parse_args()
    threads = [int(t) for t in a.threads.split(",")]
    print(f"native bf16 (AVX512-BF16 or AMX): {cpu_has_native_bf16()}; torch {torch.__version__}")
    scorers = {}
    for d in ("bf16", "fp32"):
        cfg = load_config(a.config, [f"calibration.n_seq={a.n_seq}", f"calibration.seq_len={a.seq_len}", f"dtype={d}"])
        for t in threads:
            sc = scorer_from_config(cfg, threads=t)
            scorers[d, t] = (sc, sc.prepare(cfg.objective_spec()))
    times: dict = {k: [] for k in scorers}
    values: dict = {}
    for _ in range(a.reps):
        for t in threads:
            for d in ("bf16", "fp32"):
                sc, key = scorers[d, t]
                torch.set_num_threads(t)
                t0 = time.perf_counter()
                values[d, t] = [sc.score(key, s).value for s in SETS]
                times[d, t].append(time.perf_counter() - t0)
    print(f"\nscoring {len(SETS)} sets, {a.n_seq} x {a.seq_len} tokens, median of {a.reps} reps:")
    for t in threads:
        bf, fp = statistics.median(times["bf16", t]), statistics.median(times["fp32", t])
        print(f"  {t} thread(s): bf16 {bf:.2f} s, fp32 {fp:.2f} s, fp32 / bf16 = {fp / bf:.2f}x")
    ref = values["fp32", threads[0]]
    print(f"\nvalues (relative gap to fp32 at {threads[0]} thread):")
    for i, s in enumerate(SETS):
        cells = "  ".join(
            f"{d}/{t}t {values[d, t][i]:.4f} ({values[d, t][i] / ref[i] - 1:+.2%})"
            for d in ("fp32", "bf16")
            for t in threads
        )
        print(f"  {str(list(s)) or 'dense':>16}: {cells}")
    for d in ("fp32", "bf16"):
        gap = max(abs(values[d, t][i] / values[d, threads[0]][i] - 1) for t in threads for i in range(len(SETS)))
        print(f"largest change with the thread count, {d}: {gap:.2e}")


if __name__ == "__main__":
    main()
