"""A pre-registered study of fixed models (study 2, study 3 of docs/results.md): its design, its
run look by look, and its printed report (moved from bench/study2.py: issue 50; each study's models
and contrasts are a module beside this one, its command line a bench/ script)."""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from ghostsearch.stats.repeated import power_at, repeated_p
from ghostsearch.stats.windows import BLOCK, adjacent_blocks, cluster_diff, lag1, window_clusters

NUMBERS = ("no", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten")
REDO_NAME = "ppl-windows"  # bench/study2_ppl.py's per-window NLL, recomputed (issue 37), in a run directory


@dataclass(frozen=True)
class Study:
    """A pre-registered study of fixed models (study2.py's study 2, study3.py's study 3): its
    models (id -> (label, removed blocks, repair)), its contrasts (id, question, left model, right
    model: left - right in mean accuracy), where it was pre-registered, and the label of its commits.
    ``mark_dropped``: study.json says of each contrast whether it was dropped (its two models are
    one)."""

    label: str
    preregistered: str
    models: dict[str, tuple[str, list[int], str]]
    contrasts: list[tuple[str, str, str, str]]
    mark_dropped: bool = False

    def tested(self, keys: dict[str, str]) -> list[tuple[str, str, str, str]]:
        """The contrasts between two different models (by eval key)."""
        return [c for c in self.contrasts if keys[c[2]] != keys[c[3]]]


def redone_windows(model: str, redo: Path, corpus: str = "wikitext2") -> list[float] | None:
    """A model's per-window mean NLL from bench/study2_ppl.py, when every window of the corpus is there."""
    f = redo / "windows.jsonl"
    if not f.exists():
        return None
    rows = [json.loads(line) for line in f.read_text().splitlines() if line.strip()]
    got = {r["window"]: r["nll"][model] for r in rows if r["corpus"] == corpus and model in r["nll"]}
    n = {"wikitext2": 148, "c4": 47}[corpus]
    return [got[i] for i in range(n)] if len(got) == n and set(got) == set(range(n)) else None


def ppl_contrast(numbers: dict, left: str, right: str, redo: Path | None = None) -> dict | None:
    """The WikiText-2 log-perplexity difference of two models, paired over windows: over each window
    (bench/study2_ppl.py's recomputation, when it covers both models) or else over the committed
    batch-position sums as clusters."""
    wl, wr = (redone_windows(m, redo) if redo is not None else None for m in (left, right))
    if not (wl and wr):
        cl, cr = (numbers.get(m, {}).get("ppl_wikitext2_window_nll") for m in (left, right))
        if not cl or not cr or len(cl) != len(cr):
            return None
        (sl, nl), (sr, nr) = window_clusters(cl), window_clusters(cr)
        if nl != nr:
            raise ValueError(f"{left} and {right} were summed over different clusters of windows")
        if set(nl) != {1}:
            return {**cluster_diff(sl, sr, nl), "kind": "clusters"}
        wl, wr = sl, sr
    (bl, nb), (br, _) = adjacent_blocks(wl), adjacent_blocks(wr)
    return {
        **cluster_diff(wl, wr, [1] * len(wl)),
        "kind": "windows",
        "blocks": cluster_diff(bl, br, nb),
        "lag1": lag1([a - b for a, b in zip(wl, wr)]),
    }


def design(
    cfg, held_out, study: Study
) -> tuple[dict[str, str], list[tuple[list[int], str]], list[tuple[str, str, str]]]:
    """({model id: eval key}, jobs (removed, method; each once), contrast pairs (name, left key, right
    key)); a contrast between two models that are one (the same eval key) is dropped."""
    from ghostsearch.study.compare import eval_key

    keys = {m: eval_key(removed, method, cfg, held_out) for m, (_, removed, method) in study.models.items()}
    jobs: list[tuple[list[int], str]] = []
    for _, removed, method in study.models.values():
        if (removed, method) not in jobs:
            jobs.append((removed, method))
    pairs = [(f"{cid} {q}", keys[left], keys[right]) for cid, q, left, right in study.tested(keys)]
    return keys, jobs, pairs


def run_study(
    cfg,
    study: Study,
    keys,
    jobs,
    pairs,
    data_plan,
    commit: Callable[[Path, str], object] | None = None,
    extra: dict | None = None,
) -> None:
    """A study's run: RUN_DIR (``out``) gets config.yaml and study.json (the pre-registration,
    ``extra``, the models with their eval keys, the contrasts, the data plan), then the models are
    evaluated look by look (compare.evaluate_finalists with the contrasts); ``commit(path, message)``
    (e.g. bench's ``benchenv.commit_dir``) is called with RUN_DIR after every share of models and
    every look."""
    from ghostsearch.config import save_config
    from ghostsearch.core.io import write_json_atomic
    from ghostsearch.study.compare import evaluate_finalists

    run_dir = Path(cfg.out)
    run_dir.mkdir(parents=True, exist_ok=True)
    save_config(cfg, run_dir / "config.yaml")
    contrasts = []
    for cid, q, lft, rgt in study.contrasts:
        c = {"id": cid, "question": q, "left": lft, "right": rgt}
        contrasts.append({**c, "dropped": keys[lft] == keys[rgt]} if study.mark_dropped else c)
    write_json_atomic(
        run_dir / "study.json",
        {
            "preregistered": study.preregistered,
            **(extra or {}),
            "models": {
                m: {"label": lab, "removed": rem, "recovery": rep, "eval_key": keys[m]}
                for m, (lab, rem, rep) in study.models.items()
            },
            "contrasts": contrasts,
            "data": data_plan,
        },
    )
    t0 = time.monotonic()
    names = {v: m for m, v in keys.items()}

    def on_look(j: int, n: int) -> None:
        print(f"look {j + 1} done: {n} items per model, {time.monotonic() - t0:.0f} s", flush=True)
        if commit is not None:
            commit(run_dir, f"{study.label}: look {j + 1} ({n} items per model) evaluated; data under {run_dir}")

    def on_share(share: list[str]) -> None:
        done = ", ".join(names.get(k, k) for k in share)
        print(f"saved: {done}, {time.monotonic() - t0:.0f} s", flush=True)
        if commit is not None:
            commit(run_dir, f"{study.label}: {done} evaluated (rows saved); data under {run_dir}")

    evaluate_finalists(
        cfg, run_dir, jobs, data_plan.held_out, progress=True, contrasts=pairs, on_look=on_look, on_share=on_share
    )


def fmt_p(p: float) -> str:
    return "-" if math.isnan(p) else f"{p:.4f}" if p >= 1e-4 else f"{p:.1e}"


def contrast_numbers(looks: dict) -> dict[str, dict]:
    """Per contrast (looks.json name): its repeated p, the Holm-adjusted repeated p over C1-C7, the
    power at 0.03 and the minimum detectable difference (80% power) at its level and last look's s.e."""
    from ghostsearch.stats import inference as stats

    fractions = [n / looks["looks"][-1] for n in looks["looks"]]
    cs = looks["contrasts"]
    ps = [
        repeated_p(c["z_by_look"][: looks["looks_run"]], fractions[: len(c["z_by_look"])], looks["spending"])
        for c in cs
    ]
    adj = stats.holm(ps)
    out = {}
    for c, p, a in zip(cs, ps, adj):
        out[c["contrast"]] = {
            "p_repeated": p,
            "p_holm": float(a),
            "power_003": power_at(0.03, c["se"], c["bound"]),
            # at alpha / m, the family's first Holm level: no level carried over from decided contrasts
            "power_003_bonferroni": power_at(
                0.03,
                c["se"],
                stats.spending_bounds(fractions, looks["alpha"] / len(cs), looks["spending"])[
                    (c["decided_at_look"] or looks["looks_run"]) - 1
                ],
            ),
            "mdd": (c["bound"] + stats.norm_ppf(0.8)) * c["se"],
        }
    return out


def report(run_dir: Path, keys: dict[str, str], study: Study) -> str:
    """The contrasts' table from the run's looks.json: each contrast's estimate at the look it was
    decided (or the last look run), its standard error, its repeated confidence interval (valid after
    the early stop the rule allows), its repeated p and that p Holm-adjusted over the study's tested
    contrasts, the verdict, the items used; and the WikiText-2 perplexities with their paired
    intervals over windows."""
    tested = study.tested(keys)
    looks = json.loads((run_dir / "looks.json").read_text())
    by_name = {c["contrast"]: c for c in looks["contrasts"]}
    label = {k: m for m, k in keys.items()}
    numbers = {
        m: json.loads((run_dir / "evals" / f"{k}.json").read_text())
        for m, k in keys.items()
        if (run_dir / "evals" / f"{k}.json").exists()
    }
    for m, k in keys.items():  # study 3's perplexity stage (bench/study3.py --perplexity): one file per model
        f = run_dir / "ppl" / f"{k}.json"
        if f.exists() and m in numbers:
            doc = json.loads(f.read_text())
            if doc.get("all_windows"):
                numbers[m] = {**numbers[m], "ppl_wikitext2": doc["ppl"], "ppl_wikitext2_window_nll": doc["window_nll"]}
    extra = contrast_numbers(looks)
    rci_levels = {c.get("rci_level") for c in looks["contrasts"] if c.get("rci_level")}
    rci_level = f"{rci_levels.pop():.4f}" if len(rci_levels) == 1 else f"alpha / {len(tested)}"
    lines = [
        f"Looks run: {looks['looks_run']} of {len(looks['looks'])} ({', '.join(map(str, looks['looks']))} items "
        f"per model); items evaluated in all: {looks['items_total']:,} of the fixed design's "
        f"{looks['fixed_items_total']:,}; rule: Holm at {looks['alpha']} over the {NUMBERS[len(tested)]} contrasts, "
        f"{looks['spending']} spending.",
        "",
        "| contrast | left - right | estimate | s.e. | z | repeated CI "
        f"({rci_level}) | repeated p | Holm-adjusted p | look | items | verdict | "
        "WikiText-2 ppl (left / right; log ratio, 95% interval over windows) |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for cid, question, left, right in tested:
        c = by_name.get(f"{cid} {question}")
        if c is None:
            continue
        n = c["look_items"]
        x = extra[c["contrast"]]
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
        w = ppl_contrast(numbers, left, right, run_dir / REDO_NAME)  # study 2's recomputation, if in run_dir
        if w is not None:  # log-perplexity difference, paired over the same windows
            over = (
                f"{w['windows']} windows"
                if w["kind"] == "windows"
                else f"{w['windows']} windows in {w['clusters']} clusters"
            )
            ppl += f"; log ratio {w['estimate']:+.3f} [{w['lo']:+.3f}, {w['hi']:+.3f}] over {over}"
            if "blocks" in w:  # adjacent windows correlate: the interval over blocks of them (issue 47)
                b = w["blocks"]
                ppl += f"; over {b['clusters']} blocks of {BLOCK} adjacent windows [{b['lo']:+.3f}, {b['hi']:+.3f}]"
        lines.append(
            f"| {cid} {question} | {left} - {right} | {c['estimate']:+.3f} | {c['se']:.4f} | {c['z']:+.2f} | "
            f"{rci_text} | {fmt_p(x['p_repeated'])} | {fmt_p(x['p_holm'])} | "
            f"{c['decided_at_look'] or looks['looks_run']} | {n} | {verdict} | {ppl} |"
        )
    open_ = [
        f"{cid} {q}" for cid, q, _, _ in tested if f"{cid} {q}" in by_name and not by_name[f"{cid} {q}"]["decided"]
    ]
    lines += [
        "",
        "Power achieved at a true difference of 0.03 (the last look's s.e. and the bound at the contrast's "
        "level): "
        + ", ".join(
            f"{cid} {extra[f'{cid} {q}']['power_003']:.2f} (s.e. {by_name[f'{cid} {q}']['se']:.4f})"
            for cid, q, _, _ in tested
            if f"{cid} {q}" in by_name
        )
        + ".",
        f"Power at 0.03 at alpha / {len(cs_tested := [c for c in tested if f'{c[0]} {c[1]}' in by_name])} "
        f"= {looks['alpha'] / max(len(cs_tested), 1):.4f} (the family's first level, none carried over from "
        "contrasts already decided): "
        + ", ".join(f"{cid} {extra[f'{cid} {q}']['power_003_bonferroni']:.2f}" for cid, q, _, _ in cs_tested)
        + ".",
        "Minimum detectable difference (80% power, the last look's s.e. and bound) of the contrasts not decided: "
        + (
            ", ".join(
                f"{name.split()[0]} {extra[name]['mdd']:.3f} (bound {by_name[name]['bound']:.2f} at level "
                f"{by_name[name]['level']:.4f})"
                for name in open_
            )
            or "none"
        )
        + ".",
        "",
        "Models: "
        + "; ".join(f"{m} {lab} {rem or ''} {rep}".replace("  ", " ") for m, (lab, rem, rep) in study.models.items())
        + ".",
        "Items used per model: "
        + ", ".join(f"{label[k]} {n}" for k, n in looks["items_per_model"].items() if k in label)
        + ".",
        "WikiText-2 perplexity (paper protocol, every 2048-token window of the test split)"
        + (": " if all("ppl_wikitext2" in numbers.get(m, {}) for m in keys) else " measured so far: ")
        + (
            ", ".join(
                f"{m} {numbers[m]['ppl_wikitext2']:.2f} ({len(numbers[m].get('ppl_wikitext2_window_nll') or [])} windows)"  # noqa: E501
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
    lines += answer_lines(run_dir, keys, looks, study)
    return "\n".join(lines) + "\n"


def answer_lines(run_dir: Path, keys: dict[str, str], looks: dict, study: Study) -> list[str]:
    """Issue 47's descriptive lines from the committed per-item rows (evals/<key>.items.parquet): the
    constant-answer floor, each model's majority answers, and each contrast per task and without each
    task (ghostsearch.study.report.answers); [] without per-item rows."""
    from ghostsearch.stats.looks import ContrastRow
    from ghostsearch.study.report import answers

    files = {m: run_dir / "evals" / f"{k}.items.parquet" for m, k in keys.items()}
    if not all(f.exists() for f in files.values()):
        return []
    by_key = {keys[m]: answers.read_answers(f) for m, f in files.items()}
    dense = next((m for m, (_, rem, rep) in study.models.items() if not rem and rep == "none"), None)
    fl = answers.floor_of({m: by_key[keys[m]] for m in keys}, dense=dense)
    n = len({r.item for rows in by_key.values() for r in rows})
    order = None
    if (run_dir / "items.parquet").exists():
        import pyarrow.parquet as pq

        t = pq.read_table(run_dir / "items.parquet").sort_by("rank")
        order = list(zip(t.column("task").to_pylist(), t.column("doc").to_pylist()))
    rows = [ContrastRow.from_dict(c) for c in looks["contrasts"]]
    sens = answers.sensitivities(by_key, rows, order)
    margin = looks.get("margin")
    said = {"within margin": f"within +-{margin:g}" if margin else "within margin", "open": "not decided"}
    verdicts = {c.contrast: said.get(c.verdict, c.verdict) for c in rows}
    return [
        "",
        *answers.floor_lines(fl, n_items=n),
        "",
        *answers.sensitivity_lines(sens, verdicts, looks.get("margin")),
    ]
