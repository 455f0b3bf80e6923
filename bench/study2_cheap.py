"""Study 2's cheap claims S2-S4 (docs/results.md, "Pre-registration: study 2", 2026-12-01, and its
amendments): Ghosted's calibration saturation (S2), C4 against WikiText-2 as its calibration (S3)
and the antisymmetric share of W* = I + M (S4), measured in held-out WikiText-2 test and C4
validation perplexity; S1's p is read from its run (docs/results/study-cpu-2/s1) and the family
S1-S3 is decided by Holm at 0.05 (``ghostsearch.stats.inference.holm``).

  python bench/study2_cheap.py [--config configs/study2-smollm2.yaml] [--out docs/results/study-cpu-2/cheap]
                               [--s1 docs/results/study-cpu-2/s1] [--share N] [--commit] [--report-only]
                               [key=value ...]

What is pre-registered (not changed here): the fastblock set {12, ..., 19} of the study's model
(configs/study2-smollm2.yaml: SmolLM2-135M, fp32), repaired by Ghosted (dense variant), fitted on
C4 train at 8, 16, 32 and 64 sequences x 256 tokens, calibration seed 0 (S2), and on the tokenized
WikiText-2 validation split (wikitext-2-v1, ``data.CALIBRATION_SPLIT``: already the repair
calibration ``recovery.dataset=wikitext2`` reads; no change to ghostsearch/data/corpora.py was needed) at
32 x 256 (S3); held out: WikiText-2 test under the paper protocol (every non-overlapping 2048-token
window) and the 30 documents of C4 validation, with 95% intervals over windows; S2: log-perplexity
at 64 minus at 32 within +-1% (|d| < log 1.01), two one-sided tests; S3: WikiText-2-calibrated
minus C4-calibrated (both 32 x 256) within +-1% on each held-out corpus, the larger p of the two;
S4: ||(W - W^T)/2||_F / ||W||_F of W* = I + M per cut, reported only.

The choices made where the pre-registration is silent (windows, tests, the family, the order of
work) are stated in ``ghostsearch.study.studies.study2_cheap``, which makes them.

Outputs (``--out``, default docs/results/study-cpu-2/cheap, in the repository so a later session
resumes from it): per model ``<id>.json`` (what was fitted and evaluated, the fit's per-cut report
with the antisymmetric shares, perplexities, seconds) and ``<id>.parquet`` (one row per held-out
window: model, corpus, window, tokens, nll = the window's mean NLL per token as
``evaluate.perplexity_finalists`` records it, nll_sum = nll x tokens), written as soon as that model
finishes (``--share N``: N models evaluated together, each written when the group ends); a rerun
skips every model whose Parquet is there (and refuses one written under other
settings). ``--commit`` commits the directory after each model (``git add -- DIR && git commit
-- DIR``, retried while another git command holds the index lock). At the end, or at once with
``--report-only``, the table is printed and written to DIR/cheap.md (and its numbers to
DIR/cheap.json).

Cost. Measured here on SmolLM2 (fp32, one thread, CPU time of two 2048-token WikiText-2 windows
through ``evaluate.perplexity_finalists``, taken while the main study shared the CPU, so if
anything high): a dense window 8.2 CPU-s; the fastblock finalist 10 CPU-s a window, because
``evaluation_native.run_finalists`` runs every window through all 30 blocks densely (~7 s,
keeping the state at block 12) and then the finalist's blocks 20-29 and the LM head (~3.5 s).
Per model (``--share 1``, the default): WikiText-2 148 x 10 s = ~25 CPU-minutes, C4 ~1, the fit
(one dense pass over 2k-16k calibration tokens, a 576 x 576 solve) under 1: ~26 CPU-minutes a
model, ~2.2 CPU-hours for the five (wall clock about the same at one thread on an idle core; two
threads, ``pool.threads=2``, shorten the wall clock, not the CPU time). ``--share 3`` (G32, G64 and
W32 together, then G8 and G16) shares the dense pass: ~1.4 CPU-hours; ``--share 5``: ~1.1. The
pre-registration's "S2-S4 under 1 CPU-hour" holds only roughly, with ``--share 5``.

"""

from __future__ import annotations

import argparse
from pathlib import Path

import benchenv

from ghostsearch.study.studies.base import REDO_NAME
from ghostsearch.study.studies.study2_cheap import Design, check_data, finished, report, run

ROOT = Path(__file__).resolve().parents[1]
S1_DIR = "docs/results/study-cpu-2/s1"
REDO = ROOT / "docs" / "results" / "study-cpu-2" / REDO_NAME  # bench/study2_ppl.py's per-window NLL (issue 37)


def _rel(p: Path) -> str:
    return str(p.relative_to(ROOT)) if p.is_relative_to(ROOT) else str(p)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--config", default="configs/study2-smollm2.yaml", help="the study's model, dtype, device")
    ap.add_argument("--out", default="docs/results/study-cpu-2/cheap")
    ap.add_argument("--s1", default=S1_DIR, help="S1's run directory (its result.json)")
    ap.add_argument("--commit", action="store_true", help="commit --out after every model and the report")
    ap.add_argument("--report-only", action="store_true", help="write cheap.md from what has run")
    ap.add_argument(
        "--share",
        type=int,
        default=1,
        help="models evaluated together over one dense pass "
        "(default 1: each saved as it ends; 3: G32, G64, W32 then G8, G16; 5: all, ~half the CPU)",
    )
    ap.add_argument("overrides", nargs="*", help="key=value config overrides (e.g. pool.threads=2)")
    args = ap.parse_args()
    out, s1_dir = Path(args.out), Path(args.s1)
    if not out.is_absolute():
        out = ROOT / out
    if not s1_dir.is_absolute():
        s1_dir = ROOT / s1_dir
    design = Design()
    if not args.report_only:
        import torch

        from ghostsearch.config import load_config
        from ghostsearch.model.models import load_model

        # fp32 as pre-registered (the config's dtype auto would give bf16 on a CPU with native bf16)
        cfg = load_config(
            str(ROOT / args.config) if not Path(args.config).is_absolute() else args.config,
            ["dtype=fp32", *args.overrides],
        )
        torch.set_num_threads(max(1, cfg.pool.threads))
        check_data(cfg, design)
        todo = [m.id for m in design.models if not finished(out, cfg, design, m)]
        print(f"to evaluate: {', '.join(todo) or 'nothing'}", flush=True)
        if todo:
            model, tok = load_model(cfg.model, dtype=cfg.dtype, device=cfg.resolved_device())

            def on_model(mid: str, summary: dict) -> None:
                if args.commit:
                    benchenv.commit_dir(
                        out,
                        f"study 2 (issue 24): cheap claims, model {mid} ({summary['label']}) evaluated in "
                        f"{summary['seconds']['total']:.0f} s; rows under {_rel(out)}",
                    )

            run(model, tok, cfg, out, design, on_model, args.share)
    out.mkdir(parents=True, exist_ok=True)
    text = report(out, design, s1_dir, REDO)
    print(text)
    if args.commit:
        benchenv.commit_dir(out, f"study 2 (issue 24): cheap claims S1-S4 table {_rel(out)}/cheap.md")


if __name__ == "__main__":
    main()
