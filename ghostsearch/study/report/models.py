"""The models table: one row per distinct evaluated model (removed set x repair), the dense model
first, with every perplexity, the mean accuracy, each one's difference from the dense model with a
paired 95% interval, whether the data it was fitted on is held out of the evaluation, its parameter
count and its measured speed. ``ghostsearch eval`` prints it; the compare report leads with it.

A repaired row also shows the repair's own effect: its difference from the same removed set without
repair, paired over the same items (windows), when that row is in the table. A difference whose
interval contains no difference (0, a ratio of 1) is shown as "within noise" with its interval, not
as a point estimate: on compare-quick's 40 items per task a repair 0.09 below its unrepaired set in
accuracy has an interval across 0, and a bare "-0.088" reads as "the repair hurts".

Paired intervals, the same items for both models:
* mean accuracy: the difference of the macro mean over tasks, a paired bootstrap over items
  resampled within tasks (``stats.paired_diff_ci``), from the per-item rows;
* perplexity: the ratio to the dense model's; its interval is exp of the paired bootstrap interval
  of the mean per-window NLL difference (the same windows, in the same order, for both models).
  Without per-window NLLs (an older file) or per-item rows the cell says "no items".
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from ghostsearch.stats import inference as stats
from ghostsearch.stats.windows import ppl_ratio


@dataclass(frozen=True)
class Diff:
    """An estimate with its paired interval (lo, hi); ``kind``: "diff" (accuracy) or "ratio" (perplexity)."""

    estimate: float
    lo: float | None = None
    hi: float | None = None
    kind: str = "diff"

    @property
    def within_noise(self) -> bool:
        """The interval contains no difference (0 for a difference, 1 for a ratio); False without one."""
        if self.lo is None or self.hi is None:
            return False
        null = 1.0 if self.kind == "ratio" else 0.0
        return self.lo <= null <= self.hi

    def text(self) -> str:
        if self.within_noise:
            assert self.lo is not None and self.hi is not None
            if self.kind == "ratio":
                return f"within noise [{self.lo:.3f}, {self.hi:.3f}]"
            return f"within noise [{self.lo:+.3f}, {self.hi:+.3f}]"
        if self.kind == "ratio":
            core = f"x{self.estimate:.3f}"
            return core + (f" [{self.lo:.3f}, {self.hi:.3f}]" if self.lo is not None and self.hi is not None else "")
        core = f"{self.estimate:+.3f}"
        return core + (f" [{self.lo:+.3f}, {self.hi:+.3f}]" if self.lo is not None and self.hi is not None else "")

    def to_dict(self) -> dict:
        return {
            "estimate": self.estimate,
            "lo": self.lo,
            "hi": self.hi,
            "kind": self.kind,
            "within_noise": self.within_noise,
        }


@dataclass(frozen=True)
class ModelEntry:
    """One evaluated model as the table's input: its removed set, repair, numbers (flat, as
    FinalistNumbers.to_dict or a comparison row's metrics), and the eval key its items carry."""

    removed: tuple[int, ...]
    recovery: str
    numbers: Mapping
    key: str
    held_out: str = ""  # what it was fitted on, and whether that is held out (a short phrase)
    params: int | None = None
    speed: Mapping | None = None  # {"prefill": x, "decode": x, "ideal": x} speed-ups (largest batch)
    label: str = ""


@dataclass(frozen=True)
class ModelRow:
    """One row of the models table."""

    label: str
    removed: tuple[int, ...]
    recovery: str
    perplexity: dict = field(default_factory=dict)  # set -> perplexity
    ppl_vs_dense: dict = field(default_factory=dict)  # set -> Diff (ratio)
    mean_acc: float | None = None
    acc_vs_dense: Diff | None = None
    held_out: str = ""
    params: int | None = None
    speed: Mapping | None = None
    # a repaired model against the same removed set without repair (the repair's own effect), paired
    ppl_vs_none: dict = field(default_factory=dict)  # set -> Diff (ratio)
    acc_vs_none: Diff | None = None

    @property
    def k(self) -> int:
        return len(self.removed)

    def to_dict(self) -> dict:
        return {
            "label": self.label,
            "removed": list(self.removed),
            "k": self.k,
            "recovery": self.recovery,
            "perplexity": dict(self.perplexity),
            "ppl_vs_dense": {k: v.to_dict() for k, v in self.ppl_vs_dense.items()},
            "mean_acc": self.mean_acc,
            "acc_vs_dense": None if self.acc_vs_dense is None else self.acc_vs_dense.to_dict(),
            "held_out": self.held_out,
            "params": self.params,
            "speed": None if self.speed is None else dict(self.speed),
            "ppl_vs_none": {k: v.to_dict() for k, v in self.ppl_vs_none.items()},
            "acc_vs_none": None if self.acc_vs_none is None else self.acc_vs_none.to_dict(),
        }


WINDOW = "_window_nll"


def perplexities(numbers: Mapping) -> dict[str, float]:
    """{set: perplexity} of a flat numbers dict (ppl_<set>, and LAMBADA's last-word perplexity)."""
    out = {}
    for k, v in numbers.items():
        if k.startswith("ppl_") and not k.endswith(WINDOW) and isinstance(v, (int, float)) and v is not None:
            out[k[len("ppl_") :]] = float(v)
    if isinstance(numbers.get("lambada_lastword_ppl"), (int, float)):
        out["lambada_lastword"] = float(numbers["lambada_lastword_ppl"])
    return out


def _ratio(a: Mapping, d: Mapping, name: str, n_boot: int, seed: int) -> Diff | None:
    pa, pd = perplexities(a).get(name), perplexities(d).get(name)
    if pa is None or pd is None or not pd or any(map(math.isnan, (pa, pd))):
        return None
    wa, wd = a.get(f"ppl_{name}{WINDOW}"), d.get(f"ppl_{name}{WINDOW}")
    if wa is None or wd is None or len(wa) != len(wd) or len(wa) < 2:
        return Diff(pa / pd, kind="ratio")
    _, lo, hi = ppl_ratio(wa, wd, n_boot=n_boot, seed=seed)
    return Diff(pa / pd, lo, hi, kind="ratio")


def _acc_diff(e: ModelEntry, base: ModelEntry, items, n_boot: int, seed: int) -> Diff | None:
    """e's mean accuracy minus base's: paired over the same items (resampled within tasks) when the
    item matrix holds both, else the bare difference of the two means; None without both means."""
    a, b = e.numbers.get("mean_acc"), base.numbers.get("mean_acc")
    if not isinstance(a, (int, float)) or not isinstance(b, (int, float)) or math.isnan(a) or math.isnan(b):
        return None
    if items is not None and e.key in items and base.key in items:
        ca = items.correct[items.keys.index(e.key)]
        cb = items.correct[items.keys.index(base.key)]
        iv = stats.paired_diff_ci(ca, cb, items.task_of, n_boot=n_boot, seed=seed)
        return Diff(iv.estimate, iv.lo, iv.hi)
    return Diff(float(a) - float(b))


def _ppl_diffs(e: ModelEntry, base: ModelEntry, n_boot: int, seed: int) -> dict[str, Diff]:
    out = {}
    for name in perplexities(e.numbers):
        r = _ratio(e.numbers, base.numbers, name, n_boot, seed)
        if r is not None:
            out[name] = r
    return out


def model_rows(entries: Sequence[ModelEntry], items=None, n_boot: int = 2000, seed: int = 0) -> list[ModelRow]:
    """The table's rows, dense first (the entry with no removed set), then by k and repair.
    ``items``: a ``stats.bootstrap.ItemMatrix`` keyed by the entries' ``key`` (None: no accuracy intervals).
    A repaired entry whose removed set is also here without repair gets that comparison too
    (``ppl_vs_none``, ``acc_vs_none``: the repair's own effect, paired over the same items)."""
    dense = next((e for e in entries if not e.removed and e.recovery in ("none", "", None)), None)
    unrepaired = {tuple(e.removed): e for e in entries if e.removed and e.recovery in ("none", "", None)}
    order = sorted(entries, key=lambda e: (e is not dense, len(e.removed), e.removed, e.recovery != "none", e.recovery))
    rows = []
    for e in order:
        ppl = perplexities(e.numbers)
        acc = e.numbers.get("mean_acc")
        acc = float(acc) if isinstance(acc, (int, float)) and not math.isnan(acc) else None
        vs_acc = None
        vs_ppl: dict[str, Diff] = {}
        if dense is not None and e is not dense:
            vs_ppl = _ppl_diffs(e, dense, n_boot, seed)
            vs_acc = _acc_diff(e, dense, items, n_boot, seed) if acc is not None else None
        base = unrepaired.get(tuple(e.removed)) if e.recovery not in ("none", "", None) else None
        none_ppl = _ppl_diffs(e, base, n_boot, seed) if base is not None else {}
        none_acc = _acc_diff(e, base, items, n_boot, seed) if base is not None and acc is not None else None
        label = e.label or (
            "dense" if e is dense else f"k={len(e.removed)}" + (f" + {e.recovery}" if e.recovery != "none" else "")
        )
        rows.append(
            ModelRow(
                label,
                tuple(e.removed),
                e.recovery or "none",
                ppl,
                vs_ppl,
                acc,
                vs_acc,
                e.held_out,
                e.params,
                e.speed,
                none_ppl,
                none_acc,
            )
        )
    return rows


def _speed_text(s: Mapping | None) -> str:
    if not s:
        return "not measured"
    parts = [f"{k} {s[k]:.2f}x" for k in ("prefill", "decode") if isinstance(s.get(k), (int, float))]
    if isinstance(s.get("ideal"), (int, float)):
        parts.append(f"(ideal {s['ideal']:.2f}x)")
    return " ".join(parts) or "not measured"


def _cells(rows: Sequence[ModelRow], speed: bool) -> tuple[list[str], list[list[str]]]:
    sets = list(dict.fromkeys(s for r in rows for s in r.perplexity))
    head = ["model", "removed"] + [f"ppl {s}" for s in sets] + ["mean acc", "held out", "params"]
    if speed:
        head.append("speed-up (prefill, decode)")
    body = []
    for r in rows:
        c = [r.label, " ".join(map(str, r.removed)) or "-"]
        for s in sets:
            p = r.perplexity.get(s)
            vs = r.ppl_vs_dense.get(s)
            c.append(
                "-"
                if p is None
                else f"{p:.2f}" + (f" {vs.text()}" if vs is not None else "") + _repair(r.ppl_vs_none.get(s))
            )
        c.append(
            "-"
            if r.mean_acc is None
            else f"{r.mean_acc:.3f}"
            + (f" {r.acc_vs_dense.text()}" if r.acc_vs_dense is not None else "")
            + _repair(r.acc_vs_none)
        )
        c.append(r.held_out or "-")
        c.append("-" if r.params is None else f"{r.params / 1e6:.1f}M")
        if speed:
            c.append("dense" if not r.removed and r.recovery == "none" else _speed_text(r.speed))
        body.append(c)
    return head, body


def _repair(d: Diff | None) -> str:
    return "" if d is None else f"; repair: {d.text()}"


LEGEND = (
    "perplexity: value x ratio to dense [95% paired interval over windows]; mean acc: value +difference "
    "from dense [95% paired interval over items, resampled within tasks]; repair: a repaired model against "
    "the same removed set without repair, paired over the same windows or items (the repair's own effect); "
    "within noise: the interval contains no difference (0, or a ratio of 1), so no point difference is shown"
)


def text_table(rows: Sequence[ModelRow], speed: bool = True) -> str:
    """A plain-text table (aligned columns), then one legend line."""
    head, body = _cells(rows, speed)
    widths = [max(len(x) for x in col) for col in zip(head, *body)]
    fmt = "  ".join(f"{{:<{w}}}" for w in widths)
    return "\n".join([fmt.format(*head)] + [fmt.format(*c) for c in body] + [f"({LEGEND})"])


def markdown_table(rows: Sequence[ModelRow], speed: bool = True) -> str:
    head, body = _cells(rows, speed)
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    lines += ["| " + " | ".join(c) + " |" for c in body]
    return "\n".join(lines) + f"\n\n{LEGEND[0].upper()}{LEGEND[1:]}."


def comparison_entries(all_rows, run_dir=None, params=None, speed: Mapping | None = None) -> list[ModelEntry]:
    """One ModelEntry per distinct (removed set, repair) of comparison.parquet's rows (``ComparisonRow``),
    the dense model first; each model's per-window NLLs from RUN_DIR/evals/<eval_key>.json when the
    table lacks them. ``params(removed, recovery)``: its parameter count (None: not computed);
    ``speed``: {(removed, recovery): {"prefill", "decode", "ideal"}} as measured (RUN_DIR/speed.json)."""
    import json
    from pathlib import Path

    out, seen = [], set()
    for r in all_rows:
        rec = r.rec
        key = (tuple(r.removed), rec)
        if key in seen:
            continue
        seen.add(key)
        numbers = dict(r.metrics)
        if run_dir is not None and r.eval_key and not any(k.endswith(WINDOW) for k in numbers):
            path = Path(run_dir) / "evals" / f"{r.eval_key}.json"
            try:
                extra = json.loads(path.read_text())
                numbers.update({k: v for k, v in extra.items() if k.endswith(WINDOW)})
            except (OSError, ValueError, AttributeError):
                pass
        # compare's data plan refused, before any work, an evaluation that reads what a search or repair fitted on
        fitted = "nothing fitted" if r.is_dense else f"yes: {r.calibration_data or 'its calibration data'}"
        out.append(
            ModelEntry(
                key[0],
                rec,
                numbers,
                r.eval_key or f"{key}",
                held_out=fitted,
                params=params(key[0], rec) if params is not None else None,
                speed=(speed or {}).get(key),
            )
        )
    return out


def read_speed(run_dir) -> dict:
    """{(removed, recovery): {"prefill", "decode", "ideal", "batch"}} from RUN_DIR/speed.json
    (``ghostsearch speed RUN_DIR``): the largest batch's median speed-ups; {} when not measured."""
    import json
    from pathlib import Path

    path = Path(run_dir) / "speed.json"
    try:
        rep = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    out = {}
    b = max(rep.get("batches") or [1])
    for row in rep.get("rows", []):
        th = {(t["phase"], t["batch"]): t for t in row.get("throughput", [])}
        out[(tuple(row["removed"]), row["recovery"])] = {
            "prefill": th.get(("prefill", b), {}).get("speedup"),
            "prefill_lo": th.get(("prefill", b), {}).get("speedup_lo"),
            "prefill_hi": th.get(("prefill", b), {}).get("speedup_hi"),
            "decode": th.get(("decode", b), {}).get("speedup"),
            "ideal": row.get("ideal_speedup"),
            "batch": b,
        }
    return out
