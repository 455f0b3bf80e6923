"""Measure one scorer's peak memory on this CPU, in a fresh process: the kernel's peak RSS growth
(VmHWM, reset through /proc/self/clear_refs once the tokenizer and the calibration corpora are
read) while the model is loaded, the objective prepared and a few removed sets scored. The
weights count as the pages they occupy (safetensors maps the file; pages fault in when used).

    python -m tests.model.peak CONFIG [key=value ...]   -> one JSON line {"weights": B, "peak": B}
"""

from __future__ import annotations

import gc
import json
import sys
import time


def status(key: str) -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1]) * 1024
    raise RuntimeError(f"no {key} in /proc/self/status")


def main(argv: list[str]) -> None:
    import torch

    from ghostsearch.config import load_config
    from ghostsearch.scoring import scorer_from_config

    cfg = load_config(argv[0], argv[1:])
    torch.set_num_threads(cfg.pool.threads)
    spec = cfg.objective_spec()
    from transformers import AutoTokenizer

    from ghostsearch.model.models import model_path

    spec.build().build(AutoTokenizer.from_pretrained(model_path(cfg.model)[0]), torch.float32)  # corpora read once
    gc.collect()
    base = status("VmRSS")
    with open("/proc/self/clear_refs", "w") as f:  # resets the kernel's peak RSS (VmHWM) to the current RSS
        f.write("5")
    t0 = time.perf_counter()
    sc = scorer_from_config(cfg)
    weights = sum(p.numel() * p.element_size() for p in sc.stack.model.parameters())
    key = sc.prepare(spec)
    L = sc.stack.n_blocks
    for removed in [(L - 2,), (1, L - 3), (2, 5, L - 1)]:
        sc.score(key, removed)
    print(
        json.dumps(
            {
                "weights": weights,
                "peak": status("VmHWM") - base,
                "seconds": time.perf_counter() - t0,
                "every": sc.cache_every,
            }
        )
    )


if __name__ == "__main__":
    main(sys.argv[1:])
