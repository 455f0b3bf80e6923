"""What pruning buys, measured: parameters, weight memory, peak memory, prefill and decode tokens/s
of the dense model and of pruned (and repaired) models, in one process, with interleaved repeats.

Every pruned model is measured as a user deploying ``ghostsearch export`` gets it: the removed
blocks physically deleted (``stack.physically_prune``, a deep copy) and a repair's operators
attached the way ``load_pruned`` attaches them (``recovery.export.pruned_model``: Ghosted and
LinearPatch add one C x C fp32 matmul per cut, ReplaceMe folds into ``down_proj`` and adds
nothing). Skipping blocks in the unpruned model would be the same arithmetic; deleting them is
what an export runs, so that is what is timed.

Timing: after one warm-up call per model, ``repeats`` rounds; in each round every model runs once
(prefill, then decode) in a rotated order, so slow drift of a shared machine falls on all models
alike. A model's speed-up is the median over rounds of (dense time / its time) in the SAME round;
the spread is the min..max of those per-round ratios. Tokens/s are medians too (min..max beside).

* prefill: one forward of ``batch`` x ``seq_len`` prompt tokens with the KV cache filled
  (``use_cache=True``, logits of the last position only, as generation does); tokens/s =
  batch * seq_len / time.
* decode: ``decode_tokens`` greedy steps of one token per row after that prefill (the prefill not
  timed); tokens/s = batch * decode_tokens / time.
* peak memory: on CUDA, ``torch.cuda.max_memory_allocated`` over one prefill + decode at the
  largest batch (weights included). On CPU, torch has no allocator statistics: the number is the
  exact bytes of the weights + the KV cache held after that prefill + decode (activations of one
  forward are not counted; they are at most a few layers' worth). ``peak_method`` says which.

The ideal speed-up of removing k of L blocks is L / (L - k) (blocks only; the embeddings, the head
and the repair's matmuls do not shrink, so real speed-ups fall below it, most for decode at a
small batch where the head's vocab matmul weighs most).
"""

from __future__ import annotations

import dataclasses
import math
import statistics
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

import torch
from torch import nn

from ghostsearch.core.errors import GhostsearchError
from ghostsearch.model.stack import Stack, check_removed, physically_prune
from ghostsearch.recovery.base import Operators

PEAK_CUDA = "cuda max_memory_allocated (weights + activations + KV cache)"
PEAK_CPU = "weights + KV cache tensors (exact bytes; CPU has no allocator statistics, activations not counted)"


def _block_params(stack: Stack, removed: Sequence[int]) -> int:
    return sum(p.numel() for i in removed for p in stack.blocks[i].parameters())


def pruned_params(model: Any, removed: Sequence[int] = (), operators: Operators | None = None) -> int:
    """The exact parameter count of ``model`` with ``removed`` blocks deleted (as an export has it),
    plus a repair's operator matrices (one C x C per cut for Ghosted/LinearPatch; a ReplaceMe export
    folds its maps and adds none). Tied weights count once. No copy, no measurement."""
    stack = Stack(model)
    removed = check_removed(set(removed), stack.n_blocks, what="the pruned set")
    total = sum(p.numel() for p in model.parameters())
    return total - _block_params(stack, removed) + _operator_params(operators)


def meta_model(spec: str, trust_remote_code: bool = False):
    """The model ``spec`` built on the meta device from its config alone: exact parameter counts
    (``pruned_params``) without reading or allocating any weight."""
    from transformers import AutoConfig, AutoModelForCausalLM

    from ghostsearch.model.models import model_path

    path, kw = model_path(spec)
    config = AutoConfig.from_pretrained(path, trust_remote_code=trust_remote_code, **kw)
    with torch.device("meta"):
        return AutoModelForCausalLM.from_config(config, trust_remote_code=trust_remote_code)


def _operator_params(operators: Operators | None) -> int:
    if operators is None or not operators.mats:
        return 0
    from ghostsearch.recovery.base import recovery_for

    if getattr(recovery_for(operators), "folds", False):
        return 0
    return sum(int(m.numel()) for m in operators.mats.values())


def _operator_bytes(operators: Operators | None) -> int:
    if _operator_params(operators) == 0:
        return 0
    assert operators is not None
    return sum(int(m.numel()) * 4 for m in operators.mats.values())  # fp32, as load_pruned keeps them


def cost_operators(method: str, removed: Sequence[int], n_blocks: int, hidden: int) -> Operators:
    """Operators with the shape (not the values) of ``method``'s repair of ``removed``: what its
    inference costs does not depend on the fitted numbers. Ghosted and LinearPatch: one C x C matrix
    (h + h M, fp32) at the end of each cut; ReplaceMe folds into ``down_proj`` and ``none`` adds
    nothing (no matrices). For timing a repair a run's ``recover`` fitted without fitting it again."""
    from ghostsearch.recovery.base import cuts, get_recovery

    rec = get_recovery(method)
    removed = tuple(sorted(removed))
    if rec.identity or getattr(rec, "folds", False):
        return rec.operators(removed, n_blocks, {}, [])
    return rec.operators(removed, n_blocks, {b: torch.zeros(hidden, hidden) for _, b in cuts(removed)}, [])


def weight_bytes(model: nn.Module) -> int:
    """Bytes of a model's parameters and buffers (tied weights once)."""
    seen: set[int] = set()
    n = 0
    for t in list(model.parameters()) + list(model.buffers()):
        if id(t) in seen:
            continue
        seen.add(id(t))
        n += t.numel() * t.element_size()
    return n


@dataclass(frozen=True)
class Throughput:
    """One phase (prefill or decode) at one batch size: tokens/s (median, min..max over rounds) and
    the speed-up over the dense model in the same rounds (median, min..max of per-round ratios)."""

    phase: str
    batch: int
    tokens_per_s: float
    tokens_per_s_lo: float
    tokens_per_s_hi: float
    speedup: float
    speedup_lo: float
    speedup_hi: float

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


@dataclass(frozen=True)
class SpeedRow:
    """One model: the dense one (removed ()) or a pruned one, with its repair."""

    label: str
    removed: tuple[int, ...]
    recovery: str
    n_blocks: int  # blocks of the dense model (L)
    params: int
    weight_bytes: int
    peak_bytes: int | None
    ideal_speedup: float  # L / (L - k)
    throughput: tuple[Throughput, ...] = ()

    @property
    def k(self) -> int:
        return len(self.removed)

    def at(self, phase: str, batch: int | None = None) -> Throughput | None:
        """The throughput of ``phase`` at ``batch`` (None: the largest batch measured)."""
        rows = [t for t in self.throughput if t.phase == phase and (batch is None or t.batch == batch)]
        return max(rows, key=lambda t: t.batch) if rows else None

    def to_dict(self) -> dict:
        d = dataclasses.asdict(self)
        d["removed"] = list(self.removed)
        d["k"] = self.k
        d["throughput"] = [t.to_dict() for t in self.throughput]
        return d

    def flat(self) -> dict:
        """One flat row (Parquet): the throughput as prefill_b1_tps, prefill_b1_speedup, ..."""
        d = {k: v for k, v in self.to_dict().items() if k != "throughput"}
        d["removed"] = " ".join(map(str, self.removed))
        for t in self.throughput:
            p = f"{t.phase}_b{t.batch}"
            d.update(
                {
                    f"{p}_tps": t.tokens_per_s,
                    f"{p}_tps_lo": t.tokens_per_s_lo,
                    f"{p}_tps_hi": t.tokens_per_s_hi,
                    f"{p}_speedup": t.speedup,
                    f"{p}_speedup_lo": t.speedup_lo,
                    f"{p}_speedup_hi": t.speedup_hi,
                }
            )
        return d


@dataclass(frozen=True)
class SpeedReport:
    """Every model measured together, and how."""

    rows: tuple[SpeedRow, ...]
    device: str
    dtype: str
    batches: tuple[int, ...]
    seq_len: int
    decode_tokens: int
    repeats: int
    threads: int
    peak_method: str
    peak_batch: int
    note: str = "dense and pruned interleaved in one process; speed-up = median of per-round ratios"
    extra: dict = field(default_factory=dict)

    def to_dict(self) -> dict:
        d = dataclasses.asdict(self)
        d["rows"] = [r.to_dict() for r in self.rows]
        d["batches"] = list(self.batches)
        return d

    def row(self, removed: Sequence[int], recovery: str = "none") -> SpeedRow | None:
        key = tuple(sorted(removed))
        return next((r for r in self.rows if r.removed == key and r.recovery == recovery), None)


@dataclass
class _Model:
    label: str
    removed: tuple[int, ...]
    recovery: str
    model: nn.Module
    params: int
    weight_bytes: int
    times: dict = field(default_factory=dict)  # (phase, batch) -> [seconds per round]


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _prompt(vocab: int, batch: int, seq_len: int, device, seed: int = 0) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.randint(0, vocab, (batch, seq_len), generator=g).to(device)


@torch.inference_mode()
def _prefill(model: nn.Module, ids: torch.Tensor):
    return model(input_ids=ids, use_cache=True, logits_to_keep=1)


def _cache_arg(model: nn.Module) -> str:
    """The forward's name for the KV cache: ``cache`` (transformers >= 5.2x) or ``past_key_values``."""
    import inspect

    return "cache" if "cache" in inspect.signature(model.forward).parameters else "past_key_values"


def _cache_of(out) -> Any:
    c = getattr(out, "cache", None)
    return c if c is not None else out.past_key_values


@torch.inference_mode()
def _decode(model: nn.Module, out, n: int):
    name = _cache_arg(model)
    past = _cache_of(out)
    nxt = out.logits[:, -1:].argmax(-1)
    for _ in range(n):
        out = model(input_ids=nxt, use_cache=True, **{name: past})
        past = _cache_of(out)
        nxt = out.logits[:, -1:].argmax(-1)
    return past


def _cache_bytes(past: Any) -> int:
    """Bytes of every tensor a KV cache holds (DynamicCache layers, or legacy tuples)."""
    seen: set[int] = set()
    n = 0

    def walk(x, depth=0):
        nonlocal n
        if depth > 6:
            return
        if isinstance(x, torch.Tensor):
            if id(x) not in seen:
                seen.add(id(x))
                n += x.numel() * x.element_size()
        elif isinstance(x, (list, tuple)):
            for v in x:
                walk(v, depth + 1)
        elif isinstance(x, dict):
            for v in x.values():
                walk(v, depth + 1)
        elif hasattr(x, "__dict__") and not isinstance(x, nn.Module):
            for v in vars(x).values():
                walk(v, depth + 1)

    walk(past)
    return n


def _time(fn, device) -> tuple[float, Any]:
    _sync(device)
    t0 = time.perf_counter()
    out = fn()
    _sync(device)
    return time.perf_counter() - t0, out


def _one_round(model: nn.Module, ids: torch.Tensor, decode_tokens: int, device) -> tuple[float, float]:
    """Seconds of one prefill and of the decode that follows it."""
    t_pre, out = _time(lambda: _prefill(model, ids), device)
    t_dec, _ = _time(lambda: _decode(model, out, decode_tokens), device)
    return t_pre, t_dec


def _peak(m: _Model, ids: torch.Tensor, decode_tokens: int, device: torch.device) -> int:
    if device.type == "cuda":
        torch.cuda.synchronize(device)
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats(device)
        base = torch.cuda.memory_allocated(device)
        past = _decode(m.model, _prefill(m.model, ids), decode_tokens)
        torch.cuda.synchronize(device)
        del past
        # the other models' weights are resident too: count this model's own weights, not theirs
        return int(torch.cuda.max_memory_allocated(device) - base + m.weight_bytes)
    past = _decode(m.model, _prefill(m.model, ids), decode_tokens)
    return m.weight_bytes + _cache_bytes(past)


def _stats(xs: list[float]) -> tuple[float, float, float]:
    return statistics.median(xs), min(xs), max(xs)


def measure_speed(
    model: Any,
    removed_sets: Sequence[Sequence[int]] = (),
    repairs: Sequence[Operators] = (),
    batches: Sequence[int] = (1, 8),
    seq_len: int = 128,
    decode_tokens: int = 16,
    repeats: int = 5,
    warmup: int = 1,
    peak: bool = True,
    seed: int = 0,
    progress=None,
    prebuilt: Sequence[tuple[str, Any, Operators | None]] = (),
) -> SpeedReport:
    """Measure the dense ``model``, each removed set without repair and each repair's ``Operators``
    (its removed set with its operators attached), in one process with interleaved rounds. The
    dense model is timed as it is (not copied); each pruned model is a physically pruned deep copy,
    freed at the end. ``prebuilt``: (label, model, operators or None) of models already pruned
    (an export loaded with ``load_pruned``, its ``Operators.load``: removed set, method, matrices),
    timed as they are. ``progress(str)``: an optional line
    per round."""
    batches = tuple(sorted({int(b) for b in batches}))
    if not batches or batches[0] < 1:
        raise GhostsearchError("speed: --batch needs positive batch sizes, e.g. --batch 1 8")
    if seq_len < 1 or decode_tokens < 1 or repeats < 1:
        raise GhostsearchError("speed: --seq-len, --decode-tokens and --repeats must each be at least 1")
    stack = Stack(model)
    was_training = model.training
    model.eval()
    models = _models_to_time(model, removed_sets, repairs, prebuilt)
    device = stack.device
    vocab = int(stack.config.vocab_size)
    prompts = {b: _prompt(vocab, b, seq_len, device, seed) for b in batches}
    try:
        _time_rounds(models, prompts, decode_tokens, repeats, warmup, device, progress)
        peaks = {id(m): _peak(m, prompts[batches[-1]], decode_tokens, device) if peak else None for m in models}
    finally:
        model.train(was_training)
    rows = _rows(models, peaks, batches, seq_len, decode_tokens, stack.n_blocks)
    for m in models[1:]:
        m.model = nn.Module()  # drop the copies now
    return SpeedReport(
        rows=tuple(rows),
        device=str(device),
        dtype=str(stack.dtype).removeprefix("torch."),
        batches=batches,
        seq_len=int(seq_len),
        decode_tokens=int(decode_tokens),
        repeats=int(repeats),
        threads=torch.get_num_threads(),
        peak_method=PEAK_CUDA if device.type == "cuda" else PEAK_CPU,
        peak_batch=batches[-1],
    )


def _models_to_time(model: Any, removed_sets, repairs: Sequence[Operators], prebuilt) -> list[_Model]:
    """The dense model, then each distinct removed set pruned, each repair's pruned and repaired
    copy, and the prebuilt models, each with its parameters and weight bytes (a repair's operators
    counted in)."""
    from ghostsearch.recovery.export import pruned_model

    L = Stack(model).n_blocks
    sets = [check_removed(set(r), L, what="the pruned set") for r in removed_sets]
    for ops in repairs:
        if ops.n_blocks != L:
            raise GhostsearchError(
                f"the {ops.method} repair was fitted on a {ops.n_blocks}-block model, not this {L}-block one"
            )
    models = [_Model("dense", (), "none", model, pruned_params(model), weight_bytes(model))]
    seen = set()
    for r in sets:
        if r and (r, "none") not in seen:
            seen.add((r, "none"))
            models.append(
                _Model(f"k={len(r)}", r, "none", physically_prune(model, r).eval(), pruned_params(model, r), 0)
            )
    for ops in repairs:
        r = check_removed(set(ops.removed), L, what="the repaired set")
        if (r, ops.method) in seen:
            continue
        seen.add((r, ops.method))
        pm = pruned_model(model, ops).eval() if ops.method != "none" else physically_prune(model, r).eval()
        models.append(_Model(f"k={len(r)} + {ops.method}", r, ops.method, pm, pruned_params(model, r, ops), 0))
    ops_of: dict[int, Operators | None] = {id(m): None for m in models}
    for m in models[1:]:
        ops_of[id(m)] = next(
            (o for o in repairs if tuple(sorted(o.removed)) == m.removed and o.method == m.recovery), None
        )
    for label, pm, pre_ops in prebuilt:
        r = tuple(sorted(pre_ops.removed)) if pre_ops is not None else ()
        own = sum(p.numel() for p in pm.parameters()) + _operator_params(pre_ops)
        models.append(_Model(label, r, pre_ops.method if pre_ops is not None else "none", pm.eval(), own, 0))
        ops_of[id(models[-1])] = pre_ops
    for m in models[1:]:
        m.weight_bytes = weight_bytes(m.model) + _operator_bytes(ops_of[id(m)])
    return models


def _time_rounds(models: list[_Model], prompts: dict, decode_tokens: int, repeats: int, warmup: int, device, progress):
    """A warm-up per model, then ``repeats`` rounds; each round runs every model once per batch in a
    rotated order, its prefill and decode seconds kept in ``m.times``."""
    for m in models:  # warm-up: kernels, allocator, caches
        for _ in range(warmup):
            for ids in prompts.values():
                _decode(m.model, _prefill(m.model, ids), min(2, decode_tokens))
    for rnd in range(repeats):
        order = models[rnd % len(models) :] + models[: rnd % len(models)]
        for m in order:
            for b, ids in prompts.items():
                t_pre, t_dec = _one_round(m.model, ids, decode_tokens, device)
                m.times.setdefault(("prefill", b), []).append(t_pre)
                m.times.setdefault(("decode", b), []).append(t_dec)
        if progress is not None:
            progress(f"speed: round {rnd + 1}/{repeats} done")


def _rows(models: list[_Model], peaks: dict, batches, seq_len: int, decode_tokens: int, L: int) -> list[SpeedRow]:
    """One row per model: tokens/s per phase and batch (median, min, max over rounds) and the speed-up
    against dense in the same round."""
    dense = models[0]
    rows = []
    for m in models:
        tps = []
        for phase in ("prefill", "decode"):
            for b in batches:
                ts = m.times[(phase, b)]
                tokens = b * (seq_len if phase == "prefill" else decode_tokens)
                med, lo, hi = _stats([tokens / t for t in ts])
                ratio = [d / t for d, t in zip(dense.times[(phase, b)], ts)]
                s_med, s_lo, s_hi = _stats(ratio)
                tps.append(Throughput(phase, b, med, lo, hi, s_med, s_lo, s_hi))
        rows.append(
            SpeedRow(
                label=m.label,
                removed=m.removed,
                recovery=m.recovery,
                n_blocks=L,
                params=m.params,
                weight_bytes=m.weight_bytes,
                peak_bytes=peaks[id(m)],
                ideal_speedup=L / (L - len(m.removed)) if len(m.removed) < L else float("inf"),
                throughput=tuple(tps),
            )
        )
    return rows


def exported(export_dir: Path, model: Any, base: str) -> tuple[str, Any, Operators | None]:
    """An exported model directory as ``measure_speed``'s prebuilt entry, loaded as a user loads it
    (``load_pruned``) beside its dense base ``model``, with the operators its recovery.json records."""
    from ghostsearch.recovery.base import META_FILE
    from ghostsearch.recovery.export import load_pruned

    stack = Stack(model)
    pm = load_pruned(export_dir, dtype=stack.dtype, device=str(stack.device))
    ops = Operators.load(export_dir) if (export_dir / META_FILE).exists() else None
    if ops is not None and ops.n_blocks != stack.n_blocks:
        raise GhostsearchError(
            f"{export_dir} was cut from a {ops.n_blocks}-block model, not {base} ({stack.n_blocks} blocks); "
            "give the base model as model=..."
        )
    return (f"export {export_dir.name}", pm, ops)


def write_report(report: SpeedReport, out: Path) -> None:
    """The record as JSON at ``out`` and its rows as Parquet beside it (``out`` with .parquet)."""
    import pyarrow as pa

    from ghostsearch.core.io import write_json_atomic, write_parquet_atomic

    write_json_atomic(out, report.to_dict())
    write_parquet_atomic(out.with_suffix(".parquet"), pa.Table.from_pylist([r.flat() for r in report.rows]))


def _cell(row: SpeedRow, phase: str, batch: int) -> str:
    """One timing as the tables show it: the dense row in tokens/s, a pruned one as its speed-up
    over dense, median [min, max] of the per-round ratios; '-' where it was not timed."""
    t = row.at(phase, batch)
    if t is None:
        return "-"
    if not row.removed:
        return f"{t.tokens_per_s:.0f} tok/s"
    return f"{t.speedup:.2f}x [{t.speedup_lo:.2f}, {t.speedup_hi:.2f}]"


def speed_markdown(report: SpeedReport) -> str:
    """The report as the markdown table docs/benchmarks.md carries (bench/speed.py prints it):
    prefill and decode at the smallest and the largest batch, beside the ideal L / (L - k)."""
    b0, b1 = report.batches[0], report.batches[-1]
    lines = [
        f"| model | removed | params | weights | peak | prefill b{b0} | prefill b{b1} | decode b{b0} | decode b{b1} "
        "| ideal |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in report.rows:
        cells = [_cell(r, phase, b) for phase in ("prefill", "decode") for b in (b0, b1)]
        lines.append(
            f"| {r.label} | {' '.join(map(str, r.removed)) or '-'} | {r.params / 1e6:.1f}M | "
            f"{r.weight_bytes / 2**20:.0f} MiB | {(r.peak_bytes or 0) / 2**20:.0f} MiB | "
            + " | ".join(cells)
            + f" | {r.ideal_speedup:.2f}x |"
        )
    return "\n".join(lines)


def speed_table(report: SpeedReport) -> str:
    """The report as a plain-text table: dense first, one row per model."""
    b_lo, b_hi = report.batches[0], report.batches[-1]
    cols = [f"prefill b{b_lo}", f"prefill b{b_hi}", f"decode b{b_lo}", f"decode b{b_hi}"]
    if b_lo == b_hi:
        cols = [f"prefill b{b_lo}", f"decode b{b_lo}"]
    head = ["model", "removed", "params", "weights", "peak"] + cols + ["ideal"]
    lines = []
    for r in report.rows:
        cells = [
            r.label,
            " ".join(map(str, r.removed)) or "-",
            f"{r.params / 1e6:.1f}M",
            f"{r.weight_bytes / 2**20:.0f} MiB",
            "-" if r.peak_bytes is None else f"{r.peak_bytes / 2**20:.0f} MiB",
        ]
        for c in cols:
            phase, b = c.split(" b")
            cells.append(_cell(r, phase, int(b)))
        cells.append(f"{r.ideal_speedup:.2f}x")
        lines.append(cells)
    widths = [max(len(x) for x in col) for col in zip(head, *lines)]
    fmt = "  ".join(f"{{:<{w}}}" for w in widths)
    out = [fmt.format(*head)] + [fmt.format(*c) for c in lines]
    out.append(
        f"({report.device}, {report.dtype}, {report.threads} threads; prompt {report.seq_len} tokens, "
        f"decode {report.decode_tokens} tokens; {report.repeats} interleaved rounds: the dense row in tokens/s, "
        f"the others speed-up over dense, median [min, max] of per-round ratios; peak at batch "
        f"{report.peak_batch}: {report.peak_method})"
    )
    return "\n".join(out)


def speedup_k(
    model: Any,
    asked: float,
    free: Sequence[int],
    batch: int = 1,
    seq_len: int = 128,
    decode_tokens: int = 16,
    repeats: int = 3,
    extra: int = 3,
    progress=None,
    measure=None,
) -> tuple[int, SpeedReport]:
    """A speed-up target resolved to a k (``target.speedup``, as ``target.params`` resolves a parameter
    count): the least k whose measured speed-up over the dense model, the lesser of prefill's and
    decode's at ``batch`` (median over interleaved rounds), is at least ``asked``.

    No k below k0 = ceil(L (1 - 1/asked)) can reach it: removing blocks is all that is removed, so
    L / (L - k) bounds the speed-up. So k0 .. k0 + ``extra`` (at most the ``free`` blocks' count) are
    timed together beside the dense model (``measure_speed``), each on a stand-in set, the last k free
    blocks: which blocks go does not change a model's cost when its blocks are alike (a hybrid model's
    sliding and full attention blocks differ a little; the searched set's own speed is measured and
    reported after the search). One line, before any timing, when even every free block's removal
    cannot reach it; one line naming every measured speed-up when none of the timed ks does.
    ``measure``: measure_speed's stand-in (tests); returns (k, the report)."""
    if not asked > 1:
        raise GhostsearchError(f"target.speedup={asked}: a speed-up over the dense model is above 1 (e.g. 1.25)")
    free = sorted(int(b) for b in free)
    L = Stack(model).n_blocks
    k0 = max(1, math.ceil(L * (1 - 1 / asked) - 1e-9))
    if k0 > len(free):
        raise GhostsearchError(
            f"target.speedup={asked}: needs at least {k0} of {L} blocks removed (the ideal speed-up L/(L-k) "
            f"bounds it) but only {len(free)} may be removed (search.protected); ask for less"
        )
    ks = list(range(k0, min(len(free), k0 + extra) + 1))
    sets = {k: free[len(free) - k :] for k in ks}
    rep = (measure or measure_speed)(
        model,
        [sets[k] for k in ks],
        batches=(batch,),
        seq_len=seq_len,
        decode_tokens=decode_tokens,
        repeats=repeats,
        peak=False,
        progress=progress,
    )
    seen = []
    for k in ks:
        row = rep.row(sets[k])
        pre, dec = (row.at(ph, batch) if row is not None else None for ph in ("prefill", "decode"))
        if pre is None or dec is None:
            raise GhostsearchError(f"speed: k={k} was not measured at batch {batch}")
        s = min(pre.speedup, dec.speedup)
        seen.append(f"k={k} {s:.2f}x")
        if s >= asked:
            return k, rep
    raise GhostsearchError(
        f"target.speedup={asked}: no k timed reached it at batch {batch} on this machine ({', '.join(seen)}; "
        f"the lesser of prefill and decode, median of {repeats} rounds); ask for less, or time it with "
        "`ghostsearch speed CONFIG --remove ...`"
    )
