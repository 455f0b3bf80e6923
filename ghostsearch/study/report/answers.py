"""Answer bias and the floor where accuracy is reported (issue 47): compare's report, ``eval``'s
table and the study pages (bench/study2.py, bench/study3.py) print these lines from the per-item
rows (``eval_numbers.ItemRow``: gold and predicted option of every item). The numbers are
``stats.answers``'s: descriptive, beside the pre-registered rule, never a second test."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from ghostsearch.stats import answers
from ghostsearch.stats.looks import ContrastRow


class Answered(Protocol):
    """What these lines read of a per-item row (``eval_numbers.ItemRow`` has it, and :class:`Answer`)."""

    @property
    def item(self) -> tuple[str, int]: ...
    @property
    def gold(self) -> int: ...
    @property
    def pred(self) -> int: ...
    @property
    def correct(self) -> bool: ...


@dataclass(frozen=True)
class Answer:
    """One item's gold and predicted option: the four columns of an items.parquet these lines need."""

    item: tuple[str, int]
    gold: int
    pred: int

    @property
    def correct(self) -> bool:
        return self.pred == self.gold


def read_answers(path: Path) -> list[Answer]:
    """An items.parquet's (task, doc, gold, pred) columns as :class:`Answer` rows (the schema is
    ``eval_numbers.items_to_arrow``'s; read without building every column of every row)."""
    import pyarrow.parquet as pq

    t = pq.read_table(path, columns=["task", "doc", "gold", "pred"])
    task, doc, gold, pred = (t.column(c).to_pylist() for c in ("task", "doc", "gold", "pred"))
    return [Answer((a, int(b)), int(g), int(q)) for a, b, g, q in zip(task, doc, gold, pred)]


# the options' names where a task's choices are the same for every item (else the option's index)
OPTION_NAMES: dict[str, tuple[str, ...]] = {"boolq": ("no", "yes")}


def option_name(task: str, option: int) -> str:
    names = OPTION_NAMES.get(task)
    return names[option] if names and 0 <= option < len(names) else f"#{option}"


def answers_of(rows_by_model: Mapping[str, Sequence[Answered]]) -> tuple[dict, dict]:
    """({(task, doc): gold} over every model's items, {model: {(task, doc): predicted option}})."""
    gold: dict[answers.Item, int] = {}
    preds: dict[str, dict[answers.Item, int]] = {}
    for m, rows in rows_by_model.items():
        preds[m] = {}
        for r in rows:
            gold[r.item] = int(r.gold)
            preds[m][r.item] = int(r.pred)
    return gold, preds


def floor_of(
    rows_by_model: Mapping[str, Sequence[Answered]], dense: str | None = None, tasks: Sequence[str] | None = None
) -> answers.Floor:
    """The floor (:func:`stats.answers.floor`) of models' per-item rows ({name: rows}); the constant
    answers over every item any of them evaluated."""
    gold, preds = answers_of(rows_by_model)
    return answers.floor(gold, preds, tasks, dense)


def sensitivities(
    rows_by_key: Mapping[str, Sequence[Answered]], looks: Sequence[ContrastRow], order: Sequence | None = None
) -> dict[str, answers.Sensitivity]:
    """Each contrast of ``looks`` (RUN_DIR/looks.json's rows) per task and without each task, on the
    items it was decided on: the first ``look_items`` of the draw's ``order`` (RUN_DIR/items.parquet)
    that both models have (without ``order``: every item both have), read with the row's bound and,
    for the margin rule, its margin and repeated-interval bound."""
    out = {}
    for c in looks:
        if c.left_key not in rows_by_key or c.right_key not in rows_by_key:
            continue
        left = {r.item: float(r.correct) for r in rows_by_key[c.left_key]}
        right = {r.item: float(r.correct) for r in rows_by_key[c.right_key]}
        pool = list(order)[: c.look_items] if order is not None else sorted(left)
        items = [tuple(it) for it in pool if tuple(it) in left and tuple(it) in right]
        if not items or not math.isfinite(c.se) or c.se <= 0:
            continue
        rci = None
        if c.margin is not None and c.rci and all(map(math.isfinite, c.rci)):
            rci = (c.rci[1] - c.estimate) / c.se
        bound = c.bound if math.isfinite(c.bound) else math.inf
        out[c.contrast] = answers.sensitivity(left, right, items, bound, c.margin, rci)
    return out


def floor_lines(fl: answers.Floor, names: Mapping[str, str] | None = None, n_items: int | None = None) -> list[str]:
    """Markdown: the constant answers, each model's macro accuracy over the floor and its accuracy and
    majority answer per task, and the flags."""
    name = (lambda m: names.get(m, m)) if names else (lambda m: m)
    ts = fl.tasks
    what = f"the {n_items:,} items evaluated" if n_items else "the items evaluated"
    lines = [
        "Answer bias and the floor (descriptive, beside the rule; issue 47). Constant answer: each task's most "
        f"common gold option over {what}, and its accuracy: "
        + ", ".join(f"{t} {option_name(t, fl.constant[t].option)} {fl.constant[t].share:.3f}" for t in ts)
        + f"; macro {fl.macro_floor:.3f}.",
        "",
        "| model | macro acc | - floor | " + " | ".join(f"{t}: acc (majority answer, share)" for t in ts) + " |",
        "|---|---|---|" + "---|" * len(ts),
    ]
    for m, a in fl.models.items():
        cells = [
            f"{a.acc[t]:.3f} ({option_name(t, a.majority[t].option)}, {a.majority[t].share:.2f})"
            + (" ONE ANSWER" if a.majority[t].share >= 1.0 else "")
            for t in ts
        ]
        flag = " AT/BELOW FLOOR" if a.at_floor else ""
        lines.append(f"| {name(m)} | {a.macro_acc:.3f} | {a.macro_margin:+.3f}{flag} | " + " | ".join(cells) + " |")
    beat = fl.constant_beats_dense
    lines += [""]
    if fl.dense is not None and fl.dense in fl.models:
        d = fl.models[fl.dense]
        lines.append(
            "A constant answer beats the dense model on: "
            + (", ".join(f"{t} ({d.acc[t] - d.margin[t]:.3f} vs {d.acc[t]:.3f})" for t in beat) if beat else "no task")
            + " (the constant answer's accuracy and the dense model's, on the dense model's items). "
            f"Dense model's margin over the floor: {d.macro_margin:+.3f} macro."
        )
    lines.append("Models at or below the floor (macro): " + (", ".join(name(m) for m in fl.at_floor) or "none") + ".")
    one = [
        f"{name(m)} {t} ({option_name(t, a.majority[t].option)})" for m, a in fl.models.items() for t in a.one_answer()
    ]
    lines.append("One answer to every item of a task: " + ("; ".join(one) or "none") + ".")
    return lines


def _verdict(v: str, margin: float | None) -> str:
    if v == "open":
        return "not decided"
    return f"within +-{margin:g}" if v == "within margin" and margin is not None else v


def sensitivity_lines(
    sens: Mapping[str, answers.Sensitivity], verdicts: Mapping[str, str] | None = None, margin: float | None = None
) -> list[str]:
    """Markdown: per contrast each task's contribution to the macro difference and the contrast
    without each task; a verdict that changes without one task is named with it. ``verdicts``: the
    rule's printed verdict per contrast (else the one recomputed from its bound)."""
    if not sens:
        return []
    ts = list(dict.fromkeys(t for s in sens.values() for t in s.by_task))
    lines = [
        "Each task's contribution to a contrast (its difference / tasks) and the contrast without each task "
        "(macro over the others, the same bound; descriptive, the rule's verdict stands):",
        "",
        "| contrast | estimate | " + " | ".join(ts) + " | verdict changes without |",
        "|---|---|" + "---|" * len(ts) + "---|",
    ]
    for c, s in sens.items():
        cid = c.split()[0]
        changes = ", ".join(f"{t} ({_verdict(s.left_out[t].verdict, margin)})" for t in s.changes)
        lines.append(
            f"| {cid} | {s.estimate:+.3f} | "
            + " | ".join(f"{s.contribution[t]:+.3f}" if t in s.contribution else "-" for t in ts)
            + f" | {changes or 'none'} |"
        )
    for c, s in sens.items():
        if s.changes:
            shown = (verdicts or {}).get(c, s.verdict)
            lines.append(
                f"- {c.split()[0]} ({shown} with every task): "
                + "; ".join(
                    f"without {t} {_verdict(s.left_out[t].verdict, margin)} "
                    f"({s.left_out[t].estimate:+.3f}, z {s.left_out[t].z:+.2f})"
                    for t in s.changes
                )
                + "."
            )
    return lines


def draw_order(run_dir: Path) -> list[tuple[str, int]] | None:
    """RUN_DIR/items.parquet's item order (the draw: looks take its first n), or None."""
    f = Path(run_dir) / "items.parquet"
    if not f.exists():
        return None
    import pyarrow.parquet as pq

    t = pq.read_table(f).sort_by("rank")
    return list(zip(t.column("task").to_pylist(), (int(d) for d in t.column("doc").to_pylist())))


def run_section(run_dir: Path, labels: Mapping[str, str], looks: Sequence[ContrastRow] | None = None) -> list[str]:
    """compare's report section: the floor and majority answers of every evaluated model of
    RUN_DIR/eval_items.parquet (``labels``: eval_key -> the model's name, "dense" for the dense
    model) and, with adaptive looks, each contrast per task and without each task; [] when the run
    kept no per-item rows."""
    f = Path(run_dir) / "eval_items.parquet"
    if not f.exists():
        return []
    import pyarrow.parquet as pq

    t = pq.read_table(f)
    if "key" not in t.column_names:
        return []
    by_key: dict[str, list[Answer]] = {}
    cols = (t.column(c).to_pylist() for c in ("key", "task", "doc", "gold", "pred"))
    for k, a, b, g, q in zip(*cols):
        by_key.setdefault(k, []).append(Answer((a, int(b)), int(g), int(q)))
    names = {k: labels.get(k, k) for k in by_key}
    fl = floor_of({names[k]: rows for k, rows in by_key.items()}, dense="dense" if "dense" in names.values() else None)
    n = len({r.item for rows in by_key.values() for r in rows})
    lines = ["## Answer bias and the floor (descriptive)", "", *floor_lines(fl, n_items=n), ""]
    if looks:
        sens = sensitivities(by_key, looks, draw_order(run_dir))
        margin = next((c.margin for c in looks if c.margin is not None), None)
        said = {"within margin": _verdict("within margin", margin), "open": "not decided"}
        lines += [*sensitivity_lines(sens, {c.contrast: said.get(c.verdict, c.verdict) for c in looks}, margin), ""]
    return lines


def eval_lines(items: Sequence) -> list[str]:
    """``ghostsearch eval``'s lines under its table: the floor and majority answers of the models of
    its per-item rows (``eval_numbers.ItemRow``: removed, recovery, task, doc, gold, pred), each model
    named as the table names it (dense, -3,7,12, -3,7,12+ghosted); [] without rows."""
    groups: dict[str, list] = {}
    for r in items:
        rec = r.recovery or "none"
        name = "dense" if not r.removed and rec == "none" else f"-{','.join(map(str, sorted(r.removed)))}"
        groups.setdefault(name if rec == "none" else f"{name}+{rec}", []).append(r)
    if not groups:
        return []
    fl = floor_of(groups, dense="dense" if "dense" in groups else None)
    return floor_lines(fl, n_items=len({r.item for r in items}))
