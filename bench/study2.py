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
from dataclasses import dataclass
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


@dataclass(frozen=True)
class Study:
    """A pre-registered study of fixed models (this file's study 2, bench/study3.py's study 3): its
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


STUDY2 = Study("study 2 (issue 24)", "docs/results.md, 'Pre-registration: study 2' (2026-12-01)", MODELS, CONTRASTS)
NUMBERS = ("no", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten")


# ---------------------------------------------------------------- perplexity over windows
RUN = Path(__file__).resolve().parents[1] / "docs/results/study-cpu-2"
REDO = RUN / "ppl-windows"  # bench/study2_ppl.py: the per-window NLL recomputed (issue 37)


def window_clusters(values) -> tuple[list[float], list[int]]:
    """A committed per-window NLL list as (cluster sums, windows per cluster). Written before the fix of
    ``evaluation_native.window_items`` (issue 37), such a list holds B batch-position sums (slot j: the sum
    of the mean NLLs of windows j, j + B, j + 2B, ...) followed by zeros; a list without zeros holds each
    window's own value (B clusters of one). A real window's mean NLL is never exactly 0."""
    v = [float(x) for x in values]
    b = next((i for i, x in enumerate(v) if x == 0.0), len(v))
    if any(x != 0.0 for x in v[b:]):
        raise ValueError("a per-window list with zeros between non-zero values is neither kind")
    return v[:b], [len(range(j, len(v), b)) for j in range(b)]


def redone_windows(model: str, corpus: str = "wikitext2", redo: Path = REDO) -> list[float] | None:
    """A model's per-window mean NLL from bench/study2_ppl.py, when every window of the corpus is there."""
    f = redo / "windows.jsonl"
    if not f.exists():
        return None
    rows = [json.loads(line) for line in f.read_text().splitlines() if line.strip()]
    got = {r["window"]: r["nll"][model] for r in rows if r["corpus"] == corpus and model in r["nll"]}
    n = {"wikitext2": 148, "c4": 47}[corpus]
    return [got[i] for i in range(n)] if len(got) == n and set(got) == set(range(n)) else None


def cluster_diff(a_sums, b_sums, sizes, level: float = 0.95) -> dict:
    """Left - right in mean NLL per window (log-perplexity; every window has the same tokens), paired
    over the same clusters of windows: the ratio estimate sum(D_j) / sum(n_j) and its linearised
    standard error sqrt(C / (C - 1) * sum((D_j - est n_j)^2)) / sum(n_j), D_j = a_j - b_j, with a
    Student t interval on C - 1 degrees of freedom. With clusters of one window each this is the
    paired t interval over windows; with study 2's 16 batch-position sums it is a cluster interval
    over 16 systematic samples of the windows (tests/report/test_study2_ppl.py: its coverage)."""
    import numpy as np
    from scipy import stats as sps

    a, b, n = np.asarray(a_sums, float), np.asarray(b_sums, float), np.asarray(sizes, float)
    if not len(a) == len(b) == len(n) or len(n) < 2:
        raise ValueError("paired clusters of the same windows, two at least")
    d = a - b
    est = float(d.sum() / n.sum())
    c = len(n)
    se = float(math.sqrt(c / (c - 1) * ((d - est * n) ** 2).sum()) / n.sum())
    q = float(sps.t.ppf(1 - (1 - level) / 2, c - 1))
    return {
        "estimate": est,
        "se": se,
        "df": c - 1,
        "lo": est - q * se,
        "hi": est + q * se,
        "clusters": c,
        "windows": int(n.sum()),
    }


BLOCK = 8  # adjacent windows per block: paired differences of neighbouring windows correlate (lag-1 r ~ 0.5)


def adjacent_blocks(values, size: int = BLOCK) -> tuple[list[float], list[int]]:
    """Per-window values as (sums over blocks of ``size`` adjacent windows, windows per block); the
    last block takes the remainder. Clusters for :func:`cluster_diff` that keep neighbouring windows'
    correlation inside a cluster (issue 47)."""
    v = [float(x) for x in values]
    starts = range(0, len(v), size)
    return [sum(v[i : i + size]) for i in starts], [len(v[i : i + size]) for i in starts]


def lag1(values) -> float:
    """The lag-1 autocorrelation of a series (e.g. the paired per-window differences)."""
    import numpy as np

    x = np.asarray(values, float) - float(np.mean(values))
    return float((x[1:] * x[:-1]).sum() / (x * x).sum())


def ppl_contrast(numbers: dict, left: str, right: str, redo: Path | None = None) -> dict | None:
    """The WikiText-2 log-perplexity difference of two models, paired over windows: over each window
    (bench/study2_ppl.py's recomputation, when it covers both models) or else over the committed
    batch-position sums as clusters."""
    wl, wr = (redone_windows(m, redo=redo) if redo is not None else None for m in (left, right))
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
    cfg, held_out, study: Study = STUDY2
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


def run_study(cfg, study: Study, keys, jobs, pairs, data_plan, commit: bool = False, extra: dict | None = None) -> None:
    """A study's run: RUN_DIR (``out``) gets config.yaml and study.json (the pre-registration,
    ``extra``, the models with their eval keys, the contrasts, the data plan), then the models are
    evaluated look by look (compare.evaluate_finalists with the contrasts); ``commit``: RUN_DIR is
    committed after every share of models and every look."""
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
        if commit:
            benchenv.commit_dir(
                run_dir, f"{study.label}: look {j + 1} ({n} items per model) evaluated; data under {run_dir}"
            )

    def on_share(share: list[str]) -> None:
        done = ", ".join(names.get(k, k) for k in share)
        print(f"saved: {done}, {time.monotonic() - t0:.0f} s", flush=True)
        if commit:
            benchenv.commit_dir(run_dir, f"{study.label}: {done} evaluated (rows saved); data under {run_dir}")

    evaluate_finalists(
        cfg, run_dir, jobs, data_plan.held_out, progress=True, contrasts=pairs, on_look=on_look, on_share=on_share
    )


def repeated_p(z_by_look, fractions, kind: str = "obrien-fleming") -> float:
    """The repeated p-value of a group-sequential test (Jennison & Turnbull 9.1): the smallest alpha at
    which the contrast's |z| crossed that alpha's spending boundary at some look run (a look's boundary
    falls as alpha grows; bisection on log alpha)."""
    from ghostsearch.stats import inference as stats

    best = 1.0
    for k, z in enumerate(z_by_look):
        if not math.isfinite(z):
            continue
        lo, hi = math.log(1e-12), 0.0  # log alpha
        if stats.spending_bounds(fractions, math.exp(hi) * (1 - 1e-9), kind, n_grid=200)[k] > abs(z):
            continue
        for _ in range(40):
            mid = 0.5 * (lo + hi)
            if stats.spending_bounds(fractions, math.exp(mid), kind, n_grid=200)[k] <= abs(z):
                hi = mid
            else:
                lo = mid
        best = min(best, math.exp(hi))
    return best


def fmt_p(p: float) -> str:
    return "-" if math.isnan(p) else f"{p:.4f}" if p >= 1e-4 else f"{p:.1e}"


def power_at(delta: float, se: float, bound: float) -> float:
    """Power of the last look's test to find a true difference ``delta``: Phi(delta / se - bound)
    (the far tail and the earlier looks left out: a close approximation at O'Brien-Fleming's bounds)."""
    from ghostsearch.stats import inference as stats

    return float(stats.norm_cdf(delta / se - bound))


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


def report(run_dir: Path, keys: dict[str, str], study: Study = STUDY2) -> str:
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
        w = ppl_contrast(numbers, left, right, run_dir / REDO.name)  # study 2's recomputation, if in run_dir
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
    lines += answer_lines(run_dir, keys, looks, study)
    return "\n".join(lines) + "\n"


def answer_lines(run_dir: Path, keys: dict[str, str], looks: dict, study: Study = STUDY2) -> list[str]:
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


def s1_test(run_dir: Path):
    """Claim S1's data and test: greedy's k = 8 sets under both objectives x calibration seeds
    (configs/study2-s1.yaml), sorted (objective, seed, removed); statistic: mean Jaccard of
    same-objective pairs minus cross-objective pairs; exact permutation test over every way to
    relabel the sets' objectives (70 for 4 + 4), one-sided. Returns (rows, stats.PermutationResult)."""
    import itertools

    import numpy as np

    from ghostsearch.rundir.layout import result_cells
    from ghostsearch.stats import inference as stats

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

    from ghostsearch.config import load_config
    from ghostsearch.rundir.dataplan import announce, plan

    cfg = load_config(args.config, args.overrides)
    torch.set_num_threads(max(1, cfg.pool.threads))
    run_dir = Path(cfg.out)
    if args.report_only:  # reads only the run directory: no data is needed (a clone without ../shared reports too)
        if not (run_dir / "study.json").exists():
            raise SystemExit(f"study2: {run_dir} holds no study yet: run it without --report-only first")
        models = json.loads((run_dir / "study.json").read_text())["models"]
        keys = {m: spec["eval_key"] for m, spec in models.items()}
    else:  # a report changes nothing it reads: config.yaml records the settings of the last real run
        data_plan = plan(cfg, ["perplexity"], evaluate=True, repair=True)
        announce(data_plan)
        keys, jobs, pairs = design(cfg, data_plan.held_out)
        run_study(cfg, STUDY2, keys, jobs, pairs, data_plan, args.commit)
    text = report(run_dir, keys)
    (run_dir / "study2.md").write_text(text)
    print(text)
    if args.commit:
        benchenv.commit_dir(run_dir, f"study 2 (issue 24): report {run_dir}/study2.md")


if __name__ == "__main__":
    main()
