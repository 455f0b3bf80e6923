"""Study 2's perplexities redone window by window (issue 37): each model's mean NLL per held-out window,
which study 2's committed ``ppl_wikitext2_window_nll`` (and cheap/<id>.parquet's ``nll``) do not hold.

Study 2 ran ``evaluate.perplexity_finalists`` at ``eval.batch_size`` 16 before the fix of
``evaluation_native.window_items``: each committed per-window list holds 16 batch-position sums
(slot j = the sum of the mean NLLs of windows j, j + 16, j + 32, ...) and zeros. The point
perplexities were right. This script recomputes the per-window values of the models the intervals
need, with the fixed code, in fp32 as study 2 ran (``dtype=fp32``: ``auto`` is bf16 on this
machine), LinearPatch with study 2's construction (``paley`` rotation, ``pooled`` scale, the
defaults when it ran), one thread:

* M1-M10 of ``bench/study2.py`` (M0 is in no contrast) on WikiText-2 test, paper protocol (148
  windows of 2048 tokens);
* G8, G16, G64, W32 of ``bench/study2_cheap.py`` (G32 is M4: the same set, repair and
  calibration) on WikiText-2 test and on C4 validation (47 windows of 256 tokens; M4 too).

Order of work: C4 validation first (cheap), then WikiText-2 by *slot*: slot j is the windows
i = j (mod 16), the windows whose sum the committed slot j holds. Every finished slot is checked
against that committed sum (``check``), so the recomputed models are shown to be study 2's models;
and the windows done at any moment are a systematic sample of the test split (every 16th window, at
the slots done). Results: ``--out`` (default docs/results/study-cpu-2/ppl-windows), ``windows.jsonl``
(one line per corpus x window: every model's mean NLL per token, full float precision) and
``spec.json``; ``--commit`` commits the directory after C4 and after every slot. Resumable: a rerun
skips the windows in windows.jsonl.

  python bench/study2_ppl.py [--out DIR] [--commit] [--slots 0,1,2,...] [--check]
"""

from __future__ import annotations

import argparse
import math
from pathlib import Path

import benchenv  # (repository on sys.path, offline HF, ../shared/data)

from ghostsearch.study.studies.study2_ppl import SLOTS, check, recompute

ROOT = Path(__file__).resolve().parents[1]
RUN = ROOT / "docs/results/study-cpu-2"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=str(RUN / "ppl-windows"))
    ap.add_argument("--commit", action="store_true")
    ap.add_argument("--slots", default=",".join(map(str, range(SLOTS))))
    ap.add_argument("--check", action="store_true", help="only compare finished slots with the committed sums")
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args()
    out = Path(args.out)
    if args.check:
        rows = check(out, RUN)
        for r in rows:
            print(
                f"{r['model']:>4} {r['corpus']:>9} slot {r['slot']:2d}: {r['sum']:.6f} "
                f"committed {r['committed']:.6f} diff {r['diff']:+.2e}"
            )
        print(f"max |diff| {max((abs(r['diff']) for r in rows), default=math.nan):.2e} over {len(rows)} slot sums")
        return

    import torch

    torch.set_num_threads(args.threads)
    slots = [int(s) for s in args.slots.split(",")]
    recompute(out, str(ROOT / "configs/study2-smollm2.yaml"), slots, benchenv.commit_dir if args.commit else None)


if __name__ == "__main__":
    main()
