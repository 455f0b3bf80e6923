"""The certification rule's error rate at the sizes ``ghostsearch target`` runs at, on committed real
populations (issue 47): the populations built from the run data they name (:func:`build`, written
to docs/results/target-level/populations.json by :func:`write`), the designs the report covers
(:data:`LOOKS`) and the report itself (:func:`report`: per design and correction the rate of
certifying a k at the null, the worst population, and the reruns a person makes). The simulation
is ``stats.certify_level``'s; bench/target_level.py is the command line.

The populations, each with its source:

- ``ppl``: per-window paired differences (pruned minus dense mean per-token NLL) of SmolLM2 on
  LAMBADA (docs/results/bench-target: target-quick's search, k = 1..6 with Ghosted and k = 1..3
  without repair, 16-64 windows of 128 tokens), and differences between two pruned models of study 2
  (WikiText-2, 148 windows of 2048 tokens; C4, 47 windows of 256 tokens). A k "at the null" draws
  windows with replacement from the population shifted to mean delta: the rate of certifying it is
  the rule's error rate for that shape of differences (it does not depend on delta or the scale).
- ``acc``: per task, the counts of items the pruned model lost (d = 1), gained (d = -1) and kept, of
  dense vs k = 1 (bench-target, three tasks, 2400 items) and of study 2's models (eight tasks); at
  the null each task's loss rate is raised (or lowered) by the same amount until the macro mean drop
  is exactly delta = 0.02; items are drawn per task (equal allocation), and constructed nulls are
  added: one task carrying all of delta, eight tasks each losing delta and never gaining (the spread
  rare losses of issue 47), eight tasks losing delta + 5% and gaining 5%.
- ``repairs``: per-window differences of four repairs of one removed set (study 2's FastBlock set
  with none, Ghosted, LinearPatch, ReplaceMe, each against greedy's set without repair) on the same
  148 windows: the four tests of "try four repairs in turn" see the same items.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import numpy as np

from ghostsearch.stats import certify as cert
from ghostsearch.stats.certify_level import ACC_DELTA, PPL_DELTA, Pop, rate, repairs_in_turn, rerun_extend


def build(root: Path) -> dict:
    """The populations from the committed run data they name (under ``root``, the repository:
    docs/results/bench-target, docs/results/study-cpu-2), each with its source."""
    import pyarrow.parquet as pq

    bt = root / "docs" / "results" / "bench-target"
    vals = bt / "run" / "target" / "values"
    out: dict = {"ppl": {}, "acc": {}, "repairs": {}, "delta": {"ppl": PPL_DELTA, "acc": ACC_DELTA}}
    for case in ("ppl-ghosted", "ppl-none"):
        block = json.loads((bt / f"{case}.json").read_text())
        keys, metric = block["values"], block["metric"]
        dense = json.loads((vals / metric / f"{keys['0']}.json").read_text())["values"]
        for k, key in sorted(keys.items(), key=lambda kv: int(kv[0])):
            f = vals / metric / f"{key}.json"
            if k == "0" or not f.exists():
                continue
            pruned = json.loads(f.read_text())["values"]
            n = min(len(pruned), len(dense))
            out["ppl"][f"lambada k{k} {block['recovery']}"] = {
                "source": f"docs/results/bench-target/run/target/values/{metric}: {key} minus {keys['0']} (dense)",
                "values": [pruned[i] - dense[i] for i in range(n)],
            }
    spec = root / "docs" / "results" / "study-cpu-2" / "ppl-windows"
    rows = [json.loads(x) for x in (spec / "windows.jsonl").read_text().splitlines() if x.strip()]

    def windows(corpus: str, a: str, b: str) -> list[float]:
        return [r["nll"][a] - r["nll"][b] for r in rows if r["corpus"] == corpus]

    src = "docs/results/study-cpu-2/ppl-windows/windows.jsonl"
    for corpus, a, b in (("wikitext2", "M1", "M2"), ("wikitext2", "M7", "M4"), ("wikitext2", "M8", "M10")):
        out["ppl"][f"study2 {corpus} {a} - {b}"] = {"source": f"{src}: {a} minus {b}", "values": windows(corpus, a, b)}
    for a, b in (("G8", "G64"), ("W32", "G32")):
        out["ppl"][f"study2 c4 {a} - {b}"] = {"source": f"{src}: {a} minus {b}", "values": windows("c4", a, b)}
    reps = {m: windows("wikitext2", m, "M1") for m in ("M3", "M4", "M5", "M6")}
    for m, v in reps.items():
        out["repairs"][f"study2 wikitext2 {m} - M1"] = {"source": f"{src}: {m} minus M1", "values": v}

    # accuracies: per task (lost, gained, n)
    order = pq.read_table(bt / "run" / "items.parquet").to_pandas()
    for case in ("acc-none", "acc-ghosted"):
        block = json.loads((bt / f"{case}.json").read_text())
        keys = block["values"]
        dense = np.array(json.loads((vals / "mean_acc" / f"{keys['0']}.json").read_text())["values"])
        pruned = np.array(json.loads((vals / "mean_acc" / f"{keys['1']}.json").read_text())["values"])
        d = dense - pruned[: len(dense)]
        tasks = order["task"].to_numpy()[: len(d)]
        out["acc"][f"bench-target dense - k1 {block['recovery']}"] = {
            "source": f"docs/results/bench-target/run/target/values/mean_acc: {keys['0']} minus {keys['1']}",
            "counts": [
                [int((d[tasks == t] == 1).sum()), int((d[tasks == t] == -1).sum()), int((tasks == t).sum())]
                for t in sorted(set(tasks))
            ],
        }
    items = pq.read_table(root / "docs" / "results" / "study-cpu-2" / "eval_items.parquet").to_pandas()
    correct = {
        key: {(t, doc): int(p == g) for t, doc, p, g in zip(g_.task, g_.doc, g_.pred, g_.gold)}
        for key, g_ in items.groupby("key")
    }
    dense_key = next(k for k, g_ in items.groupby("key") if len(g_.removed.iloc[0]) == 0)
    for key in sorted(correct):
        if key == dense_key:
            continue
        shared = sorted(set(correct[key]) & set(correct[dense_key]))
        by_task: dict[str, list[int]] = {}
        for it in shared:
            by_task.setdefault(it[0], []).append(correct[dense_key][it] - correct[key][it])
        rec = items[items.key == key].recovery.iloc[0]
        out["acc"][f"study2 dense - {key} ({rec})"] = {
            "source": f"docs/results/study-cpu-2/eval_items.parquet: key {dense_key} (dense) minus {key}",
            "counts": [[v.count(1), v.count(-1), len(v)] for _, v in sorted(by_task.items())],
        }
    return out


def write(root: Path, path: Path) -> None:
    """The populations file (``path``) from its sources under ``root``: :func:`build`."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(build(root), indent=1) + "\n")


# the looks the report covers, per kind of target
LOOKS = {
    "ppl": [[8, 16, 32], [12, 24, 48], [16, 32, 64], [32, 64, 128], [100, 200, 400]],
    "acc": [[100, 200, 400], [600, 1200, 2400]],
}


def report(pops: dict[str, list[Pop]], reps: int, corrections: list[str], only: list[str]) -> Iterator[str]:
    """The report's lines, one at a time (each rate is computed as its line is asked for): per kind
    in ``only`` (ppl, acc) and design of :data:`LOOKS`, each population's rate of certifying a k at
    the null under each correction (with its Monte Carlo SE) and the worst; with ``reruns``, the rate
    that some run certifies it when a person reruns (LAMBADA k5 Ghosted) or tries four repairs in turn."""
    yield f"rates of certifying a k at the null, level 0.95 (alpha 0.05), {reps} replications each"
    for kind in ("ppl", "acc"):
        if kind not in only:
            continue
        for looks in LOOKS[kind]:
            yield f"\n{kind} looks {looks}: " + " | ".join(f"{c:>14}" for c in corrections)
            worst = dict.fromkeys(corrections, 0.0)
            for pop in pops[kind]:
                row = []
                for c in corrections:
                    p, se = rate(pop, looks, correction=c, reps=reps)
                    worst[c] = max(worst[c], p)
                    row.append(f"{p:.4f} ({se:.4f})")
                yield f"  {pop.name[:60]:60s} " + " | ".join(row)
            yield f"  {'worst':60s} " + " | ".join(f"{worst[c]:.4f}         " for c in corrections)
    if "reruns" in only:
        yield "\nreruns (the rate that some run certifies a k at the null)"
        lam = next(p for p in pops["ppl"] if p.name == "lambada k5 ghosted")
        new = [16, 32, 64, 128, 256, 512, 800]
        for rule, corr in (("again", "z"), ("again", cert.CORRECTION), ("fresh", cert.CORRECTION)) + tuple(
            (r, cert.CORRECTION) for r in ("extend", "tries")
        ):
            p, se = rerun_extend(lam, [16, 32, 64], new, rule, reps=reps, correction=corr)
            yield f"  fail at looks 16/32/64, rerun with looks to 800 ({rule:6s}, {corr:6s}): {p:.4f} ({se:.4f})"
        for rule, corr in (("again", "z"), ("again", cert.CORRECTION), ("family", cert.CORRECTION)):
            p, se = repairs_in_turn(pops["repairs"], [16, 32, 64], rule, reps=reps, correction=corr)
            yield f"  four repairs in turn, looks 16/32/64 ({rule:6s}, {corr:6s}): {p:.4f} ({se:.4f})"
