"""Scoring throughput: ghostsearch's Scorer vs the naive peer loop, same tokens, same dtype.

  python bench/scoring.py [--n-seq 8 --seq-len 256 --dtype fp32 --naive-every 3]
  python bench/scoring.py --device cuda --model llama3-8b-random   # on a GPU machine
  python bench/scoring.py --model llama8b-shape --n-seq 16 --seq-len 64 --workloads d --race-steps 1

Workloads: (a) every candidate of the first three greedy steps (R ∪ {j}), (b) 30 random removed
sets of 6 of the blocks, (c) the margin objective on 4-way multiple-choice items, (d) greedy steps
raced (search/racing.py, default race parameters) against the same steps scored exactly by
ghostsearch and by the naive peer loop: steps per second and whether the raced step picks the
exact step's block (the same answer).
Models: a built-in/hub name, ``llama3-8b-random`` (Llama-3-8B's shape, random weights, for GPUs) or
``llama8b-shape``: Llama-3-8B's proportions at a width a CPU runs (32 blocks, hidden 1024, GQA with
8 kv heads, intermediate 3584, vocabulary 32k: the head costs ~3 blocks, as in the 8B model).
Naive peer loop: deep-copy the model, delete the blocks, full HF forward with full logits,
cross-entropy (margin: one sequence per (prompt, answer) pair, as harnesses do).
Floor: only the blocks a candidate must run (kept blocks from its first removed index) + head,
from the dense cached state, measured in the same run. The naive loop is timed on every
``--naive-every``-th candidate (the rate is per candidate); values are compared on those.
"""

from __future__ import annotations

import argparse
import math
import os
import random
import time
from typing import Any

import benchenv  # noqa: E402,F401  (the repository on sys.path, offline HF, ../shared/data as the data directory)
import torch
import torch.nn.functional as F

from ghostsearch.model.stack import Stack, physically_prune  # noqa: E402
from ghostsearch.objectives import CalibrationSpec, ObjectiveSpec  # noqa: E402
from ghostsearch.scoring import Scorer, ScorerEvaluator  # noqa: E402

SHAPES: dict[str, dict[str, Any]] = {  # random-weight Llamas: Llama-3-8B itself, and its proportions at a CPU's width
    "llama3-8b-random": dict(
        vocab_size=128256,
        hidden_size=4096,
        intermediate_size=14336,
        num_hidden_layers=32,
        num_attention_heads=32,
        num_key_value_heads=8,
        rope_theta=500000.0,
    ),
    "llama8b-shape": dict(
        vocab_size=32000,
        hidden_size=1024,
        intermediate_size=3584,
        num_hidden_layers=32,
        num_attention_heads=16,
        num_key_value_heads=8,
        rope_theta=500000.0,
    ),
}


class VocabFold:
    """A tokenizer whose ids are folded into a smaller vocabulary (id mod V): for random-weight shapes
    whose vocabulary is smaller than SmolLM2's 49,152 (llama8b-shape: 32k). The text is only a source
    of realistic token sequences for a random model, so folding changes nothing measured."""

    def __init__(self, tok, vocab_size: int):
        self.tok, self.vocab_size = tok, vocab_size

    def __call__(self, *args, **kwargs):
        out = self.tok(*args, **kwargs)
        out["input_ids"] = out["input_ids"] % self.vocab_size
        return out

    def __getattr__(self, name):
        return getattr(self.tok, name)


def load(args):
    if args.model in SHAPES:
        from transformers import AutoModelForCausalLM, AutoTokenizer, LlamaConfig

        from ghostsearch.model.models import model_path

        cfg = LlamaConfig(**SHAPES[args.model])
        torch.manual_seed(0)
        with torch.device(args.device):
            m = AutoModelForCausalLM.from_config(cfg, dtype=getattr(torch, args.dtype_torch)).eval()
        tok = AutoTokenizer.from_pretrained(model_path("smollm2-135m")[0])
        return m, (VocabFold(tok, cfg.vocab_size) if cfg.vocab_size < len(tok) else tok)
    from ghostsearch.model.models import load_model

    return load_model(args.model, dtype=args.dtype, device=args.device)


def naive_ppl(model, removed, batches):
    m = physically_prune(model, removed)
    total = n = 0.0
    with torch.no_grad():
        for b in batches:
            ids = b.input_ids.to(m.device)
            lg = m(ids).logits
            loss = F.cross_entropy(
                lg[:, :-1].reshape(-1, lg.shape[-1]).float(), ids[:, 1:].reshape(-1), reduction="sum"
            )
            total, n = total + loss.item(), n + ids[:, 1:].numel()
    del m
    return math.exp(total / n)


def naive_margin(model, removed, toks, golds):
    m = physically_prune(model, removed)
    ms = []
    with torch.no_grad():
        for (p, answers), g in zip(toks, golds):
            lps = []
            for a in answers:
                ids = torch.tensor([p + a], device=next(m.parameters()).device)
                lp = torch.log_softmax(m(ids).logits[0].float(), -1)
                lps.append(sum(lp[len(p) - 1 + t, a[t]].item() for t in range(len(a))))
            ms.append(lps[g] - max(v for j, v in enumerate(lps) if j != g))
    del m
    return -sum(ms) / len(ms)


def floor_time(sc, key, cands):
    """Only the kept blocks from the first removed index, plus the loss, from the dense state."""
    p = sc.prepared[key]
    st = sc.stack
    t0 = time.perf_counter()
    with torch.no_grad():
        for removed in cands:
            first = removed[0]
            b = max(x for x in p.dense[0] if x <= first)
            for mb, (batch, cap) in enumerate(zip(p.batches, p.caps)):
                h = p.dense[mb][b]
                for i in range(b, st.n_blocks):
                    if i not in removed:
                        h = st.block(i, h, cap)
                p.objective.loss(st, h, batch, batch.rows)
    return time.perf_counter() - t0


def greedy_candidates(sc, key, L, steps=3):
    """The candidates of greedy's first steps, with the accepted prefix as the hint (timed)."""
    R: tuple = ()
    out = []
    t0 = time.perf_counter()
    values = {}
    for _ in range(steps):
        best = None
        for j in range(L):
            if j in R:
                continue
            c = tuple(sorted(R + (j,)))
            v = sc.score(key, c, prefix=R or None).value
            values[c] = v
            out.append(c)
            if best is None or v < best[0]:
                best = (v, c)
        assert best is not None  # L > len(R): a step has candidates
        R = best[1]
    return out, values, time.perf_counter() - t0


def look_overhead(sc, key, spec, L):
    """The per-look overhead: greedy's first-step candidates scored on a look's rows (the race order's
    first n rows: scattered over the micro-batches), one at a time (score_rows) and all at once
    (score_rows_many), against one exact evaluation of the same number of rows (score at fidelity
    n/N: whole micro-batches), same candidates, same run. Ratios > 1 are what a look costs beyond the
    exact scoring of its rows."""
    from ghostsearch.search import RaceParams

    N = sc.prepared[key].n_rows
    cands = [(j,) for j in range(1, L - 1, 4)]  # every 4th single-block removal (a first greedy step's kind)
    order = RaceParams().order(N)
    for n in RaceParams().schedule(N)[:-1]:
        rows = tuple(int(r) for r in order[:n])
        t0 = time.perf_counter()
        for c in cands:
            sc.score(key, c, fidelity=n / N)
        exact = time.perf_counter() - t0
        t0 = time.perf_counter()
        for c in cands:
            sc.score_rows(key, c, rows)
        alone = time.perf_counter() - t0
        t0 = time.perf_counter()
        sc.score_rows_many(key, [(c, None) for c in cands], rows)
        many = time.perf_counter() - t0
        print(
            f"  look of {n:3d} of {N} rows, {len(cands)} candidates: exact {exact:6.2f}s | one at a time "
            f"{alone:6.2f}s ({alone / exact:.2f}x exact) | all at once {many:6.2f}s ({many / exact:.2f}x exact)",
            flush=True,
        )


def raced_steps(sc, key, spec, L, steps, model, batches, naive_every):
    """(d): greedy steps, raced vs exact (ghostsearch) vs the naive peer loop; same steps, same run."""
    from ghostsearch.search import Candidate, Race, RaceParams
    from ghostsearch.search.racing import run_race

    ev = ScorerEvaluator(sc, key)
    R: tuple[int, ...] = ()
    t_race = t_exact = t_naive = 0.0
    for step in range(steps):
        cands = [tuple(sorted(R + (j,))) for j in range(L) if j not in R]
        sc.prepared[key].runs.clear()
        t0 = time.perf_counter()
        out = run_race(Race([Candidate(c, prefix=R or None) for c in cands], RaceParams(), keep=1), ev, "bench")
        t_race += time.perf_counter() - t0
        used = sum(c.fidelity for c in out.told)
        won = min((v, c.removed) for c, v in zip(out.told, out.values) if c.fidelity >= 1)
        sc.prepared[key].runs.clear()
        t0 = time.perf_counter()
        exact = {c: sc.score(key, c, prefix=R or None).value for c in cands}
        t_exact += time.perf_counter() - t0
        sub = cands[::naive_every]
        t0 = time.perf_counter()
        naive = {c: naive_ppl(model, c, batches) for c in sub}
        t_naive += (time.perf_counter() - t0) * len(cands) / len(sub)
        best = min((v, c) for c, v in exact.items())
        diff = max(abs(exact[c] - v) / v for c, v in naive.items())
        print(
            f"  step {step + 1}: {len(cands)} candidates; raced used {used:.2f} evaluations; raced picks {won[1]}, "
            f"exact picks {best[1]}: {'same answer' if won[1] == best[1] else 'DIFFERENT'}; exact vs "
            f"naive rel {diff:.1e}"
        )
        R = best[1]
    print(
        f"(d) greedy, {steps} step(s): raced {steps / t_race:.4f} steps/s | exact ghostsearch "
        f"{steps / t_exact:.4f} | "
        f"naive {steps / t_naive:.4f} | raced vs naive {t_naive / t_race:.2f}x (target 3x) | "
        f"raced vs exact ghostsearch {t_exact / t_race:.2f}x"
    )


def report(name, n, ours_s, naive_n, naive_s, floor_s, diffs):
    ours_rate, naive_rate = n / ours_s, naive_n / naive_s
    print(
        f"{name:28s} ours {ours_rate:7.3f} cand/s | naive {naive_rate:7.3f} cand/s | speed-up "
        f"{ours_rate / naive_rate:5.2f}x"
        f" | max rel diff {max(diffs):.2e}" + (f" | {floor_s / ours_s:6.1%} of floor speed" if floor_s else "")
    )


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="smollm2-135m")
    ap.add_argument("--dtype", default="fp32")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--n-seq", type=int, default=8)
    ap.add_argument("--seq-len", type=int, default=256)
    ap.add_argument("--items", type=int, default=16)
    ap.add_argument("--naive-every", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--workloads", default="abc", help="which of a b c d o to run (o: per-look overhead)")
    ap.add_argument("--race-steps", type=int, default=1, help="greedy steps of workload (d)")
    ap.add_argument("--data-dir", default=os.environ.get("GHOSTSEARCH_DATA_DIR"))
    args = ap.parse_args()
    args.dtype_torch = {"fp32": "float32", "bf16": "bfloat16", "fp16": "float16"}[args.dtype]
    torch.set_num_threads(args.threads)
    import transformers

    transformers.utils.logging.set_verbosity_error()
    transformers.utils.logging.disable_progress_bar()
    model, tok = load(args)
    sc = Scorer(Stack(model), tok)
    L = sc.stack.n_blocks
    print(
        f"model {args.model} ({L} blocks), {args.dtype}, {args.device}, {args.n_seq} x {args.seq_len} tokens, "
        f"{torch.get_num_threads()} threads"
    )
    dataset = "c4" if args.data_dir else "lambada"
    spec = ObjectiveSpec.make("perplexity", CalibrationSpec(dataset, args.n_seq, args.seq_len, 0, args.data_dir))
    key = sc.prepare(spec)
    batches = sc.prepared[key].batches
    if "o" in args.workloads:
        look_overhead(sc, key, spec, L)
    if "d" in args.workloads:
        raced_steps(sc, key, spec, L, args.race_steps, model, batches, args.naive_every)

    def workload(name, k, cands, values, ours_s, naive):
        """Time the naive loop on every naive_every-th candidate; report rates, diff and floor."""
        sub = cands[:: args.naive_every]
        t0 = time.perf_counter()
        naive_vals = [naive(c) for c in sub]
        naive_s = time.perf_counter() - t0
        sc.prepared[k].runs.clear()
        report(
            name,
            len(cands),
            ours_s,
            len(sub),
            naive_s,
            floor_time(sc, k, cands),
            [abs(values[c] - v) / max(abs(v), 1e-3) for c, v in zip(sub, naive_vals)],
        )

    def timed(k, cands) -> tuple[dict, float]:
        t0 = time.perf_counter()
        values = {c: sc.score(k, c).value for c in cands}
        return values, time.perf_counter() - t0

    # (a) greedy's first three steps (with the accepted prefix as the hint)
    if "a" in args.workloads:
        cands, values, ours_s = greedy_candidates(sc, key, L)
        workload("(a) greedy, 3 steps", key, cands, values, ours_s, lambda c: naive_ppl(model, c, batches))

    # (b) 30 random sets of 6
    rng = random.Random(0)
    rand = [tuple(sorted(rng.sample(range(L), 6))) for _ in range(30)]
    if "b" in args.workloads:
        workload("(b) 30 random 6-sets", key, rand, *timed(key, rand), lambda c: naive_ppl(model, c, batches))
    if "c" not in args.workloads:
        return

    # (c) margin on 4-way items
    from ghostsearch.data import corpora as data
    from ghostsearch.objectives.margin import tokenize_item

    mkey = sc.prepare(ObjectiveSpec.make("margin", CalibrationSpec("arc_easy", args.items, 256, 0, args.data_dir)))
    items = data.sample_items(data.mc_items("arc_easy", args.data_dir), args.items, 0, "arc_easy")
    toks, golds = [tokenize_item(tok, it) for it in items], [it.gold for it in items]
    mc = [tuple(sorted(rng.sample(range(L), 4))) for _ in range(9)]
    workload(
        f"(c) margin, {args.items} items", mkey, mc, *timed(mkey, mc), lambda c: naive_margin(model, c, toks, golds)
    )
    print("targets: >= 2x on (a), >= 1.2x on (b), >= 3x on (c); values equal to 1e-3 relative; >= 85% of floor speed")


if __name__ == "__main__":
    main()
