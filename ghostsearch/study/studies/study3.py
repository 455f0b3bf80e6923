"""Study 3 of docs/results.md ("Pre-registration: study 3", 2026-12-03): Gemma-3-270M at k = 5 of
18, ten models whose removed sets are the pilot's k = 5 finalists, six contrasts numbered as study
2's (G6 and C4 dropped before look 1), N items per model sized from the pilot by the pre-registered
rule (:func:`planned_n`), and the WikiText-2 perplexity stage (issue 47: :func:`perplexity_stage`).
bench/study3.py is its command line; ``base`` runs and reports it."""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable
from pathlib import Path

from ghostsearch.data.items import weights_for
from ghostsearch.rundir.layout import result_cells
from ghostsearch.study.studies.base import Study

SE_TARGET, N_CAP, N_STEP = 0.0086, 2400, 200  # the pre-registered rule: study 2's planned s.e., its N as the cap
# the pre-registered models: id -> (label, pilot searcher, repair)
MODELS: dict[str, tuple[str, str | None, str]] = {
    "G0": ("dense", None, "none"),
    "G1": ("greedy-perplexity", "greedy", "none"),
    "G2": ("greedy-perplexity", "greedy", "ghosted"),
    "G3": ("fastblock", "fastblock", "none"),
    "G4": ("fastblock", "fastblock", "ghosted"),
    "G5": ("fastblock", "fastblock", "linearpatch"),
    # G6 (fastblock + ReplaceMe) was dropped before look 1 (docs/results.md, note of 2026-12-05): ReplaceMe
    # folds into mlp.down_proj, and Gemma-3's MLP output passes post_feedforward_layernorm first
    "G7": ("lorp", "lorp", "none"),
    "G8": ("shortgpt", "shortgpt", "none"),
    "G9": ("streamline", "streamline", "none"),
}
CONTRASTS: list[tuple[str, str, str, str]] = [
    ("C1", "Ghosted - none, greedy-perplexity set", "G2", "G1"),
    ("C2", "Ghosted - none, fastblock set", "G4", "G3"),
    ("C3", "Ghosted - LinearPatch, fastblock set", "G4", "G5"),
    # C4 (Ghosted - ReplaceMe) dropped with G6: the Holm family is C1-C3, C5, C6
    ("C5", "LoRP - ShortGPT, unrepaired", "G7", "G8"),
    ("C6", "LoRP - Streamline, unrepaired", "G7", "G9"),
]
PPL_ORDER = ("G1", "G2", "G7", "G9", "G4", "G5", "G8", "G0")  # G3 is G9 (one eval key)


def pilot_sets(pilot: Path, k: int = 5) -> dict[str, list[int]]:
    """Each searcher's k-block removed set from the pilot's result.json (perplexity objective, seed 0)."""
    cells = result_cells(json.loads((pilot / "result.json").read_text()))
    out = {}
    for c in cells.values():
        if c["objective"] == "perplexity" and c["k"] == k and c["seed"] == 0:
            out[c["searcher"]] = sorted(int(b) for b in c["removed"])
    return out


def planned_n(cfg) -> tuple[int, dict[str, float], float]:
    """(N, the shrunk per-task SDs, the planned s.e. at N): N the smallest multiple of 200 with
    sqrt((sum_h sd_h)^2 / (T^2 N)) <= 0.0086 (T tasks, Neyman allocation), at most 2,400."""
    tasks = list(cfg.eval.tasks)
    sds = weights_for(cfg.eval, tasks, {})
    total = sum(sds.values())
    n = N_STEP
    while n < N_CAP and math.sqrt(total**2 / (len(tasks) ** 2 * n)) > SE_TARGET:
        n += N_STEP
    return n, sds, math.sqrt(total**2 / (len(tasks) ** 2 * n))


def configure(config: str, overrides: list[str], pilot: Path):
    """The study's configuration from ``config``, the pilot (``pilot``: its run directory) and ``overrides``:
    the pre-registered Neyman allocation from the pilot's per-item rows (shrunk by half toward equal SDs),
    the pilot's items left out, N by :func:`planned_n`, looks at N/4, N/2 and N. Returns (the Config, the
    pilot's sets, N, the shrunk SDs, the planned s.e.); a pilot not yet run is one line."""
    from ghostsearch.config import load_config
    from ghostsearch.core.errors import GhostsearchError

    items = str(pilot / "eval_items.parquet")  # the pilot's per-item rows: Neyman SDs, and left out
    if not Path(items).is_file():
        raise GhostsearchError(f"study3: {items} is not there yet: run the pilot first (scripts/study3.sh does)")
    pilot_items = ["eval.allocation=neyman", "eval.neyman_shrink=0.5", f"eval.neyman_from={items}"]
    pilot_items.append(f"eval.exclude_from={items}")
    cfg = load_config(config, pilot_items + overrides)
    n, sds, se = planned_n(cfg)
    cfg.eval.max_items, cfg.eval.looks = n, [n // 4, n // 2, n]
    return cfg, pilot_sets(pilot), n, sds, se


def models(sets: dict[str, list[int]]) -> dict[str, tuple[str, list[int], str]]:
    return {m: (lab, sets[s] if s else [], rep) for m, (lab, s, rep) in MODELS.items()}


def study(sets: dict[str, list[int]]):
    """Study 3 as ghostsearch.study.studies.base runs and reports a study: the models with the pilot's sets."""
    return Study(
        "study 3 (issue 37)",
        "docs/results.md, 'Pre-registration: study 3' (2026-12-03)",
        models(sets),
        CONTRASTS,
        mark_dropped=True,
    )


def looks_finished(run_dir: Path) -> bool:
    """Whether looks.json records the study's last look or every contrast decided: nothing of the
    accuracy stage is left to run."""
    f = run_dir / "looks.json"
    if not f.exists():
        return False
    lk = json.loads(f.read_text())
    return lk["looks_run"] >= len(lk["looks"]) or all(c["decided"] for c in lk["contrasts"])


def perplexity_stage(
    cfg,
    keys: dict[str, str],
    held_out,
    out: Path,
    commit: Callable[[list[Path], str], object] | None,
    order,
    max_windows=None,
) -> None:
    """WikiText-2 (paper protocol) per-window mean NLL of each distinct model of ``order`` (ids of
    MODELS, eval keys ``keys``), one model at a time: out/<eval_key>.json when its every window is
    done (``commit(paths, message)``, when given, commits it alone); skipped when that file is
    there. ``max_windows``: the first W windows only (a check of the stage; such a file says so
    and is never committed)."""
    import torch

    from ghostsearch.evaluation.evaluate import corpus, eval_windows, protocol_windows
    from ghostsearch.evaluation.native import GIB, fit_finalists, loglikelihoods_finalists, plans, window_items
    from ghostsearch.model.models import load_configured
    from ghostsearch.model.stack import Stack

    spec = json.loads((Path(cfg.out) / "study.json").read_text())["models"]
    todo: list[str] = []
    for m in order:
        if keys[m] not in {keys[t] for t in todo} and not (out / f"{keys[m]}.json").exists():
            todo.append(m)
    if not todo:
        print("perplexity stage: every model is done", flush=True)
        return
    out.mkdir(parents=True, exist_ok=True)
    model, tok = load_configured(cfg)
    stack, cap = Stack(model), cfg.eval.cache_gib * GIB
    seq_len, cap_w = protocol_windows(model, "paper", 0, None)
    _, ids = corpus(tok, "wikitext2", cfg.data_dir, held_out)
    windows = eval_windows(ids, seq_len, cap_w)
    n = len(windows) if max_windows is None else min(max_windows, len(windows))
    for m in todo:
        key = keys[m]
        if spec[m]["eval_key"] != key:
            raise SystemExit(f"study3: {m}'s eval key {key} is not study.json's {spec[m]['eval_key']}")
        same = sorted(t for t in MODELS if keys[t] == key)
        t0, c0 = time.monotonic(), time.process_time()
        print(f"perplexity {'/'.join(same)} ({key}): fitting {MODELS[m][2]} on {spec[m]['removed']}", flush=True)
        fin = fit_finalists(model, tok, cfg, [(spec[m]["removed"], spec[m]["recovery"])])
        finals = plans(stack, fin)
        pf = out / f"{key}.partial.jsonl"
        rows = [json.loads(x) for x in pf.read_text().splitlines() if x.strip()] if pf.exists() else []
        nll = {r["window"]: r["nll"] for r in rows if r.get("tokens") == seq_len - 1}
        for i in range(n):
            if i in nll:
                continue
            w0 = time.monotonic()
            with torch.no_grad():
                lls, _ = loglikelihoods_finalists(stack, [window_items(windows[i : i + 1], first=0)], 1, finals, cap)
            nll[i] = -float(lls[0, 0]) / (seq_len - 1)
            with open(pf, "a") as fh:
                fh.write(json.dumps({"window": i, "tokens": seq_len - 1, "nll": nll[i]}) + "\n")
            print(f"  {m} window {i + 1}/{n}: nll {nll[i]:.4f}, {time.monotonic() - w0:.1f} s", flush=True)
            if commit and max_windows is None and len(nll) % 10 == 0 and len(nll) < n:
                commit([pf], f"study 3 (issue 47): WikiText-2 of {'/'.join(same)}, {len(nll)} windows so far")
        values = [nll[i] for i in range(n)]
        doc = {
            "issue": 47,
            "models": same,
            "eval_key": key,
            "removed": spec[m]["removed"],
            "recovery": spec[m]["recovery"],
            "corpus": "wikitext2",
            "protocol": f"paper: WikiText-2 test, every non-overlapping {seq_len}-token window, one window at a time",
            "windows": n,
            "all_windows": n == len(windows),
            "tokens_per_window": seq_len - 1,
            "ppl": math.exp(sum(values) / n),
            "window_nll": values,
            "nll": "each window's mean NLL per predicted token, float64 of fp32 log-probabilities",
            "cpu_s_this_run": round(time.process_time() - c0, 1),
            "wall_s_this_run": round(time.monotonic() - t0, 1),
            "threads": torch.get_num_threads(),
            "finished": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        }
        f = out / f"{key}.json"
        f.write_text(json.dumps(doc, indent=1) + "\n")
        pf.unlink()
        print(
            f"perplexity {'/'.join(same)}: {doc['ppl']:.3f} over {n} windows, {doc['cpu_s_this_run']:.0f} CPU-s",
            flush=True,
        )
        if commit and doc["all_windows"]:
            commit([f, pf], f"study 3 (issue 47): WikiText-2 perplexity of {'/'.join(same)} per window ({f})")
