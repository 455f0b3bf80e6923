"""Which items of the eight commonsense tasks a run evaluates: one seeded draw, the same for every model.

The draw is ONE ordered list of item keys (task, doc), where ``doc`` is the item's row number in
the task's file (``corpora.task_rows``; held-out tasks draw only from their evaluation half, the row
numbers stay those of the whole file). Any prefix of the list is a sample:

* **Within a task** the order is a permutation of the task's eligible rows drawn by
  ``numpy.random.default_rng([eval.seed, crc32(task)])`` (``eval.sample: random``), or the file's
  order (``eval.sample: first``: lm-eval's ``limit``, for parity tests). Rows of a previous run
  (``eval.exclude_from``) are not eligible; ``eval.limit`` caps the rows of each task.
* **Across tasks** the next item goes to the task with the largest ``w_t / (n_t + 1/2)`` among
  tasks below their cap (Webster's divisor method, ties to the earlier task in ``eval.tasks``):
  ``equal`` w_t = 1, ``proportional`` w_t = the task's eligible rows, ``neyman`` w_t = S_t, the
  standard deviation of a paired per-item difference between two models on the task in a previous
  run (``eval.neyman_from``). The reported ``mean_acc`` weighs every task 1/T, so Neyman's
  n_t ∝ W_t S_t is n_t ∝ S_t. Each task's count is within one item of its exact quota at every
  size, and the first n items are nested in the first m > n: looks are prefixes.

``eval.max_items`` (per model, across tasks) is the draw's length (None: every eligible item).
"""

from __future__ import annotations

import math
import zlib
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ghostsearch.core.errors import GhostsearchError
from ghostsearch.data import corpora

ALLOCATIONS = ("equal", "proportional", "neyman")
SAMPLES = ("random", "first")


@dataclass(frozen=True)
class Draw:
    """The ordered item keys of a run: ``order[r]`` = (task, doc) of rank r."""

    order: tuple[tuple[str, int], ...]
    tasks: tuple[str, ...]

    def first(self, n: int | None = None) -> dict[str, list[int]]:
        """{task: doc ids} of the first n items (all when None), each task's in draw order."""
        out: dict[str, list[int]] = {t: [] for t in self.tasks}
        for t, d in self.order[:n]:
            out[t].append(d)
        return out

    def counts(self, n: int | None = None) -> dict[str, int]:
        return {t: len(v) for t, v in self.first(n).items()}

    def __len__(self) -> int:
        return len(self.order)


def eligible(task: str, data_dir: str | None = None, part: str | None = None) -> list[int]:
    """Row numbers of the task's file that are in ``part`` (all rows when None)."""
    rows = corpora.task_rows(task, data_dir)
    if part is None:
        return list(range(len(rows)))
    return [i for i, r in enumerate(rows) if corpora.part_of(corpora.content_key(r)) == part]


def positions(task: str, docs: list[int], data_dir: str | None = None, part: str | None = None) -> list[int]:
    """Row numbers as positions in the part's own file (what lm-eval's ``samples`` indexes)."""
    where = {d: i for i, d in enumerate(eligible(task, data_dir, part))}
    return [where[d] for d in docs]


def task_order(task: str, ids: list[int], seed: int, sample: str) -> list[int]:
    if sample == "first":
        return list(ids)
    rng = np.random.default_rng([int(seed), zlib.crc32(task.encode())])
    return [ids[i] for i in rng.permutation(len(ids))]


def allocation_sequence(weights: dict[str, float], caps: dict[str, int], n: int) -> list[str]:
    """The task of each of the first n items (Webster's divisor method under per-task caps)."""
    count = {t: 0 for t in weights}
    out = []
    for _ in range(n):
        open_ = [t for t in weights if count[t] < caps[t] and weights[t] > 0]
        if not open_:
            break
        t = max(open_, key=lambda t: weights[t] / (count[t] + 0.5))  # max keeps the first on ties
        count[t] += 1
        out.append(t)
    return out


def allocate(weights: dict[str, float], caps: dict[str, int], n: int) -> dict[str, int]:
    """Items per task for n items in all."""
    seq = allocation_sequence(weights, caps, n)
    return {t: seq.count(t) for t in weights}


def run_items_file(path: str | Path) -> Path:
    """A previous run's per-item rows: RUN_DIR/eval_items.parquet, or a Parquet file given directly."""
    p = Path(path).expanduser()
    if p.is_dir():
        for name in ("eval_items.parquet", "items.parquet"):
            if (p / name).is_file():
                return p / name
        raise GhostsearchError(
            f"{p} has no eval_items.parquet or items.parquet; give a run directory of compare "
            "or a Parquet file with task and doc columns"
        )
    if p.is_file() and p.suffix == ".parquet":
        return p
    raise GhostsearchError(
        f"{path} is neither a run directory nor a .parquet file; give a previous run's directory "
        "or its per-item Parquet (task, doc columns)"
    )


def previous_items(path: str | Path) -> set[tuple[str, int]]:
    """The (task, doc) keys a previous run evaluated."""
    import pyarrow.parquet as pq

    f = run_items_file(path)
    t = pq.read_table(f)
    if not {"task", "doc"} <= set(t.column_names):
        raise GhostsearchError(f"{f} has no task and doc columns; give a per-item Parquet of a run")
    return set(zip(t.column("task").to_pylist(), t.column("doc").to_pylist()))


def task_sds(path: str | Path, tasks) -> dict[str, float]:
    """Per task, the standard deviation of the paired difference of two models' 0/1 correctness on
    the same items of a previous run's per-item rows, averaged (as a variance) over every pair of
    models: mean over pairs a < b of var_items(c_a - c_b), square-rooted. Models: the ``key``
    column (compare's eval_key), else (removed, recovery); items every model has."""
    import pyarrow.parquet as pq

    f = run_items_file(path)
    t = pq.read_table(f)
    need = {"task", "doc", "gold", "pred"}
    if not need <= set(t.column_names):
        raise GhostsearchError(
            f"{f} lacks {sorted(need - set(t.column_names))}; eval.neyman_from needs per-item "
            "rows with task, doc, gold, pred (a compare's eval_items.parquet)"
        )
    df = t.to_pandas()
    df["model"] = df["key"] if "key" in df else df["removed"].map(tuple).astype(str) + df["recovery"].astype(str)
    df["correct"] = (df["pred"] == df["gold"]).astype(float)
    out = {}
    for task in tasks:
        m = df[df["task"] == task].pivot_table(index="model", columns="doc", values="correct", aggfunc="first")
        m = m.dropna(axis=1).to_numpy()
        if m.shape[0] < 2 or m.shape[1] < 2:
            raise GhostsearchError(
                f"{f} has {m.shape[0]} model(s) x {m.shape[1]} shared item(s) of {task}; "
                "eval.neyman_from needs two models on two items of every task (or use equal)"
            )
        x = m - m.mean(axis=1, keepdims=True)
        k = len(x)  # sum over pairs of ||x_a - x_b||^2 = k sum ||x_a||^2 - ||sum x_a||^2
        pairs = k * (x**2).sum() - (x.sum(axis=0) ** 2).sum()
        out[task] = math.sqrt(pairs / (k * (k - 1) / 2) / (m.shape[1] - 1))
    return out


def weights_for(cfg_eval, tasks, available: dict[str, int]) -> dict[str, float]:
    if cfg_eval.allocation == "equal":
        return {t: 1.0 for t in tasks}
    if cfg_eval.allocation == "proportional":
        return {t: float(available[t]) for t in tasks}
    sds = task_sds(cfg_eval.neyman_from, tasks)
    shrink = float(getattr(cfg_eval, "neyman_shrink", 0.0) or 0.0)
    if shrink:  # each task's variance this share of the way to their mean (few items a task: noisy S_t)
        mean_var = sum(v * v for v in sds.values()) / len(sds)
        sds = {t: math.sqrt((1 - shrink) * v * v + shrink * mean_var) for t, v in sds.items()}
    return sds


def draw(cfg_eval, tasks=None, data_dir: str | None = None, held_out=()) -> Draw:
    """The run's draw over the native tasks among ``tasks`` (default ``cfg_eval.tasks``). Raises a
    one-line GhostsearchError (before any model work) when eval.max_items exceeds what is eligible."""
    tasks = tuple(t for t in (cfg_eval.tasks if tasks is None else tasks) if t in corpora.MC_TASKS)
    gone = previous_items(cfg_eval.exclude_from) if cfg_eval.exclude_from else set()
    orders, caps = {}, {}
    for t in tasks:
        ids = [d for d in eligible(t, data_dir, "evaluation" if t in held_out else None) if (t, d) not in gone]
        orders[t] = task_order(t, ids, cfg_eval.seed, cfg_eval.sample)
        caps[t] = len(ids) if cfg_eval.limit is None else min(len(ids), int(cfg_eval.limit))
    total = sum(caps.values())
    n = total if cfg_eval.max_items is None else int(cfg_eval.max_items)
    if n > total:
        raise GhostsearchError(
            f"eval.max_items={n} but only {total} items are eligible "
            f"({', '.join(f'{t} {c}' for t, c in caps.items())}); lower eval.max_items"
            + (" or raise eval.limit" if cfg_eval.limit is not None else "")
        )
    seq = allocation_sequence(weights_for(cfg_eval, tasks, {t: len(o) for t, o in orders.items()}), caps, n)
    if len(seq) < n:
        zero = [t for t in tasks if caps[t] and t not in seq]
        raise GhostsearchError(
            f"eval.allocation={cfg_eval.allocation} gives no items to {zero} (weight 0) and the "
            f"others hold only {len(seq)} of eval.max_items={n}; use equal or lower eval.max_items"
        )
    taken = {t: 0 for t in tasks}
    order = []
    for t in seq:
        order.append((t, orders[t][taken[t]]))
        taken[t] += 1
    return Draw(tuple(order), tasks)


def write_draw(d: Draw, path: Path) -> None:
    """The draw as Parquet (rank, task, doc), written before any evaluation."""
    import pyarrow as pa

    from ghostsearch.core.io import write_parquet_atomic

    write_parquet_atomic(
        path,
        pa.table(
            {
                "rank": pa.array(range(len(d)), pa.int64()),
                "task": pa.array([t for t, _ in d.order], pa.string()),
                "doc": pa.array([x for _, x in d.order], pa.int64()),
            }
        ),
    )


def read_draw(path: Path, tasks) -> Draw:
    import pyarrow.parquet as pq

    t = pq.read_table(path).sort_by("rank")
    order = tuple(zip(t.column("task").to_pylist(), t.column("doc").to_pylist()))
    return Draw(order, tuple(x for x in tasks if x in corpora.MC_TASKS))


def run_draw(cfg_eval, run_dir: Path, tasks=None, data_dir: str | None = None, held_out=()) -> Draw:
    """RUN_DIR/items.parquet when it exists (a resumed run keeps its items), else the draw, written there."""
    path = Path(run_dir) / "items.parquet"
    if path.exists():
        return read_draw(path, cfg_eval.tasks if tasks is None else tasks)
    d = draw(cfg_eval, tasks, data_dir, held_out)
    write_draw(d, path)
    return d
