"""What a run reads, resolved once before any model work: for every calibration (each objective
of the run, and the repair's), the dataset asked and the one used, whether it fell back, which
content-hash half it reads, and how many documents or items; which evaluation sets must be read
in their evaluation half (``held_out``); and the check that calibration and evaluation never share
a document or item. ``ghostsearch search``/``compare``/``eval`` print it once and record it."""
from __future__ import annotations

import logging

from ghostsearch import data
from ghostsearch.config import Config
from ghostsearch.errors import GhostsearchError


def resolve(cfg: Config, objective: str, keys: dict) -> dict:
    """One calibration's record: asked -> used, fallback, part, count (``keys``: the content keys
    of each calibration dataset, filled once per dataset)."""
    from ghostsearch.objectives import OBJECTIVES

    asked = cfg.calibration.for_objective(objective).dataset or "auto"
    spec = cfg.calibration_spec(objective)
    try:
        known = spec.dataset in data.TEXT_DATASETS + data.MC_DATASETS  # a plug-in's own data: not counted
        n = len(_keys(keys, spec.dataset, cfg.data_dir)) if known else None
    except GhostsearchError as e:
        raise GhostsearchError(f"calibration.dataset={spec.dataset} for objective {objective!r}: {e}") from None
    rec = {"role": f"calibration:{objective}", "asked": asked, "used": spec.dataset,
           "fallback": asked == "auto" and spec.dataset != OBJECTIVES.get(objective).default_dataset,
           "part": "calibration half" if data.calibration_sources(spec.dataset, cfg.data_dir) else "all",
           "documents_or_items": n, "n_seq": spec.n_seq, "seq_len": spec.seq_len}
    if spec.dataset == "commonsense":
        rec["source"] = data.commonsense_source(cfg.data_dir)
    return rec


def _keys(keys: dict, dataset: str, data_dir) -> set[str]:
    if dataset not in keys:
        keys[dataset] = data.calibration_keys(dataset, data_dir)
    return keys[dataset]


def repair_record(cfg: Config, keys: dict) -> dict:
    asked = cfg.recovery.dataset or "auto"
    used = asked if asked != "auto" else cfg.default_dataset("perplexity")
    return {"role": "calibration:repair", "asked": asked, "used": used, "fallback": asked == "auto" and used != "c4",
            "part": "calibration half" if data.calibration_sources(used, cfg.data_dir) else "all",
            "documents_or_items": len(_keys(keys, used, cfg.data_dir)),
            "n_seq": cfg.recovery.n_seq, "seq_len": cfg.recovery.seq_len}


def plan(cfg: Config, objectives: list[str], evaluate: bool, repair: bool) -> dict:
    """Resolve every calibration, decide the held-out evaluation sets, check disjointness (when the
    run evaluates). Raises one GhostsearchError line before any model work."""
    keys: dict = {}  # dataset -> content keys, read and hashed once
    records = [resolve(cfg, o, keys) for o in dict.fromkeys(objectives)]
    if repair:
        records.append(repair_record(cfg, keys))
    held_out = sorted({s for r in records for s in data.calibration_sources(r["used"], cfg.data_dir)})
    out = {"calibration": records, "held_out": held_out}
    if evaluate:
        evaluation = data.evaluation_keys(cfg.eval.perplexity, cfg.eval.tasks, cfg.data_dir, held_out)
        data.check_disjoint(keys, evaluation)
        out["evaluation"] = [{"set": name, "part": "evaluation half" if name in held_out else "all",
                              "documents_or_items": len(keys)} for name, keys in evaluation.items()]
        out["evaluation"] += [{"set": t, "part": "lm-eval's (not checked against calibration)",
                               "documents_or_items": None} for t in cfg.eval.tasks if t not in evaluation]
    return out


def announce(p: dict) -> None:
    """Log the resolved data once (the CLI shows it on stderr; stdout stays for JSON results);
    a fallback is a warning."""
    log = logging.getLogger(__name__)
    for r in p["calibration"]:
        fb = " (FALLBACK: the asked dataset is not available here)" if r["fallback"] else ""
        (log.warning if fb else log.info)(
            f"{r['role']}: asked {r['asked']} -> used {r['used']}{fb}, {r['part']}, "
            f"{r['documents_or_items']} documents/items, {r['n_seq']} x {r['seq_len']}")
    for e in p.get("evaluation", []):
        n = e["documents_or_items"]
        log.info(f"evaluation: {e['set']}, {e['part']}" + (f", {n} documents/items" if n is not None else ""))
