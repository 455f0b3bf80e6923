"""`ghostsearch plan`: what a run will cost, from the configs alone (no weights loaded).

Per cell (searcher x objective x k x seed) and in total: evaluations (exact for greedy; the budget
for ga, bo, cbo: greedy's cost under ``compare.budget: matched``, else ``search.budget`` or twice
greedy's; an estimate for the others, whose cost depends on their answers), calibration tokens and
FLOPs per evaluation with prefix caching's expected saving, memory per actor against the device
(ghostsearch/memplan.py), wall time and device-hours on the cluster the config names.

FLOPs: 2 x parameters x tokens per block run and for the LM head (attention's T^2 term added).
Blocks run per evaluation, with prefix caching (every candidate starts from the deepest cached
state it shares): greedy and beam candidates R + {j} start at j, on average half the free depth;
a random k-subset starts at its first removed block, on average L/(k+1). Rate: ``plan --measure``
(a few block and head forwards at the run's dtype on this device), else ``pool.device_tflops``,
else a stated default (CPU 0.05, CUDA 200 TFLOP/s: a planning guess, not a measurement).
"""
from __future__ import annotations

import time
from dataclasses import dataclass

from ghostsearch.errors import GhostsearchError
from ghostsearch.memplan import GiB, Shape, plan_memory, read_config, resolve_every, shape_of

DEFAULT_TFLOPS = {"cpu": 0.05, "cuda": 200.0}
# fixed costs of a run, stated, when plan --measure does not time them (a cluster, or no --measure): a
# local Ray cluster's start with its actors, and reading weights (bytes per second)
RAY_START_S = {"cpu": 12.0, "cuda": 20.0}
LOAD_BYTES_PER_S = 0.5e9
EXACT, BUDGET, ESTIMATE = "exact", "budget", "estimate"


@dataclass
class Cell:
    searcher: str
    objective: str
    k: int
    seed: int
    evaluations: float
    kind: str
    tokens: int
    blocks_run: float
    flops: float


def evaluations(cfg, searcher: str, k: int, n_blocks: int, rows: int | None = None) -> tuple[float, str]:
    """(evaluations, exact | budget | estimate) of one cell; ``rows``: the calibration rows, which
    decide whether ``race: auto`` (the default) races greedy (then its exact cost is an upper bound).
    Exact for greedy (not raced) and the deterministic one-shot searchers (oneshot, shortgpt,
    streamline, lorp, fastblock: their count follows from the space alone)."""
    from ghostsearch.config import protected_blocks
    from ghostsearch.search.base import Space
    from ghostsearch.search.common import default_search_budget, greedy_cost
    from ghostsearch.search.racing import race_params

    space = Space(n_blocks, k, protected_blocks(cfg, n_blocks))
    params = cfg.search.params.get(searcher) or {}
    if searcher == "greedy":
        raced = race_params(params.get("race", "auto"), rows) is not None
        return float(greedy_cost(space)), BUDGET if raced else EXACT
    if searcher in ("ga", "bo", "cbo"):
        if cfg.compare.searchers and cfg.compare.budget == "matched":
            return float(greedy_cost(space)), BUDGET
        b = params.get("budget") or cfg.search.budget
        return float(b if b else default_search_budget(space)), BUDGET
    if searcher == "oneshot":  # every free single-block removal, then the top-k set (one of them when k = 1)
        if (params.get("prior") or "removal") == "removal":
            return float(len(space.free) + (1 if k > 1 else 0)), EXACT
        return 1.0, EXACT
    if searcher in ("shortgpt", "streamline", "lorp"):  # a statistic picks the set; it is scored once
        return 1.0, EXACT
    if searcher == "fastblock":  # the n_rescore best windows of k consecutive free blocks
        from ghostsearch.search.fastblock import windows

        return float(min(int(params.get("n_rescore", 4)), len(windows(space)))), EXACT
    if searcher == "beam":
        width = int(params.get("width", 4))
        return float(width * greedy_cost(space)), ESTIMATE
    return float(cfg.search.budget or greedy_cost(space)), ESTIMATE


def blocks_run(searcher: str, k: int, n_blocks: int) -> float:
    """Expected blocks one evaluation runs, prefix caching included."""
    if searcher in ("greedy", "beam"):
        return max(1.0, (n_blocks - k) / 2)
    return max(1.0, n_blocks - n_blocks / (k + 1) - k)


def flops_per_token_block(shape: Shape, T: int) -> float:
    return 2.0 * shape.block_params[0] + 4.0 * T * shape.heads * shape.head_dim  # weights + QK^T and AV


def rate(cfg, shape: Shape, measure: bool) -> tuple[float, str]:
    """FLOP/s of one device and where the number comes from."""
    dev = cfg.resolved_device().split(":")[0]
    if measure:
        return measure_rate(cfg, shape), f"measured on this {dev} (plan --measure)"
    if cfg.pool.device_tflops:
        return cfg.pool.device_tflops * 1e12, f"stated: pool.device_tflops={cfg.pool.device_tflops:g}"
    return DEFAULT_TFLOPS[dev] * 1e12, f"default {DEFAULT_TFLOPS[dev]:g} TFLOP/s for {dev} (a guess: measure or state it)"


def measure_rate(cfg, shape_: Shape, repeats: int = 3) -> float:
    """Time two real blocks and the head of the model's architecture (random weights, the run's
    dtype, one micro-batch) on this device: effective FLOP/s."""
    import torch

    from ghostsearch.models import resolve_dtype

    config = read_config(cfg.model, cfg.trust_remote_code)
    c = getattr(config, "text_config", None) or config
    c.num_hidden_layers = 2
    for key in [k for k, v in vars(c).items() if isinstance(v, list) and "layer" in k]:
        setattr(c, key, getattr(c, key)[:2])
    dev = cfg.resolved_device()
    dtype = resolve_dtype(cfg.dtype, dev)
    threads = torch.get_num_threads()
    if dev == "cpu":
        torch.set_num_threads(max(1, cfg.pool.threads))  # an actor's threads, not this process's
    try:
        return _time_forwards(cfg, config, shape_, dev, dtype, repeats)
    finally:
        torch.set_num_threads(threads)


def _time_forwards(cfg, config, shape_: Shape, dev: str, dtype, repeats: int) -> float:
    import torch
    from transformers import AutoModelForCausalLM

    from ghostsearch.stack import Batch, Stack

    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(config, dtype=dtype).to(dev).eval()
    stack = Stack(model)
    cal = cfg.calibration.for_objective(cfg.objective)
    m, T = min(cal.micro_batch, cal.n_seq), cal.seq_len
    ids = torch.randint(0, shape_.vocab, (m, T))
    cap = stack.capture(Batch(input_ids=ids))
    h = cap.states[0]
    with torch.no_grad():
        stack.run(h, cap, 0, ())  # warm-up
        if dev.startswith("cuda"):
            torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(repeats):
            out = stack.run(h, cap, 0, ())
            stack.token_logprobs(out.reshape(-1, out.shape[-1]), ids.reshape(-1).to(out.device))
        if dev.startswith("cuda"):
            torch.cuda.synchronize()
        dt = (time.perf_counter() - t0) / repeats
    flops = m * T * (2 * flops_per_token_block(shape_, T) + 2.0 * shape_.head_weight)
    return flops / dt


def evaluation_items(cfg) -> dict:
    """The downstream evaluation one model gets: items and requests per task (from the data, no
    tokenizer: tokens estimated as characters / 4, the context once per item as the native engine
    packs it) and the perplexity windows. ``None`` for a task whose data is not here."""
    from ghostsearch.evaluation_native import task_docs

    tasks: dict[str, dict[str, float] | None] = {}
    for t in cfg.eval.tasks:
        try:
            docs = task_docs(t, cfg.data_dir, cfg.eval.limit)
        except Exception:  # noqa: BLE001  (a task without data here: not counted, said so)
            tasks[t] = None
            continue
        if cfg.eval.max_items is not None:
            docs = docs[:max(1, cfg.eval.max_items // max(1, len(cfg.eval.tasks)))]
        chars = sum(len(d.requests[0][0]) + sum(len(c) for _, c in d.requests) for d in docs)
        tasks[t] = {"items": len(docs), "requests": sum(len(d.requests) for d in docs), "tokens": chars / 4}
    ppl = {c: ("the whole test set in 2048-token windows" if cfg.eval.protocol == "paper" else
               f"{cfg.eval.ppl_max_seq} x {cfg.eval.ppl_seq_len} tokens") for c in cfg.eval.perplexity}
    ppl_tokens = 0 if cfg.eval.protocol == "paper" or cfg.eval.ppl_max_seq is None else \
        len(cfg.eval.perplexity) * cfg.eval.ppl_max_seq * cfg.eval.ppl_seq_len
    cells = len({(s, o, k, sd) for s in (cfg.compare.searchers or [cfg.searcher])
                 for o in (cfg.compare.objectives or [cfg.objective]) for k in (cfg.compare.ks or [cfg.k])
                 for sd in (cfg.compare.seeds or [cfg.seed])})
    models = 1 + cells * len(cfg.compare.recovery)
    repaired = cells * len([m for m in cfg.compare.recovery if m != "none"])
    return {"tasks": tasks, "perplexity": ppl, "models": models, "repaired": repaired, "ppl_tokens": ppl_tokens}


def measure_load_rate(cfg, limit: int = 1 << 30) -> float | None:
    """Bytes per second reading the model's local weight files (at most ``limit`` bytes), or None
    when the weights are not on this machine (then LOAD_BYTES_PER_S, stated)."""
    from pathlib import Path

    from ghostsearch.models import model_path

    try:
        path = Path(model_path(cfg.model)[0])
    except Exception:  # noqa: BLE001  (a hub id: nothing local to time)
        return None
    files = sorted(path.glob("*.safetensors")) if path.is_dir() else []
    if not files:
        return None
    done, t0 = 0, time.perf_counter()
    for f in files:
        with open(f, "rb") as fh:
            while done < limit and (chunk := fh.read(64 << 20)):
                done += len(chunk)
        if done >= limit:
            break
    return done / max(time.perf_counter() - t0, 1e-6)


def measure_start(cfg) -> float | None:
    """Seconds for what a local run does before its first evaluation, timed for real: start Ray
    and the pool (every actor loads the model), check its identity (the first actor prepares every
    objective: data, tokens, the dense forward, statistics), then end them. None when this process
    already has Ray (a cluster: its start is not this command's to time)."""
    import ray

    from ghostsearch.pool.pool import connect, pool_identity, release_pool, start_pool

    if ray.is_initialized() or cfg.pool.name:
        return None
    t0 = time.perf_counter()
    started = connect(None, dashboard=cfg.pool.dashboard)
    try:
        broker = start_pool(cfg)
        specs: dict = {}
        for obj in (cfg.compare.objectives or [cfg.objective]):
            for seed in (cfg.compare.seeds or [cfg.seed]):
                spec = cfg.objective_spec(obj, seed)
                specs.setdefault(spec.key(), spec)
        pool_identity(broker, cfg, list(specs.values()))
        seconds = time.perf_counter() - t0
        release_pool(broker)
    finally:
        if started:
            ray.shutdown()
    return seconds


def plan_run(cfg, model_config: str | None = None, measure: bool = False, time_start: bool = True) -> dict:
    """Everything ``plan`` prints, as a dict (cells, totals, memory, assumptions). ``measure``: time
    the forwards here (and, with ``time_start``, a local run's start: :func:`measure_start`)."""
    shape = shape_of(read_config(model_config or cfg.model, cfg.trust_remote_code))
    L = shape.n_blocks
    gpa = cfg.pool.gpus_per_actor
    on_gpu = cfg.resolved_device().startswith("cuda")
    per_actor = int(gpa) if gpa and gpa >= 1 else (1 if on_gpu else 0)
    if cfg.pool.cluster_gpus is not None and per_actor > cfg.pool.cluster_gpus:
        raise GhostsearchError(f"pool.gpus_per_actor={gpa:g} is more than the cluster's {cfg.pool.cluster_gpus} GPUs "
                               "(pool.cluster_gpus); lower it or plan for a bigger cluster")
    if cfg.pool.cluster_gpus is not None and on_gpu and per_actor * cfg.pool.actors > cfg.pool.cluster_gpus:
        raise GhostsearchError(f"pool of {cfg.pool.actors} actors x {per_actor} GPUs needs {per_actor * cfg.pool.actors} "
                               f"GPUs but pool.cluster_gpus={cfg.pool.cluster_gpus}; lower pool.actors")
    mem = resolve_every(cfg, shape)
    flop_rate, rate_note = rate(cfg, shape, measure)
    cells = []
    for obj in (cfg.compare.objectives or [cfg.objective]):
        cal = cfg.calibration.for_objective(obj)
        tokens = cal.n_seq * cal.seq_len
        for s in (cfg.compare.searchers or [cfg.searcher]):
            for k in (cfg.compare.ks or [cfg.k]):
                n, kind = evaluations(cfg, s, k, L, rows=cal.n_seq)
                run = blocks_run(s, k, L)
                fl = tokens * (run * flops_per_token_block(shape, cal.seq_len) + 2.0 * shape.head_weight)
                for seed in (cfg.compare.seeds or [cfg.seed]):
                    cells.append(Cell(s, obj, k, seed, n, kind, tokens, run, fl))
    total_flops = sum(c.evaluations * c.flops for c in cells)
    # every actor prepares every objective once (one dense forward of its calibration, in parallel)
    prepare_flops = 0.0
    for obj in (cfg.compare.objectives or [cfg.objective]):
        cal = cfg.calibration.for_objective(obj)
        prepare_flops += cal.n_seq * cal.seq_len * (L * flops_per_token_block(shape, cal.seq_len) + 2.0 * shape.head_weight)
    devices_per_actor = max(1, per_actor)
    # a split actor runs its blocks one device after another: one device's rate per actor
    wall = prepare_flops / flop_rate + total_flops / (flop_rate * cfg.pool.actors)
    ev = evaluation_items(cfg)
    ev_tokens = sum(t["tokens"] for t in ev["tasks"].values() if t)
    # finalists start at their first removed block over the dense model's cached states: half the depth
    ev["seconds"] = ev["models"] * ev_tokens * (L / 2) * flops_per_token_block(shape, 512) / (flop_rate * cfg.pool.actors)
    # perplexity windows (quick protocol): every token through half the depth and the LM head
    T = cfg.eval.ppl_seq_len
    ev["ppl_seconds"] = ev["models"] * ev["ppl_tokens"] * ((L / 2) * flops_per_token_block(shape, T)
                                                           + 2.0 * shape.head_weight) / (flop_rate * cfg.pool.actors)
    # a repair (Ghosted, LinearPatch, ReplaceMe) is fitted from one dense forward of its data
    rep = cfg.recovery.n_seq * cfg.recovery.seq_len * L * flops_per_token_block(shape, cfg.recovery.seq_len)
    ev["repair_seconds"] = ev["repaired"] * rep / (flop_rate * cfg.pool.actors)
    # fixed costs: measured (plan --measure on a local run: Ray, the pool, the first prepare), else a
    # local Ray start (stated) and every actor reading the weights (in parallel)
    dev = cfg.resolved_device().split(":")[0]
    started_in = measure_start(cfg) if measure and time_start and model_config is None else None
    load_rate = measure_load_rate(cfg) if measure and started_in is None else None
    weight_bytes = shape.params * mem.parts["bytes_per_param"]
    if started_in is not None:
        startup, load_note = started_in, "measured: Ray, the pool and its first prepare, started and ended here"
    else:
        startup = RAY_START_S.get(dev, RAY_START_S["cuda"]) + weight_bytes / (load_rate or LOAD_BYTES_PER_S)
        load_note = ("a local Ray start, stated, and the weights read at "
                     + (f"{load_rate / 1e9:.2f} GB/s (measured)" if load_rate else
                        f"{LOAD_BYTES_PER_S / 1e9:g} GB/s (stated)"))
    compare_wall = wall + startup + ev["seconds"] + ev["ppl_seconds"] + ev["repair_seconds"]
    return {"model": model_config or cfg.model, "shape": shape, "cells": cells, "memory": mem, "evaluation": ev,
            "fits": mem.fits, "rate": flop_rate, "rate_note": rate_note, "total_flops": total_flops,
            "startup_s": startup, "load_note": load_note, "startup_measured": started_in is not None,
            "search_wall_s": wall + startup, "compare_wall_s": compare_wall,
            "evaluations": sum(c.evaluations for c in cells), "wall_s": wall,
            "prepare_s": prepare_flops / flop_rate, "scoring_s": total_flops / (flop_rate * cfg.pool.actors),
            "device_hours": wall * cfg.pool.actors * devices_per_actor / 3600 if on_gpu else 0.0,
            "actors": cfg.pool.actors, "devices_per_actor": devices_per_actor, "on_gpu": on_gpu}


def format_plan(cfg, p: dict) -> str:
    from ghostsearch.memplan import fmt_count

    sh, mem = p["shape"], p["memory"]
    out = [f"model {p['model']}: {sh.n_blocks} blocks, hidden {sh.hidden}, {fmt_count(sh.params)} parameters, "
           f"dtype {cfg.dtype}, {mem.parts['bytes_per_param']} bytes/parameter",
           "",
           f"{'searcher':<10} {'objective':<11} {'k':>3} {'seed':>4} {'evaluations':>12} {'kind':<8} "
           f"{'tokens/eval':>11} {'blocks/eval':>11} {'FLOPs/eval':>10} {'hours':>8}"]
    for c in p["cells"]:
        hrs = c.evaluations * c.flops / (p["rate"] * p["actors"]) / 3600
        out.append(f"{c.searcher:<10} {c.objective:<11} {c.k:>3} {c.seed:>4} {c.evaluations:>12,.0f} {c.kind:<8} "
                   f"{c.tokens:>11,} {c.blocks_run:>11.1f} {fmt_count(c.flops):>10} {hrs:>8.2f}")
    out += ["",
            f"total: {p['evaluations']:,.0f} evaluations, {p['total_flops'] / 1e15:,.0f} PFLOP, wall "
            f"{p['wall_s'] / 3600:.2f} h ({p['wall_s']:.0f} s) on {p['actors']} actor(s) x {p['devices_per_actor']} device(s)"
            + (f", {p['device_hours']:.1f} GPU-hours" if p["on_gpu"] else ""),
            f"time: preparing {p['prepare_s']:,.0f} s (every actor, once per objective) + scoring {p['scoring_s']:,.0f} s; "
            f"rate: {p['rate'] / 1e12:.3g} TFLOP/s per actor ({p['rate_note']})",
            f"whole run: search {p['search_wall_s']:,.0f} s = start-up {p['startup_s']:,.0f} s ({p['load_note']}) "
            f"+ the wall above; compare {p['compare_wall_s']:,.0f} s = the search + "
            f"finalist evaluation {p['evaluation']['seconds'] + p['evaluation']['ppl_seconds']:,.0f} s + recovery fits "
            f"{p['evaluation']['repair_seconds']:,.0f} s ({p['evaluation']['repaired']} repaired models)",
            f"memory per actor: {mem.line()}; cache.every={mem.every} ({mem.parts['kept_boundaries']} boundaries of "
            f"{mem.parts['state_bytes'] / GiB:.2f} GiB), prefix runs {mem.parts['prefix_run_count']}"
            + (f", host {mem.host / GiB:.1f} GiB (cache.offload)" if mem.host else "")
            + ("" if mem.fits else "  DOES NOT FIT"),
            evaluation_line(p["evaluation"]),
            "kinds: exact (greedy not raced, and the one-shot searchers: oneshot, shortgpt, streamline, lorp, fastblock); budget = at most that many (raced greedy: race auto from 32 "
            "calibration rows; ga stops when its next generation does not fit what is left); estimate = depends on "
            "the searcher's answers",
            "not counted: the paper protocol's perplexity windows (their token count needs the corpus), the report"]
    return "\n".join(out)


def evaluation_line(ev: dict) -> str:
    parts = [f"{t} {v['items']:,} items ({v['requests']:,} requests, ~{v['tokens'] / 1e6:.2f}M tokens)" if v
             else f"{t} (no data here)" for t, v in ev["tasks"].items()]
    ppl = "; ".join(f"{c}: {w}" for c, w in ev["perplexity"].items())
    return (f"evaluation per model: {', '.join(parts) or 'no tasks'}; perplexity {ppl}; up to {ev['models']} models "
            f"(cells x compare.recovery + dense; a set found twice is evaluated once): ~{ev['seconds'] / 3600:.2f} h "
            "of task items at the rate (tokens ~ characters / 4; perplexity windows not timed)")


__all__ = ["plan_run", "format_plan", "evaluations", "blocks_run", "measure_rate", "plan_memory"]
