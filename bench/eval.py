"""Downstream evaluation of finalists: native engine (packed items, dense prefix cache) vs lm-eval's HFLM.

  python bench/eval.py [--limit 20 --sets 4 --tasks all --threads 2 --batch 16]

SmolLM2-135M (fp32 on CPUs without native bf16); 8 finalists = 4 removed sets of the study
(docs/results.md; first cuts at blocks 4, 13, 1, 12; ``--sets`` takes the first N) each unrepaired and repaired
with Ghosted
Layers (C4, 8 x 256; operators fitted once, outside the timings). The first ``--limit`` documents of
each task, the same for every engine; all runs in this process with the same torch threads:
  lm-eval:  evaluate.zero_shot (HFLM, batch --batch) on each finalist physically pruned (and repaired);
  packed:   the native engine on each finalist alone, physically pruned (and repaired): packing and
            the answers-only LM head, no prefix shared across finalists;
  native:   the native engine on all 8 finalists at once (packing + dense prefix cache);
  capped:   the same with eval.cache_gib at a quarter of what native held (or one micro-batch's
            states where that is more): the cap, respected, and the same numbers.
Wall time on a shared machine follows the other jobs' load, so CPU seconds of this process are
printed beside it (with --threads 1 they measure the work itself). Prints items per second and the ratios native /
lm-eval (the issue's target: >= 5x) and native /
packed (the prefix cache's share), each finalist's cost relative to one dense forward, the cached
states' peak bytes and the process's peak RSS, and whether accuracies agree (must be identical).
"""

from __future__ import annotations

import argparse
import resource
import time

import benchenv  # noqa: F401  (repository on sys.path, offline HF, ../shared/data)

SETS = [(4, 16, 17, 18), (13, 14, 15, 16, 17, 18), (1, 6, 7, 12, 20, 28), (12, 13, 14, 15, 16, 17, 18, 19)]


def accuracies(res: dict, tasks) -> dict:
    return {k: v for k, v in res.items() if any(k == f"{t}_{m}" for t in tasks for m in ("acc", "acc_norm"))}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--limit", type=int, default=20, help="documents per task")
    ap.add_argument("--sets", type=int, default=4, help="removed sets (x2 finalists: unrepaired, ghosted)")
    ap.add_argument("--tasks", default="all")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--skip-lm-eval", action="store_true", help="native runs only (no ratio to lm-eval)")
    args = ap.parse_args()

    import torch

    from ghostsearch.config import load_config
    from ghostsearch.core.logs import quiet_libraries
    from ghostsearch.data import corpora as data
    from ghostsearch.evaluation.evaluate import zero_shot
    from ghostsearch.evaluation.native import (
        evaluate_finalists_native,
        fit_finalists,
        pack_docs,
        resolve_max_length,
        state_bytes,
        task_docs,
    )
    from ghostsearch.model.models import load_model
    from ghostsearch.model.stack import Stack, physically_prune
    from ghostsearch.recovery.export import pruned_model

    quiet_libraries()
    torch.set_num_threads(args.threads)
    tasks = list(data.MC_TASKS) if args.tasks == "all" else args.tasks.split(",")
    cfg = load_config(
        None,
        [
            "model=smollm2-135m",
            "dtype=fp32",
            "recovery.n_seq=8",
            "recovery.seq_len=256",
            f"eval.tasks=[{','.join(tasks)}]",
            f"eval.limit={args.limit}",
            "eval.sample=first",
            f"eval.batch_size={args.batch}",
        ],
    )
    model, tok = load_model(cfg.model, dtype=cfg.dtype)
    finalists = fit_finalists(model, tok, cfg, [(s, m) for s in SETS[: args.sets] for m in ("none", "ghosted")])
    names = [f"-{','.join(map(str, r))}{'+ghosted' if ops else ''}" for r, ops in finalists]
    items = len(finalists) * sum(min(args.limit, len(data.task_rows(t, cfg.data_dir))) for t in tasks)
    print(
        f"{len(finalists)} finalists x {len(tasks)} tasks x {args.limit} docs = {items} items; "
        f"{args.threads} threads, batch {args.batch}"
    )
    evaluate_finalists_native(model, tok, finalists[:1], cfg.eval, cfg.data_dir, progress=False)  # warm caches

    cpu = {"native": 0.0, "packed": 0.0, "capped": 0.0, "lm-eval": 0.0}

    def run(fn, name):  # wall seconds returned; CPU seconds of this process (all threads) added to cpu[name]
        t0, c0 = time.perf_counter(), time.process_time()
        out = fn()
        cpu[name] += time.process_time() - c0
        return out, time.perf_counter() - t0

    rss0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    st: dict = {}
    (native, rows), t_native = run(
        lambda: evaluate_finalists_native(model, tok, finalists, cfg.eval, cfg.data_dir, progress=False, stats=st),
        "native",
    )
    rss1 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    native = [r.to_dict() for r in native]
    stack, max_len = Stack(model), resolve_max_length(model, tok)
    one_mb = max(
        state_bytes(mb, stack, len({r[0] for r, _ in finalists}))
        for t in tasks
        for mb in pack_docs(tok, task_docs(t, cfg.data_dir, args.limit), max_len, args.batch)[0]
    )
    cap = max(st["cache_bytes_peak"] / 4, one_mb)  # a quarter, or one micro-batch where that is more
    capped_cfg = load_config(
        None,
        [
            f"eval.tasks=[{','.join(tasks)}]",
            f"eval.limit={args.limit}",
            "eval.sample=first",
            f"eval.batch_size={args.batch}",
            f"eval.cache_gib={cap / 2**30}",
        ],
    )
    st_cap: dict = {}
    (capped, _), t_capped = run(
        lambda: evaluate_finalists_native(
            model, tok, finalists, capped_cfg.eval, cfg.data_dir, progress=False, stats=st_cap
        ),
        "capped",
    )
    capped = [r.to_dict() for r in capped]
    packed, ref, t_packed, t_ref = [], [], 0.0, 0.0
    for r, ops in finalists:  # one pruned copy at a time (a copy per finalist would be 8 x 0.5 GB)
        m = pruned_model(model, ops) if ops else physically_prune(model, r)
        (res, _), t = run(
            lambda m=m: evaluate_finalists_native(m, tok, [((), None)], cfg.eval, cfg.data_dir, progress=False),
            "packed",
        )
        packed.append(res[0].to_dict())
        t_packed += t
        if not args.skip_lm_eval:
            res, t = run(lambda m=m: zero_shot(m, tok, tasks, args.limit, args.batch, cfg.data_dir), "lm-eval")
            ref.append(res.to_dict())
            t_ref += t
        del m
    print(f"native  (packed + prefix cache): {t_native:8.1f} s  {items / t_native:7.2f} items/s")
    print(f"packed  (each finalist alone):   {t_packed:8.1f} s  {items / t_packed:7.2f} items/s")
    print(f"capped  (cache_gib ~ peak / 4):  {t_capped:8.1f} s  {items / t_capped:7.2f} items/s")
    print(f"prefix cache's share: packed / native = {t_packed / t_native:.2f}x")
    dense = st["dense_seconds"]
    print(
        f"dense forwards {dense:.1f} s; per finalist, seconds from its start / one dense forward "
        "(LM head on answer tokens included):"
    )
    for name, (r, _), s in zip(names, finalists, st["finalist_seconds"]):
        print(f"  {name:32s} first cut {r[0]:2d}: {s:6.1f} s = {s / dense:.2f} of a dense forward")
    print(
        f"cached dense states: peak {st['cache_bytes_peak'] / 2**20:.1f} MiB (cap {cfg.eval.cache_gib} GiB); "
        f"capped run: peak {st_cap['cache_bytes_peak'] / 2**20:.1f} MiB <= cap "
        f"{capped_cfg.eval.cache_gib * 1024:.1f} MiB: "
        f"{st_cap['cache_bytes_peak'] <= capped_cfg.eval.cache_gib * 2**30}"
    )
    print(f"process peak RSS: {rss0 / 1024:.0f} MiB before the native run, {rss1 / 1024:.0f} MiB after")
    same = all(accuracies(a, tasks) == accuracies(b, tasks) for a, b in zip(native, capped)) and all(
        accuracies(a, tasks) == accuracies(b, tasks) for a, b in zip(native, packed)
    )
    print(f"accuracies identical native = capped = packed: {same}")
    if args.skip_lm_eval:
        return
    print(f"lm-eval (HFLM per finalist):     {t_ref:8.1f} s  {items / t_ref:7.2f} items/s")
    print(
        f"native / lm-eval = {t_ref / t_native:.2f}x items per second (target >= 5x); "
        f"packing alone (packed / lm-eval) = {t_ref / t_packed:.2f}x"
    )
    print(
        f"CPU seconds (this process): native {cpu['native']:.1f}, packed {cpu['packed']:.1f}, capped "
        f"{cpu['capped']:.1f}, lm-eval {cpu['lm-eval']:.1f}; native / lm-eval = "
        f"{cpu['lm-eval'] / cpu['native']:.2f}x, "
        f"packed / lm-eval = {cpu['lm-eval'] / cpu['packed']:.2f}x, cache's share = "
        f"{cpu['packed'] / cpu['native']:.2f}x"
    )
    diff = max(abs(a[k] - b[k]) for a, b in zip(native, ref) for k in accuracies(b, tasks))
    print(
        f"accuracies identical native = lm-eval: {diff == 0} (largest difference {diff:g}); "
        f"native mean_acc per finalist: {[round(sum(r[f'{t}_acc'] for t in tasks) / len(tasks), 4) for r in native]}"
    )


if __name__ == "__main__":
    main()
