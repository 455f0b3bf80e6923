"""What folding a repair costs (issue 46 item 2): held-out perplexity of no repair, ``folded`` (the
Ghosted fit restricted to the writers of the block before each cut, folded into its weights: a
plain checkpoint), ``ghosted`` (unfolded: x <- x (I + M) at the cut, a hook), ``linearpatch`` (a
hook too) and, where the family takes it, ``replaceme`` (folded into down_proj), with paired
intervals over the evaluation windows.

  python bench/fold.py [--model smollm2-135m] [--k 4,6] [--windows 64] [--sets "12-15;2,4,6,15-16"]

For each k the removed set is the contiguous window [a, a + k), a >= 1 (so that a block precedes
the cut), whose unrepaired perplexity on the selection data is lowest (fastblock's kind of set;
``--sets`` gives them instead). Data, disjoint by construction:
  selection: C4 train, 8 x 256 tokens, seed 1;
  repair fit: the config defaults (``recovery.repair_spec``: C4 train, 32 x 256, seed 0), one
              fit per (set, method), every method reading the same dense activations;
  evaluation: WikiText-2 test, ``--windows`` consecutive windows of 512 tokens (``eval.protocol
              quick``), every model on the same windows.
Per set the table gives each method's perplexity, and the paired ratios ppl_A / ppl_B =
exp(mean over windows of the difference of the windows' mean NLL), with 95% percentile-bootstrap
intervals over windows (``stats.windows.ppl_ratio``, 2,000 resamples, seed 0), against no repair and
against ``folded``; the fit's alignment error (||X_b - repaired|| / ||X_b|| on the fitting data).
fp32 on CPU; ``--json`` writes everything printed.
"""

from __future__ import annotations

import argparse
import json
import time

import benchenv  # noqa: F401  (repository on sys.path, offline HF, ../shared/data)
import numpy as np
import torch

from ghostsearch.stats.windows import ppl_ratio

METHODS = ("none", "folded", "ghosted", "linearpatch", "replaceme")


def parse_sets(text: str) -> list[tuple[int, ...]]:
    """'12-15;2,4,6,15-16' -> [(12, 13, 14, 15), (2, 4, 6, 15, 16)]."""
    out = []
    for one in text.split(";"):
        blocks: list[int] = []
        for part in one.split(","):
            lo, _, hi = part.partition("-")
            blocks += range(int(lo), int(hi or lo) + 1)
        out.append(tuple(blocks))
    return out


def best_windows(model, tok, cfg, ks) -> list[tuple[int, ...]]:
    """Per k, the window [a, a + k), a >= 1, of lowest unrepaired perplexity on C4 train 8 x 256 seed 1."""
    from ghostsearch.model.stack import Stack
    from ghostsearch.objectives import CalibrationSpec, ObjectiveSpec
    from ghostsearch.scoring import Scorer

    sc = Scorer(Stack(model), tok)
    key = sc.prepare(ObjectiveSpec.make("perplexity", CalibrationSpec("c4", 8, 256, 1, cfg.data_dir, micro_batch=8)))
    L, out = sc.stack.n_blocks, []
    for k in ks:
        values = {a: sc.score(key, tuple(range(a, a + k))).value for a in range(1, L - k + 1)}
        a = min(values, key=values.__getitem__)
        out.append(tuple(range(a, a + k)))
        print(f"k={k}: window {a}..{a + k - 1} (selection perplexity {values[a]:.2f})", flush=True)
    return out


def fmt(a, b) -> str:
    """ppl_a / ppl_b [95% CI] over the windows (a, b: per-window mean NLL)."""
    r = ppl_ratio(a, b)
    return f"{r[0]:.3f} [{r[1]:.3f}, {r[2]:.3f}]"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="smollm2-135m")
    ap.add_argument("--k", default="4,6")
    ap.add_argument(
        "--sets", default=None, help="removed sets, ';' between sets: '12-15;2,4,6,15-16' (default: the best windows)"
    )
    ap.add_argument("--windows", type=int, default=64, help="WikiText-2 test windows of 512 tokens")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--json", default=None, help="write the numbers here")
    args = ap.parse_args()
    from ghostsearch.config import load_config
    from ghostsearch.evaluation.evaluate import perplexity_finalists
    from ghostsearch.model.models import load_configured
    from ghostsearch.model.stack import Stack
    from ghostsearch.recovery import RECOVERY
    from ghostsearch.recovery.repair import describe, fit_all, repair_spec

    torch.set_num_threads(args.threads)
    cfg = load_config(None, [f"model={args.model}", "dtype=fp32", "device=cpu", f"eval.ppl_max_seq={args.windows}"])
    cfg.eval.perplexity, cfg.eval.protocol = ["wikitext2"], "quick"
    t0 = time.perf_counter()
    model, tok = load_configured(cfg)
    stack = Stack(model)
    methods = [m for m in METHODS if RECOVERY.get(m).unsupported(stack) is None]
    skipped = [m for m in METHODS if m not in methods]
    sets = parse_sets(args.sets) if args.sets else best_windows(model, tok, cfg, [int(k) for k in args.k.split(",")])
    print(
        f"{args.model}: {stack.n_blocks} blocks, C = {model.config.hidden_size}; repair data "
        f"{describe(repair_spec(cfg))}; WikiText-2 test {args.windows} x {cfg.eval.ppl_seq_len}; "
        f"methods {', '.join(methods)}" + (f" (not for this family: {', '.join(skipped)})" if skipped else ""),
        flush=True,
    )
    specs = [(s, m) for s in sets for m in methods]
    t1 = time.perf_counter()
    ops = fit_all(model, tok, specs, cfg)
    t2 = time.perf_counter()
    nums = perplexity_finalists(model, tok, [(s, o) for (s, _), o in zip(specs, ops)], cfg.eval, cfg.data_dir)
    t3 = time.perf_counter()
    rows: list[dict] = []
    for s in sets:
        per = {m: (n, o) for (s2, m), n, o in zip(specs, nums, ops) if s2 == s}
        nll = {m: n.window_nll["wikitext2"] for m, (n, _) in per.items()}
        print(f"\nremoved {list(s)} (k = {len(s)})")
        print("| method | perplexity | / none [95% CI] | / folded [95% CI] | alignment after |")
        print("|---|---|---|---|---|")
        for m, (n, o) in per.items():
            ppl = n.perplexity["wikitext2"]
            al = "" if o is None else f"{np.mean([r['alignment_after'] for r in o.report]):.3f}"
            vs_none = "" if m == "none" else fmt(nll[m], nll["none"])
            vs_fold = "" if m in ("folded", "none") else fmt(nll[m], nll["folded"])
            print(f"| {m} | {ppl:.2f} | {vs_none} | {vs_fold} | {al} |", flush=True)
            rows.append(
                {"removed": list(s), "method": m, "ppl": ppl, "vs_none": vs_none, "vs_folded": vs_fold, "align": al}
            )
    print(
        f"\nseconds: load+select {t1 - t0:.0f}, fits {t2 - t1:.0f}, perplexities {t3 - t2:.0f} "
        f"({torch.get_num_threads()} threads)"
    )
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"model": args.model, "windows": args.windows, "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
