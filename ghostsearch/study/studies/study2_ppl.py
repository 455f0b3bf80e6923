"""Study 2's perplexities redone window by window (issue 37): each model's mean NLL per held-out
window, which study 2's committed ``ppl_wikitext2_window_nll`` (and cheap/<id>.parquet's ``nll``)
do not hold (they are 16 batch-position sums, written before the fix of
``evaluation_native.window_items``). :func:`recompute` runs it, :func:`check` compares every
finished slot with the committed sum. bench/study2_ppl.py is its command line and states the
design."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path

SLOTS = 16  # study 2's eval.batch_size: the committed lists' slots
C4_WINDOW = 256
G_MODELS = ("G8", "G16", "G64", "W32")
OVERRIDES = ["dtype=fp32", "recovery.linearpatch_rotation=paley", "recovery.linearpatch_scale=pooled"]


def slot_order(n: int, slots=range(SLOTS)) -> list[int]:
    """Window indices slot by slot: slot j is the windows i = j (mod 16)."""
    return [i for j in slots for i in range(j, n, SLOTS)]


def read(out: Path) -> dict[tuple[str, int], dict[str, float]]:
    f = out / "windows.jsonl"
    if not f.exists():
        return {}
    rows = [json.loads(line) for line in f.read_text().splitlines() if line.strip()]
    return {(r["corpus"], r["window"]): r["nll"] for r in rows}


def committed_slots(run: Path, model: str, corpus: str) -> list[float] | None:
    """Study 2's committed per-window list of a model in its run directory ``run`` (its 16 slot
    sums, then zeros)."""
    import pyarrow.parquet as pq

    if model.startswith("M"):
        if corpus != "wikitext2":
            return None
        key = json.loads((run / "study.json").read_text())["models"][model]["eval_key"]
        return json.loads((run / "evals" / f"{key}.json").read_text())["ppl_wikitext2_window_nll"]
    t = pq.read_table(run / "cheap" / f"{model}.parquet").to_pylist()
    return [r["nll"] for r in sorted(t, key=lambda r: r["window"]) if r["corpus"] == corpus]


def check(out: Path, run: Path) -> list[dict]:
    """Every slot complete in windows.jsonl against the committed slot sum: per (model, corpus, slot)
    the recomputed sum, the committed value (rounded to 6 decimals there) and their difference."""
    done = read(out)
    rows = []
    for corpus in ("wikitext2", "c4"):
        mine = {i: v for (c, i), v in done.items() if c == corpus}
        if not mine:
            continue
        models = sorted(next(iter(mine.values())))
        n = 148 if corpus == "wikitext2" else 47
        for m in models:
            old = committed_slots(run, "M4" if m == "G32" and corpus == "wikitext2" else m, corpus)
            if old is None:
                continue
            for j in range(SLOTS):
                ws = list(range(j, n, SLOTS))
                if all(i in mine for i in ws):
                    s = sum(mine[i][m] for i in ws)
                    rows.append(
                        {"model": m, "corpus": corpus, "slot": j, "sum": s, "committed": old[j], "diff": s - old[j]}
                    )
    return rows


def recompute(out: Path, config: str, slots, commit: Callable[[Path, str], object] | None = None) -> None:
    """Fit study 2's models (M1-M10, and G8, G16, G64, W32 of study2_cheap) as it fitted them and
    write every window's mean NLL to out/windows.jsonl, C4 validation first, then WikiText-2 test
    slot by slot (``slots``); ``commit(out, message)``, when given, after C4 and after every slot.
    A rerun skips the windows already there; out/spec.json refuses other settings."""

    from ghostsearch.config import load_config
    from ghostsearch.evaluation.evaluate import corpus, eval_windows, protocol_windows
    from ghostsearch.evaluation.native import GIB, fit_finalists, loglikelihoods_finalists, plans, window_items
    from ghostsearch.model.models import load_model
    from ghostsearch.model.stack import Stack
    from ghostsearch.recovery.repair import fit
    from ghostsearch.study.studies.study2 import MODELS
    from ghostsearch.study.studies.study2_cheap import Design, model_config

    cfg = load_config(config, OVERRIDES)
    out.mkdir(parents=True, exist_ok=True)
    spec = {
        "issue": 37,
        "config": "configs/study2-smollm2.yaml",
        "overrides": OVERRIDES,
        "models": {
            m: {"label": lab, "removed": rem, "recovery": rep} for m, (lab, rem, rep) in MODELS.items() if m != "M0"
        },
        "cheap_models": list(G_MODELS),
        "g32_is": "M4",
        "corpora": {
            "wikitext2": "test, paper protocol (2048-token windows, all 148)",
            "c4": "validation, 256-token windows (47)",
        },
        "nll": "each window's mean NLL per predicted token (window length - 1), float64 of fp32 log-probabilities",
    }
    if (out / "spec.json").exists() and json.loads((out / "spec.json").read_text()) != spec:
        raise SystemExit(f"{out}/spec.json was written under other settings; use another --out")
    (out / "spec.json").write_text(json.dumps(spec, indent=1) + "\n")

    t0, c0 = time.monotonic(), time.process_time()
    model, tok = load_model(cfg.model, dtype=cfg.dtype)
    ids_m = [m for m in MODELS if m != "M0"]
    ms = fit_finalists(model, tok, cfg, [(MODELS[m][1], MODELS[m][2]) for m in ids_m])
    design = Design()
    gs = {m.id: m for m in design.models}
    g_ops = [fit(model, tok, list(design.removed), model_config(cfg, design, gs[g]), "ghosted") for g in G_MODELS]
    print(f"fitted in {time.monotonic() - t0:.0f} s wall, {time.process_time() - c0:.0f} CPU-s", flush=True)
    stack = Stack(model)
    cap = cfg.eval.cache_gib * GIB
    m4 = ms[ids_m.index("M4")]
    jobs = {
        "c4": (["G32", *G_MODELS], plans(stack, [m4, *((tuple(design.removed), o) for o in g_ops)])),
        "wikitext2": (
            [*ids_m, *G_MODELS],
            plans(stack, [*ms, *((tuple(design.removed), o) for o in g_ops)]),
        ),
    }
    done = read(out)
    for name in ("c4", "wikitext2"):
        names, finals = jobs[name]
        if name == "c4":
            seq_len, cap_w = C4_WINDOW, None
        else:
            seq_len, cap_w = protocol_windows(model, "paper", 0, None)
        _, ids = corpus(tok, name, cfg.data_dir)
        windows = eval_windows(ids, seq_len, cap_w)
        order = slot_order(len(windows), slots)
        last_slot = None
        for i in order:
            if (name, i) in done:
                continue
            slot = i % SLOTS
            if name == "wikitext2" and last_slot is not None and slot != last_slot and commit:
                commit(out, f"study 2 perplexities redone per window (issue 37): WikiText-2 slot {last_slot} done")
            last_slot = slot
            w0, c1 = time.monotonic(), time.process_time()
            lls, _ = loglikelihoods_finalists(stack, [window_items(windows[i : i + 1], first=0)], 1, finals, cap)
            nll = {m: -float(lls[f, 0]) / (seq_len - 1) for f, m in enumerate(names)}
            row = {"corpus": name, "window": i, "tokens": seq_len - 1, "nll": nll}
            with open(out / "windows.jsonl", "a") as fh:
                fh.write(json.dumps(row) + "\n")
            done[(name, i)] = nll
            print(
                f"{name} window {i} (slot {slot}): {time.monotonic() - w0:.1f} s wall, "
                f"{time.process_time() - c1:.1f} CPU-s; total {(time.process_time() - c0) / 3600:.3f} CPU-h",
                flush=True,
            )
        if commit:
            done_slots = ",".join(map(str, slots))
            commit(out, f"study 2 perplexities redone per window (issue 37): {name} windows of slots {done_slots} done")
    print(f"done: {time.monotonic() - t0:.0f} s wall, {(time.process_time() - c0) / 3600:.3f} CPU-h", flush=True)
