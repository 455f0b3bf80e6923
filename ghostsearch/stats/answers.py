"""Answer bias and the floor of a zero-shot evaluation (issue 47): descriptive numbers printed beside
a pre-registered rule, never a second test.

* **The constant-answer baseline** of a task: the accuracy of answering every item evaluated with
  the task's most common gold option among those items (the floor a model that learned nothing but
  the answer key's balance reaches; higher than uniform guessing on unbalanced tasks such as BoolQ).
  Its macro mean over the tasks is the floor of the macro accuracy.
* **Majority-answer share** of a model on a task: the share of the items it answers with its own
  most common option (1.0: one answer to every item, whatever the question).
* **Flags**: a task where the constant answer beats the dense model (the dense model's margin over
  it is negative), and a model whose macro accuracy is at or below the floor.
* **A contrast's tasks** (:func:`sensitivity`): each task's contribution to the macro difference
  (its own difference over the number of tasks), and the contrast again without each task in turn
  (macro over the others, the same paired z and the same bound as the rule used): a verdict that
  changes without one task is named with that task. The rule's verdict stands; this only says how
  much it rests on one task.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from ghostsearch.stats import inference as stats

Item = tuple[str, int]  # (task, doc)


@dataclass(frozen=True)
class Constant:
    """A task's constant-answer baseline over the items evaluated: the most common gold ``option``
    (the smallest on ties) and its ``share`` (that answer's accuracy) over ``n`` items."""

    task: str
    option: int
    share: float
    n: int


@dataclass(frozen=True)
class Majority:
    """A model's own most common answer on a task: ``option`` and its ``share`` of the task's items."""

    option: int
    share: float


@dataclass(frozen=True)
class ModelAnswers:
    """One model's accuracies next to the floor: per task its accuracy, its margin over the task's
    constant answer (on the items this model has) and its majority answer; macro accuracy and the
    macro margin (the mean of the tasks' margins)."""

    model: str
    acc: dict[str, float]
    margin: dict[str, float]  # acc - the constant answer's accuracy on the same items, per task
    majority: dict[str, Majority]
    macro_acc: float
    macro_margin: float

    @property
    def at_floor(self) -> bool:
        """Macro accuracy at or below the macro constant-answer baseline."""
        return self.macro_margin <= 0

    def one_answer(self, threshold: float = 1.0) -> list[str]:
        """Tasks where the model gives one option to at least ``threshold`` of the items."""
        return [t for t, m in self.majority.items() if m.share >= threshold]


@dataclass(frozen=True)
class Floor:
    """The floor of one evaluation: per task its constant answer, the macro floor, every model's
    answers (:class:`ModelAnswers`), and the tasks where a constant answer beats the dense model."""

    tasks: list[str]
    constant: dict[str, Constant]
    macro_floor: float
    uniform: dict[str, float] | None
    models: dict[str, ModelAnswers]
    dense: str | None

    @property
    def constant_beats_dense(self) -> list[str]:
        if self.dense is None or self.dense not in self.models:
            return []
        return [t for t in self.tasks if self.models[self.dense].margin[t] < 0]

    @property
    def at_floor(self) -> list[str]:
        return [m for m, a in self.models.items() if a.at_floor]


def constant_answers(gold: Mapping[Item, int], tasks: Sequence[str] | None = None) -> dict[str, Constant]:
    """Each task's most common gold option over the items of ``gold`` ({(task, doc): gold option})."""
    by_task: dict[str, Counter] = {}
    for (t, _), g in gold.items():
        by_task.setdefault(t, Counter())[int(g)] += 1
    out = {}
    for t in tasks or sorted(by_task):
        c = by_task.get(t)
        if not c:
            continue
        n = sum(c.values())
        option = min(c, key=lambda o: (-c[o], o))
        out[t] = Constant(t, option, c[option] / n, n)
    return out


def majority(pred: Mapping[Item, int], task: str) -> Majority:
    c = Counter(int(p) for (t, _), p in pred.items() if t == task)
    n = sum(c.values())
    if not n:
        return Majority(-1, math.nan)
    option = min(c, key=lambda o: (-c[o], o))
    return Majority(option, c[option] / n)


def floor(
    gold: Mapping[Item, int],
    preds: Mapping[str, Mapping[Item, int]],
    tasks: Sequence[str] | None = None,
    dense: str | None = None,
    choices: Mapping[str, int] | None = None,
) -> Floor:
    """The floor of an evaluation: ``gold`` {(task, doc): option} of the items evaluated (the
    baseline is computed over exactly these), ``preds`` {model: {(task, doc): predicted option}}
    (each model over the items of ``gold`` it has), ``dense`` the dense model's name (for the flag),
    ``choices`` {task: options per item} for the uniform-guessing line (optional)."""
    const = constant_answers(gold, tasks)
    ts = [t for t in (tasks or sorted(const)) if t in const]
    models = {}
    for m, p in preds.items():
        acc, margin, maj = {}, {}, {}
        for t in ts:
            mine = [(it, v) for it, v in p.items() if it[0] == t and it in gold]
            n = len(mine) or math.nan
            acc[t] = sum(int(v) == int(gold[it]) for it, v in mine) / n
            # the constant answer on the model's own items (a model evaluated on fewer items than others)
            margin[t] = acc[t] - sum(int(gold[it]) == const[t].option for it, _ in mine) / n
            maj[t] = majority({it: v for it, v in mine}, t)
        macro = float(np.mean([acc[t] for t in ts]))
        models[m] = ModelAnswers(m, acc, margin, maj, macro, float(np.mean([margin[t] for t in ts])))
    uniform = {t: 1 / choices[t] for t in ts if t in choices} if choices else None
    return Floor(ts, const, float(np.mean([const[t].share for t in ts])), uniform, models, dense)


@dataclass(frozen=True)
class LeftOut:
    """A contrast without one task: the macro difference over the other tasks, its s.e. and z, and
    the verdict the rule's own bound gives it (descriptive)."""

    task: str
    estimate: float
    se: float
    z: float
    verdict: str


@dataclass(frozen=True)
class Sensitivity:
    """A contrast's dependence on its tasks: the difference per task, each task's contribution to the
    macro difference (difference / tasks), the contrast without each task, and the tasks whose
    removal changes the verdict."""

    estimate: float
    se: float
    z: float
    verdict: str
    by_task: dict[str, float]
    contribution: dict[str, float]
    left_out: dict[str, LeftOut]

    @property
    def changes(self) -> list[str]:
        return [t for t, lo in self.left_out.items() if lo.verdict != self.verdict]


def verdict_of(estimate: float, se: float, bound: float, margin: float | None, rci_bound: float | None) -> str:
    """The rule's reading of an estimate at one look: ``differs`` when |z| >= bound, ``within
    margin`` when |estimate| + rci_bound * se < margin, else ``open``."""
    z = estimate / se if se > 0 else (0.0 if estimate == 0 else math.copysign(math.inf, estimate))
    if math.isfinite(bound) and abs(z) >= bound:
        return "differs"
    if margin is not None and rci_bound is not None and abs(estimate) + rci_bound * se < margin:
        return "within margin"
    return "open"


def sensitivity(
    left: Mapping[Item, float],
    right: Mapping[Item, float],
    items: Sequence[Item],
    bound: float,
    margin: float | None = None,
    rci_bound: float | None = None,
) -> Sensitivity:
    """Per task and leave-one-task-out numbers of the contrast left - right (0/1 correctness per item)
    on ``items`` (those the rule decided on), read with the rule's ``bound`` (and, for the margin
    rule, ``margin`` and the repeated interval's bound ``rci_bound``)."""
    strata = np.array([t for t, _ in items])
    a = np.array([left[it] for it in items], float)
    b = np.array([right[it] for it in items], float)
    full = stats.paired_test(a, b, strata)
    tasks = list(dict.fromkeys(strata.tolist()))
    by_task = {t: float((a[strata == t] - b[strata == t]).mean()) for t in tasks}
    out = {}
    for t in tasks:
        keep = strata != t
        lo = stats.paired_test(a[keep], b[keep], strata[keep])
        out[t] = LeftOut(t, lo.estimate, lo.se, lo.z, verdict_of(lo.estimate, lo.se, bound, margin, rci_bound))
    return Sensitivity(
        full.estimate,
        full.se,
        full.z,
        verdict_of(full.estimate, full.se, bound, margin, rci_bound),
        by_task,
        {t: v / len(tasks) for t, v in by_task.items()},
        out,
    )
