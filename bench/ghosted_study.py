"""The Ghosted Layers part of the study: repairs compared on FIXED removed sets.

  python bench/ghosted_study.py RUN_DIR [--out docs/results/ghosted] [--ks 4,6,8] [--limit N]

RUN_DIR is the study's compare run (scripts/study.sh): its config (model, eval settings, repair
calibration) and the removed sets it found. On the perplexity-greedy set and the fastblock window
at each k (seed 0 cells), every repair is fitted from the same dense calibration activations:
none, ghosted (dense), ghosted symmetric (the antisymmetric-part ablation), replaceme lstsq,
replaceme cosine, linearpatch (Hadamard). On the greedy set at the middle k, Ghosted is also fitted
with 8, 16, 32, 64 and 128 calibration sequences (saturation; the paper: 32) and on WikiText-2
train instead of C4. All finalists are then evaluated together over one dense prefix cache
(evaluate.perplexity_finalists, zero_shot_finalists): WikiText-2 perplexity as the run's
eval settings say, the eight tasks, the run's held-out halves. Writes OUT.parquet (one row per
finalist, with each cut's alignment and antisymmetric shares) and OUT_items.parquet (per-item
predictions, column ``key``), then prints the claims table (ghostsearch.study.claims). The study's run and claims are
``ghostsearch.study.studies.ghosted``.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

import benchenv  # noqa: F401  (repository on sys.path, offline HF, ../shared/data)

from ghostsearch.study.studies.ghosted import SATURATION, claims_text, run


def print_claims(out: Path) -> None:
    print(claims_text(out))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("run_dir")
    ap.add_argument("--out", default="docs/results/ghosted")
    ap.add_argument("--ks", default="4,6,8")
    ap.add_argument("--limit", type=int, default=None, help="items per task (default: the run's eval.limit)")
    ap.add_argument("--saturation", default=",".join(map(str, SATURATION)))
    ap.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--claims-only", action="store_true", help="print the claims of an earlier run's OUT files")
    args = ap.parse_args()
    if args.claims_only:
        return print_claims(Path(args.out))

    import torch

    torch.set_num_threads(args.threads)
    out = Path(args.out)
    ks, sizes = [int(k) for k in args.ks.split(",")], [int(x) for x in args.saturation.split(",") if x]
    run(Path(args.run_dir), out, ks, sizes, args.limit)
    print_claims(out)


if __name__ == "__main__":
    main()
