"""Study 2 of docs/results.md ("Pre-registration: study 2", 2026-12-01): eleven fixed models at
k = 8 (the pilot's perplexity-objective finalists, no new search), seven contrasts, Holm at 0.05
combined with O'Brien-Fleming looks at 600 / 1,200 / 2,400 items per model (compare's adaptive
evaluation: ``compare.evaluate_finalists`` with contrasts, ``looks.Design``).

  python bench/study2.py [--config configs/study2-smollm2.yaml] [--commit] [--report-only] [key=value ...]

Resumable: the run directory (``out``, default docs/results/study-cpu-2, in the repository so that a
later session continues from it) keeps the draw (items.parquet) and every model's per-item rows
(evals/<key>.items.parquet); rerun the same command and nothing evaluated is evaluated again.
``--commit`` commits the run directory after every model's share (``eval.share``) and every look
(``git commit -- DIR``), so a long run survives the session that started it. Writes DIR/study2.md (the contrasts' table) at the end, or
at once with ``--report-only``.
"""

from __future__ import annotations

import argparse
import json
import math
import time
from pathlib import Path

import benchenv  # noqa: F401  (repository on sys.path, offline HF, ../shared/data)

# the pre-registered models: id -> (label, removed blocks, repair)
MODELS: dict[str, tuple[str, list[int], str]] = {
    "M0": ("dense", [], "none"),
    "M1": ("greedy-perplexity", [4, 5, 13, 14, 15, 16, 17, 18], "none"),
    "M2": ("greedy-perplexity", [4, 5, 13, 14, 15, 16, 17, 18], "ghosted"),
    "M3": ("fastblock", [12, 13, 14, 15, 16, 17, 18, 19], "none"),
    "M4": ("fastblock", [12, 13, 14, 15, 16, 17, 18, 19], "ghosted"),
    "M5": ("fastblock", [12, 13, 14, 15, 16, 17, 18, 19], "linearpatch"),
    "M6": ("fastblock", [12, 13, 14, 15, 16, 17, 18, 19], "replaceme"),
    "M7": ("lorp", [4, 6, 8, 17, 19, 25, 26, 27], "none"),
    "M8": ("shortgpt", [12, 13, 14, 15, 16, 17, 25, 26], "none"),
    "M9": ("streamline", [11, 12, 13, 14, 15, 16, 17, 18], "none"),
    "M10": ("greedy-margin", [7, 16, 17, 18, 21, 24, 26, 27], "ghosted"),
}
# the pre-registered contrasts: id, question, left model, right model (left - right, mean accuracy)
CONTRASTS: list[tuple[str, str, str, str]] = [
    ("C1", "Ghosted - none, greedy-perplexity set", "M2", "M1"),
    ("C2", "Ghosted - none, fastblock set", "M4", "M3"),
    ("C3", "Ghosted - LinearPatch, fastblock set", "M4", "M5"),
    ("C4", "Ghosted - ReplaceMe, fastblock set", "M4", "M6"),
    ("C5", "LoRP - ShortGPT, unrepaired", "M7", "M8"),
    ("C6", "LoRP - Streamline, unrepaired", "M7", "M9"),
    ("C7", "greedy: perplexity set - margin set, Ghosted", "M2", "M10"),
]


def design(cfg, held_out) -> tuple[dict[str, str], list[tuple[list[int], str]], list[tuple[str, str, str]]]:
    """({model id: eval key}, jobs (removed, method), contrast pairs (name, left key, right key))."""
    from ghostsearch.compare import eval_key

    keys = {m: eval_key(removed, method, cfg, held_out) for m, (_, removed, method) in MODELS.items()}
    jobs = [(removed, method) for _, removed, method in MODELS.values()]
    pairs = [(f"{cid} {question}", keys[left], keys[right]) for cid, question, left, right in CONTRASTS]
    return keys, jobs, pairs


def report(run_dir: Path, keys: dict[str, str]) -> str:
    """The contrasts' table from the run's looks.json and per-item rows: each contrast's estimate at
    the look it was decided (or the last look run), its paired item-bootstrap interval at the local
    level the sequential Holm rule held it to, the verdict, the items used."""
    import numpy as np
    import pyarrow.parquet as pq

    from ghostsearch import stats

    looks = json.loads((run_dir / "looks.json").read_text())
    by_name = {c["contrast"]: c for c in looks["contrasts"]}
    label = {k: m for m, k in keys.items()}
    rows = {}
    for m, k in keys.items():
        f = run_dir / "evals" / f"{k}.items.parquet"
        if f.exists():
            t = pq.read_table(f, columns=["task", "doc", "gold", "pred"]).to_pylist()
            rows[m] = {(r["task"], r["doc"]): float(r["pred"] == r["gold"]) for r in t}
    order = (
        [(r["task"], r["doc"]) for r in pq.read_table(run_dir / "items.parquet").sort_by("rank").to_pylist()]
        if (run_dir / "items.parquet").exists()
        else []
    )
    numbers = {
        m: json.loads((run_dir / "evals" / f"{k}.json").read_text())
        for m, k in keys.items()
        if (run_dir / "evals" / f"{k}.json").exists()
    }
    rci_levels = {c.get("rci_level") for c in looks["contrasts"] if c.get("rci_level")}
    rci_level = f"{rci_levels.pop():.4f}" if len(rci_levels) == 1 else "alpha / 7"
    lines = [
        f"Looks run: {looks['looks_run']} of {len(looks['looks'])} ({', '.join(map(str, looks['looks']))} items "
        f"per model); items evaluated in all: {looks['items_total']:,} of the fixed design's "
        f"{looks['fixed_items_total']:,}; rule: Holm at {looks['alpha']} over the seven contrasts, "
        f"{looks['spending']} spending.",
        "",
        "| contrast | left - right | estimate | z | interval at its level | confidence | repeated CI "
        f"(margin rule, {rci_level}) | look | items | verdict | "
        "WikiText-2 ppl (left / right; log ratio, 95% interval over windows) |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for cid, question, left, right in CONTRASTS:
        c = by_name.get(f"{cid} {question}")
        if c is None:
            continue
        n = c["look_items"]
        items = [it for it in (order[:n] if order else []) if it in rows.get(left, {}) and it in rows.get(right, {})]
        a = np.array([rows[left][it] for it in items])
        b = np.array([rows[right][it] for it in items])
        strata = np.array([t for t, _ in items])
        level = 1 - c["level"] if not math.isnan(c["level"]) else 0.95
        ci = stats.paired_diff_ci(a, b, strata, level=level, seed=0) if len(items) else None
        if c.get("verdict") == "within margin":  # its repeated CI lies inside +-margin (amendment 3)
            verdict = f"within +-{looks['margin']:g}"
        elif c["decided"]:
            verdict = "differs: " + ("left better" if c["sign"] > 0 else "right better")
        else:
            verdict = "not decided"
        if any("ppl_wikitext2" in numbers.get(m, {}) for m in (left, right)):
            ppl = " / ".join(
                f"{numbers[m]['ppl_wikitext2']:.1f}" if "ppl_wikitext2" in numbers.get(m, {}) else "not yet"
                for m in (left, right)
            )
        else:
            ppl = "not yet measured"
        rci = c.get("rci")
        rci_text = f"[{rci[0]:+.3f}, {rci[1]:+.3f}]" if rci and not any(map(math.isnan, rci)) else "-"
        wl, wr = (numbers.get(m, {}).get("ppl_wikitext2_window_nll") for m in (left, right))
        if wl and wr and len(wl) == len(wr):  # log-perplexity difference, paired over the same windows
            w = stats.paired_diff_ci(np.array(wl), np.array(wr), seed=0)
            ppl += f"; log ratio {w.estimate:+.3f} [{w.lo:+.3f}, {w.hi:+.3f}] over {len(wl)} windows"
        interval = f"[{ci.lo:+.3f}, {ci.hi:+.3f}]" if ci else "-"
        lines.append(
            f"| {cid} {question} | {left} - {right} | {c['estimate']:+.3f} | {c['z']:+.2f} | {interval} | "
            f"{level:.4f} | {rci_text} | {c['decided_at_look'] or looks['looks_run']} | {n} | {verdict} | {ppl} |"
        )
    lines += [
        "",
        "Models: "
        + "; ".join(f"{m} {lab} {rem or ''} {rep}".replace("  ", " ") for m, (lab, rem, rep) in MODELS.items())
        + ".",
        "Items used per model: "
        + ", ".join(f"{label[k]} {n}" for k, n in looks["items_per_model"].items() if k in label)
        + ".",
        "WikiText-2 perplexity (paper protocol, every 2048-token window of the test split)"
        + (": " if all("ppl_wikitext2" in numbers.get(m, {}) for m in keys) else " measured so far: ")
        + (
            ", ".join(
                f"{m} {numbers[m]['ppl_wikitext2']:.2f} ({len(numbers[m].get('ppl_wikitext2_window_nll') or [])} windows)"
                for m in keys
                if "ppl_wikitext2" in numbers.get(m, {})
            )
            or "none"
        )
        + ".",
        "Mean accuracy over the items each model used (macro over the eight tasks): "
        + ", ".join(f"{m} {numbers[m]['mean_acc']:.3f}" for m in keys if "mean_acc" in numbers.get(m, {}))
        + ".",
    ]
    return "\n".join(lines) + "\n"


def s1_test(run_dir: Path):
    """Claim S1's data and test: greedy's k = 8 sets under both objectives x calibration seeds
    (configs/study2-s1.yaml), sorted (objective, seed, removed); statistic: mean Jaccard of
    same-objective pairs minus cross-objective pairs; exact permutation test over every way to
    relabel the sets' objectives (70 for 4 + 4), one-sided. Returns (rows, stats.PermutationResult)."""
    import itertools

    import numpy as np

    from ghostsearch import stats
    from ghostsearch.rundir.layout import result_cells

    cells = result_cells(json.loads((run_dir / "result.json").read_text()))
    rows = sorted((c["objective"], c["seed"], tuple(c["removed"])) for c in cells.values() if c["searcher"] == "greedy")
    sets = [set(r[2]) for r in rows]
    labels = np.array([r[0] for r in rows])
    jac = np.array([[len(a & b) / len(a | b) for b in sets] for a in sets])
    pairs = list(itertools.combinations(range(len(sets)), 2))

    def gap(lab) -> float:
        same = [jac[i, j] for i, j in pairs if lab[i] == lab[j]]
        cross = [jac[i, j] for i, j in pairs if lab[i] != lab[j]]
        return float(np.mean(same) - np.mean(cross))

    return rows, stats.permutation_test(gap, labels, alternative="greater")


def s1(run_dir: Path) -> str:
    """Claim S1's table and sentence (:func:`s1_test`)."""
    rows, t = s1_test(run_dir)
    lines = ["| objective | calibration seed | removed |", "|---|---|---|"]
    lines += [f"| {o} | {sd} | {' '.join(map(str, r))} |" for o, sd, r in rows]
    lines += [
        "",
        f"S1: same-objective minus cross-objective Jaccard = {t.estimate:.3f}; exact permutation p = "
        f"{t.p:.4f} over {t.n_perm} relabellings (one-sided; the smallest possible p is {2 / t.n_perm:.4f}: "
        "swapping the two objectives' names leaves the statistic unchanged).",
    ]
    return "\n".join(lines) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--config", default="configs/study2-smollm2.yaml")
    ap.add_argument("--commit", action="store_true", help="commit the run directory after every look")
    ap.add_argument("--report-only", action="store_true", help="write study2.md from what has run")
    ap.add_argument("--s1", metavar="RUN_DIR", help="claim S1's table from a compare of configs/study2-s1.yaml")
    ap.add_argument("overrides", nargs="*", help="key=value config overrides")
    args = ap.parse_args()
    if args.s1:
        text = s1(Path(args.s1))
        (Path(args.s1) / "s1.md").write_text(text)
        print(text)
        return

    import torch

    from ghostsearch.compare import evaluate_finalists
    from ghostsearch.config import load_config, save_config
    from ghostsearch.dataplan import announce, plan
    from ghostsearch.io import write_json_atomic

    cfg = load_config(args.config, args.overrides)
    torch.set_num_threads(max(1, cfg.pool.threads))
    run_dir = Path(cfg.out)
    data_plan = plan(cfg, ["perplexity"], evaluate=True, repair=True)
    announce(data_plan)
    held_out = data_plan.held_out
    keys, jobs, pairs = design(cfg, held_out)
    if args.report_only:
        if not (run_dir / "study.json").exists():
            raise SystemExit(f"study2: {run_dir} holds no study yet: run it without --report-only first")
    else:  # a report changes nothing it reads: config.yaml records the settings of the last real run
        run_dir.mkdir(parents=True, exist_ok=True)
        save_config(cfg, run_dir / "config.yaml")
        write_json_atomic(
            run_dir / "study.json",
            {
                "preregistered": "docs/results.md, 'Pre-registration: study 2' (2026-12-01)",
                "models": {
                    m: {"label": lab, "removed": rem, "recovery": rep, "eval_key": keys[m]}
                    for m, (lab, rem, rep) in MODELS.items()
                },
                "contrasts": [{"id": cid, "question": q, "left": lft, "right": rgt} for cid, q, lft, rgt in CONTRASTS],
                "data": data_plan,
            },
        )
        t0 = time.monotonic()

        def on_look(j: int, n: int) -> None:
            print(f"look {j + 1} done: {n} items per model, {time.monotonic() - t0:.0f} s", flush=True)
            if args.commit:
                benchenv.commit_dir(
                    run_dir, f"study 2 (issue 24): look {j + 1} ({n} items per model) evaluated; data under {run_dir}"
                )

        names = {v: m for m, v in keys.items()}

        def on_share(share: list[str]) -> None:
            done = ", ".join(names.get(k, k) for k in share)
            print(f"saved: {done}, {time.monotonic() - t0:.0f} s", flush=True)
            if args.commit:
                benchenv.commit_dir(run_dir, f"study 2 (issue 24): {done} evaluated (rows saved); data under {run_dir}")

        evaluate_finalists(
            cfg, run_dir, jobs, held_out, progress=True, contrasts=pairs, on_look=on_look, on_share=on_share
        )
    text = report(run_dir, keys)
    (run_dir / "study2.md").write_text(text)
    print(text)
    if args.commit:
        benchenv.commit_dir(run_dir, f"study 2 (issue 24): report {run_dir}/study2.md")


if __name__ == "__main__":
    main()
