"""A finalist's downstream numbers as one typed record: ``FinalistNumbers``.

What ``evaluate.evaluate_finalist_specs`` gives per finalist, ``compare`` keeps and merges per job
(RUN_DIR/evals/<eval_key>.json), and the comparison table, the trackers and ``ghostsearch eval``
read. On disk (and in ``to_dict``) it is one flat JSON object, as it always was:

* ``<task>_<metric>`` per zero-shot task: ``<task>_acc``, ``<task>_acc_norm`` (where lm-eval
  reports it), ``<task>_acc_stderr`` (binomial), ``<task>_n`` (documents scored; every task has
  one, which is how a reader knows the task names), and, for a task other than the eight
  commonsense tasks, any other metric lm-eval reports;
* ``mean_acc``, ``mean_acc_stderr``, ``mean_acc_lo``, ``mean_acc_hi`` (the mean over tasks and its
  95% interval);
* ``ppl_<set>`` (window perplexity) and ``ppl_<set>_window_nll`` (each window's mean NLL, in window
  order) per perplexity set; ``lambada_acc`` and ``lambada_lastword_ppl`` (LAMBADA's last word);
* ``recovery`` (the repair method, ``none``), ``items_used`` (items per task summed), and
  ``eval_key`` (the job's key, only where compare hands the numbers on: never in evals/).

``from_dict`` refuses a key that is none of these with one line. The key order of a file is kept
(``key_order``, not compared): the producers write keys in the order the numbers come, and a file
read and written again is the same bytes.

Beside them, one finalist's prediction on one document is an ``ItemRow`` (the rows of
evals/<key>.items.parquet and eval_items.parquet; ``items_to_arrow``/``items_from_arrow`` give and
read that table). Bottom layer: it knows no model and no run.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from typing import Any

from ghostsearch.core.errors import GhostsearchError
from ghostsearch.core.records import required_fields

COMMONSENSE_TASKS = (
    "boolq",
    "piqa",
    "hellaswag",
    "winogrande",
    "arc_easy",
    "arc_challenge",
    "openbookqa",
    "social_iqa",
)
# the eight commonsense tasks (data.MC_TASKS; the native engine's): acc, acc_norm, acc_stderr and n are all
# their numbers, so any other key of theirs is a misspelling; another (lm-eval) task keeps its other metrics
MEAN_KEYS = ("mean_acc", "mean_acc_stderr", "mean_acc_lo", "mean_acc_hi")
LAMBADA_KEYS = ("lambada_acc", "lambada_lastword_ppl")
WINDOW_NLL = "_window_nll"
ACC_METRICS = ("acc", "acc_norm")  # the typed metrics of a task; acc_stderr and n come after them


@dataclass(frozen=True)
class TaskNumbers:
    """One zero-shot task's numbers: documents scored, accuracy (normalised where lm-eval reports
    it), the binomial standard error of ``acc``, and lm-eval's other metrics by name."""

    n: int | None = None  # None: not reported (a stand-in's made-up numbers)
    acc: float | None = None
    acc_norm: float | None = None
    acc_stderr: float | None = None
    other: Mapping[str, float] = field(default_factory=dict)  # lm-eval's metric name -> value

    def flat(self, task: str) -> dict[str, Any]:
        """``<task>_<metric>`` keys, in the order lm-eval's results give them (metrics, then n, then stderr)."""
        out: dict[str, Any] = {}
        for name in ACC_METRICS:
            if getattr(self, name) is not None:
                out[f"{task}_{name}"] = getattr(self, name)
        out.update({f"{task}_{m}": v for m, v in self.other.items()})
        if self.n is not None:
            out[f"{task}_n"] = self.n
        if self.acc_stderr is not None:
            out[f"{task}_acc_stderr"] = self.acc_stderr
        return out


@dataclass(frozen=True)
class FinalistNumbers:
    """One evaluated model's numbers (see the module's docstring for the flat form)."""

    tasks: Mapping[str, TaskNumbers] = field(default_factory=dict)  # task name -> its numbers
    mean_acc: float | None = None
    mean_acc_stderr: float | None = None
    mean_acc_lo: float | None = None
    mean_acc_hi: float | None = None
    perplexity: Mapping[str, float] = field(default_factory=dict)  # set -> window perplexity
    window_nll: Mapping[str, tuple[float, ...]] = field(default_factory=dict)  # set -> each window's mean NLL
    lambada_acc: float | None = None
    lambada_lastword_ppl: float | None = None
    recovery: str | None = None
    items_used: int | None = None
    eval_key: str | None = None
    lm_eval: dict[str, Any] | None = field(default=None, compare=False, repr=False)
    # lm-eval's own results document (lmeval_results.write), in memory only: never in to_dict
    key_order: tuple[str, ...] = field(default=(), compare=False, repr=False)
    # the flat keys in the order they were first written (a file's JSON key order)

    def _flat(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for name, ppl in self.perplexity.items():
            out[f"ppl_{name}"] = ppl
            if name in self.window_nll:
                out[f"ppl_{name}{WINDOW_NLL}"] = list(self.window_nll[name])
            if name == "lambada":
                out.update(self._lambada())
        out.update(
            {f"ppl_{name}{WINDOW_NLL}": list(v) for name, v in self.window_nll.items() if name not in self.perplexity}
        )
        out.update(self._lambada())
        tasks = {t: x.flat(t) for t, x in self.tasks.items()}
        for flat in tasks.values():  # metrics and n first, every task's stderr after (summarize's order)
            out.update({k: v for k, v in flat.items() if not k.endswith("_acc_stderr")})
        for flat in tasks.values():
            out.update({k: v for k, v in flat.items() if k.endswith("_acc_stderr")})
        out.update({k: getattr(self, k) for k in MEAN_KEYS if getattr(self, k) is not None})
        for k in ("recovery", "items_used", "eval_key"):
            if getattr(self, k) is not None:
                out[k] = getattr(self, k)
        return out

    def _lambada(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in LAMBADA_KEYS if getattr(self, k) is not None}

    def to_dict(self) -> dict[str, Any]:
        """The flat JSON form: the keys of ``key_order`` first, in that order, then any others."""
        flat = self._flat()
        return {**{k: flat[k] for k in self.key_order if k in flat}, **flat}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any], lm_eval: dict[str, Any] | None = None) -> FinalistNumbers:
        """The record of a flat dict (an evals/<key>.json, or what the evaluation computed); an unknown
        key is a GhostsearchError naming it."""
        names = sorted((k[: -len("_n")] for k in d if k.endswith("_n")), key=len, reverse=True)
        tasks: dict[str, dict[str, Any]] = {}
        top: dict[str, Any] = {}
        ppl: dict[str, float] = {}
        nll: dict[str, tuple[float, ...]] = {}
        for k, v in d.items():
            if k in MEAN_KEYS or k in LAMBADA_KEYS or k in ("recovery", "items_used", "eval_key"):
                top[k] = v
            elif k.startswith("ppl_") and k.endswith(WINDOW_NLL):
                nll[k[len("ppl_") : -len(WINDOW_NLL)]] = tuple(v)
            elif k.startswith("ppl_"):
                ppl[k[len("ppl_") :]] = v
            else:
                task = next((t for t in names if k.startswith(t + "_")), None)
                if task is None:
                    raise GhostsearchError(
                        f"evaluation numbers: unknown key {k!r} (not <task>_<metric> of a task with <task>_n, "
                        f"ppl_<set>[{WINDOW_NLL}], {', '.join(MEAN_KEYS + LAMBADA_KEYS)}, recovery, items_used, "
                        "eval_key)"
                    )
                tasks.setdefault(task, {})[k[len(task) + 1 :]] = v
        return cls(
            tasks={t: _task(t, m) for t, m in tasks.items()},
            perplexity=ppl,
            window_nll=nll,
            lm_eval=lm_eval,
            key_order=tuple(d),
            **top,
        )

    def merged(self, *others: FinalistNumbers) -> FinalistNumbers:
        """``{**self, **other, ...}`` of the flat forms: a later record's numbers win, each key keeps the
        place it first had; lm-eval's document is the last one given."""
        flat: dict[str, Any] = self.to_dict()
        doc = self.lm_eval
        for o in others:
            flat.update(o.to_dict())
            doc = o.lm_eval if o.lm_eval is not None else doc
        return FinalistNumbers.from_dict(flat, lm_eval=doc)

    def perplexities(self) -> FinalistNumbers:
        """The perplexity part alone (``ppl_*`` and ``lambada_*``)."""
        keep = [k for k in self.key_order if k.startswith(("ppl_", "lambada_"))]
        return FinalistNumbers(
            perplexity=self.perplexity,
            window_nll=self.window_nll,
            lambada_acc=self.lambada_acc,
            lambada_lastword_ppl=self.lambada_lastword_ppl,
            key_order=tuple(keep),
        )

    def without_accuracies(self, tasks) -> FinalistNumbers:
        """Everything but the zero-shot numbers of ``tasks``, the mean over tasks and items_used (what a
        merge of new per-item rows recomputes)."""
        return replace(
            self,
            tasks={t: x for t, x in self.tasks.items() if t not in set(tasks)},
            mean_acc=None,
            mean_acc_stderr=None,
            mean_acc_lo=None,
            mean_acc_hi=None,
            items_used=None,
        )

    def without_lm_eval(self) -> FinalistNumbers:
        return replace(self, lm_eval=None)


def _task(task: str, metrics: dict[str, Any]) -> TaskNumbers:
    typed = {k: metrics[k] for k in (*ACC_METRICS, "acc_stderr") if k in metrics}
    other = {k: v for k, v in metrics.items() if k not in typed and k != "n"}
    if other and task in COMMONSENSE_TASKS:
        raise GhostsearchError(
            f"evaluation numbers: unknown key '{task}_{next(iter(other))}' ({task}'s numbers are "
            f"{task}_acc, {task}_acc_norm, {task}_acc_stderr and {task}_n)"
        )
    return TaskNumbers(n=metrics["n"], other=other, **typed)


# ---------------------------------------------------------------- per-item rows
@dataclass(frozen=True)
class ItemRow:
    """One finalist's prediction on one document of a zero-shot task: what
    ``evaluation_native.evaluate_finalists_native`` gives per finalist x task x document, compare
    keeps per job (RUN_DIR/evals/<key>.items.parquet, all jobs in RUN_DIR/eval_items.parquet) and
    ``ghostsearch eval`` writes beside its rows. ``finalist``: the finalist's index in its call (0 in
    compare's files); ``doc``: the row number in the task's file; ``gold``, ``pred``, ``pred_norm``
    (None where lm-eval reports no acc_norm): choice indices; ``lls``: each choice's log-likelihood;
    ``key``: the job's eval_key (compare's rows only; no column where no row has one)."""

    finalist: int
    removed: tuple[int, ...]
    recovery: str
    task: str
    doc: int
    gold: int
    pred: int
    pred_norm: int | None
    lls: tuple[float, ...]
    key: str | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "removed", tuple(int(b) for b in self.removed))
        object.__setattr__(self, "lls", tuple(float(v) for v in self.lls))

    @property
    def item(self) -> tuple[str, int]:
        """(task, doc): the item, whichever model predicted it."""
        return self.task, self.doc

    @property
    def correct(self) -> bool:
        return self.pred == self.gold

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> ItemRow:
        """A row of an items.parquet (or ``to_dict``'s form); an unknown or missing column fails in one line."""
        unknown = [k for k in d if k not in ITEM_COLUMNS]
        missing = [k for k in ITEM_REQUIRED if k not in d]
        if unknown or missing:
            what = f"unknown column '{unknown[0]}'" if unknown else f"no column '{missing[0]}'"
            raise GhostsearchError(f"item row: {what} (the columns are {', '.join(ITEM_COLUMNS)})")
        return cls(**d)

    def to_dict(self) -> dict[str, Any]:
        """The row as a dict, the columns in file order (``removed`` and ``lls`` as lists; no ``key``
        when it has none)."""
        out: dict[str, Any] = {}
        for name in ITEM_COLUMNS:
            v = getattr(self, name)
            if name not in ITEM_REQUIRED and v is None:
                continue
            out[name] = list(v) if isinstance(v, tuple) else v
        return out


# the fields in file order; those without a default are required (``key``: compare's rows only)
ITEM_COLUMNS = tuple(f.name for f in fields(ItemRow))
ITEM_REQUIRED = required_fields(ItemRow)


def item_schema(with_key: bool):
    """The Parquet schema of item rows: a column per field of ItemRow, its type from the field's
    annotation (``key`` only where rows have one)."""
    import pyarrow as pa

    arrow = {
        "int": pa.int64(),
        "int | None": pa.int64(),
        "str": pa.string(),
        "str | None": pa.string(),
        "tuple[int, ...]": pa.list_(pa.int64()),
        "tuple[float, ...]": pa.list_(pa.float64()),
    }
    types = {f.name: arrow[str(f.type)] for f in fields(ItemRow)}
    return pa.schema([(n, types[n]) for n in ITEM_COLUMNS if with_key or n != "key"])


def items_to_arrow(rows: list[ItemRow]):
    """Item rows as the table written to Parquet (``item_schema``; the ``key`` column where any row
    has a key)."""
    import pyarrow as pa

    with_key = any(r.key is not None for r in rows)
    dicts = [dict(r.to_dict(), key=r.key) if with_key else r.to_dict() for r in rows]
    return pa.Table.from_pylist(dicts, schema=item_schema(with_key))


def items_from_arrow(table) -> list[ItemRow]:
    """A table of item rows (an items.parquet) as ItemRows; an unknown column fails in one line."""
    return [ItemRow.from_dict(d) for d in table.to_pylist()]


def read_item_rows(path) -> list[ItemRow]:
    import pyarrow.parquet as pq

    return items_from_arrow(pq.read_table(path))
