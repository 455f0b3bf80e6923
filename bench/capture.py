"""The dense pass of a finalist share up to its deepest start only (Stack.capture's ``upto``) against
the full dense pass, in the same process: SmolLM2-135M fp32, one finalist alone (a share of one,
as study 2's S2-S4 driver and ``eval.share: 1`` run), WikiText-2 test windows of 2048 tokens
(the paper protocol) through evaluate.perplexity_finalists.

  python bench/capture.py [--removed 12,13,14,15,16,17,18,19] [--windows 4] [--repeats 2] [--threads 2]

baseline: Stack.capture ignores ``upto`` (every block runs densely, then the finalist from its start);
upto:     the blocks past the finalist's start are passed through.
The two alternate (baseline, upto, baseline, upto, ...); prints each one's best CPU and wall seconds,
the ratio baseline / upto, and whether the perplexities and per-window NLLs are identical.
"""

from __future__ import annotations

import argparse
import time

import benchenv  # noqa: F401  (repository on sys.path, offline HF, ../shared/data)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--removed", default="12,13,14,15,16,17,18,19", help="the finalist's removed blocks")
    ap.add_argument("--windows", type=int, default=4, help="WikiText-2 windows of 2048 tokens")
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()

    import torch

    from ghostsearch.config import load_config
    from ghostsearch.core.logs import quiet_libraries
    from ghostsearch.evaluation.evaluate import perplexity_finalists
    from ghostsearch.model.models import load_model
    from ghostsearch.model.stack import Stack

    quiet_libraries()
    torch.set_num_threads(args.threads)
    removed = [int(x) for x in args.removed.split(",")]
    cfg = load_config(
        None,
        [
            "model=smollm2-135m",
            "dtype=fp32",
            "device=cpu",
            "eval.perplexity=[wikitext2]",
            "eval.protocol=quick",
            "eval.ppl_seq_len=2048",
            f"eval.ppl_max_seq={args.windows}",
            "eval.batch_size=1",
        ],
    )
    model, tok = load_model(cfg.model, dtype="fp32", device="cpu")
    real = Stack.capture

    def full(self, batch, upto=None):  # the baseline: ignore upto
        return real(self, batch)

    best: dict[str, tuple[float, float]] = {}
    out: dict[str, list] = {}
    for _ in range(args.repeats):
        for name in ("baseline", "upto"):
            Stack.capture = full if name == "baseline" else real  # type: ignore[method-assign]
            t0, c0 = time.perf_counter(), time.process_time()
            out[name] = perplexity_finalists(model, tok, [(removed, None)], cfg.eval, cfg.data_dir)
            wall, cpu = time.perf_counter() - t0, time.process_time() - c0
            old = best.get(name, (float("inf"), float("inf")))
            best[name] = (min(old[0], cpu), min(old[1], wall))
    Stack.capture = real  # type: ignore[method-assign]
    (b_cpu, b_wall), (u_cpu, u_wall) = best["baseline"], best["upto"]
    same = out["baseline"] == out["upto"]
    print(
        f"finalist removes {removed} (first cut {min(removed)} of 30 blocks), {args.windows} windows x 2048 "
        f"tokens, {args.threads} threads, best of {args.repeats}"
    )
    print(f"baseline (full dense pass): {b_cpu:.1f} CPU-s, {b_wall:.1f} s wall")
    print(f"upto (dense pass to block {min(removed)}): {u_cpu:.1f} CPU-s, {u_wall:.1f} s wall")
    print(f"ratio baseline / upto: {b_cpu / u_cpu:.2f}x CPU, {b_wall / u_wall:.2f}x wall; identical numbers: {same}")


if __name__ == "__main__":
    main()
