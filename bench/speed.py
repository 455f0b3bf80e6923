"""What depth pruning buys on SmolLM2-135M (30 blocks): prefill and decode speed-up at k = 4, 8, 12
against the ideal L / (L - k), peak memory, parameters (ghostsearch.evaluation.speed.measure_speed).

  python bench/speed.py [--ks 4 8 12] [--batch 1 8] [--seq-len 128] [--decode-tokens 16]
                        [--repeats 5] [--threads 2] [--device auto] [--dtype fp32] [--recovery ghosted]
                        [--out docs/results/bench-speed/speed.json]

The removed sets (fixed before the run): k = 4 and k = 8 are greedy's sets on perplexity 16 x 32
(docs/benchmarks.md, "Racing and matched budgets": [16, 17, 18, 19] and [5, 13, 15, 16, 17, 18,
19, 26]); k = 12 is the k = 8 set plus blocks 20-23 (greedy's k = 12 set is not committed; every
SmolLM2 block has the same shape, so which blocks go does not change the cost of the unrepaired
model: only the number of cuts changes a repair's). Each set is timed without repair and with the
repair's operators (``--recovery``, one C x C matmul per cut: cost only, the values do not matter).
Every model is physically pruned (an export's shape) and all are timed in one process, in rotated
interleaved rounds (ghostsearch/evaluation/speed.py). Runs on CUDA when one is visible (``--device auto``).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time

import benchenv  # noqa: F401  (the repository on sys.path, offline HF)
import torch

from ghostsearch.evaluation.speed import cost_operators, measure_speed, speed_markdown, speed_table
from ghostsearch.model.models import load_model

SETS = {
    4: [16, 17, 18, 19],
    8: [5, 13, 15, 16, 17, 18, 19, 26],
    12: [5, 13, 15, 16, 17, 18, 19, 20, 21, 22, 23, 26],
}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--ks", type=int, nargs="+", default=[4, 8, 12])
    ap.add_argument("--batch", type=int, nargs="+", default=[1, 8])
    ap.add_argument("--seq-len", type=int, default=128)
    ap.add_argument("--decode-tokens", type=int, default=16)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument("--device", default="auto")
    ap.add_argument("--dtype", default=None, help="default: fp32 on CPU, bf16 on CUDA")
    ap.add_argument("--recovery", default="ghosted", help="'none': unrepaired models only")
    ap.add_argument("--out", default=None, help="JSON file for the record")
    a = ap.parse_args(argv)
    device = ("cuda" if torch.cuda.is_available() else "cpu") if a.device == "auto" else a.device
    dtype = a.dtype or ("bf16" if device.startswith("cuda") else "fp32")
    if a.threads:
        torch.set_num_threads(a.threads)
    t0 = time.time()
    model, _ = load_model("smollm2-135m", dtype=dtype, device=device)
    L, hidden = model.config.num_hidden_layers, model.config.hidden_size
    sets = [SETS[k] for k in a.ks]
    repairs = [] if a.recovery == "none" else [cost_operators(a.recovery, s, L, hidden) for s in sets]
    rep = measure_speed(
        model,
        sets,
        repairs=repairs,
        batches=a.batch,
        seq_len=a.seq_len,
        decode_tokens=a.decode_tokens,
        repeats=a.repeats,
        progress=lambda line: print(line, file=sys.stderr, flush=True),
    )
    wall = time.time() - t0
    print(speed_table(rep))
    print()
    print(speed_markdown(rep))
    load = os.getloadavg()
    print(
        f"\n{platform.processor() or platform.machine()}, {os.cpu_count()} cores, "
        f"load average {load[0]:.1f} at the end; wall {wall:.0f} s"
    )
    if a.out:
        from ghostsearch.core.io import write_json_atomic

        os.makedirs(os.path.dirname(a.out) or ".", exist_ok=True)
        write_json_atomic(
            a.out,
            {
                **rep.to_dict(),
                "sets": {str(k): SETS[k] for k in a.ks},
                "command": "python bench/speed.py " + " ".join(sys.argv[1:] if argv is None else argv),
                "loadavg_end": load,
                "cpu_count": os.cpu_count(),
                "wall_s": wall,
            },
        )
    print(json.dumps({"wall_s": round(wall, 1)}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
