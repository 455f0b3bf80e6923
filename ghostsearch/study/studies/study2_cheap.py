"""Study 2's cheap claims S2-S4 (docs/results.md, "Pre-registration: study 2", 2026-12-01, and its
amendments): Ghosted's calibration saturation (S2), C4 against WikiText-2 as its calibration (S3)
and the antisymmetric share of W* = I + M (S4), measured in held-out WikiText-2 test and C4
validation perplexity: the design, running its models, the tests over windows, the Holm family with
S1 and the table. bench/study2_cheap.py is its command line; its docstring states the outputs and
the cost.

Choices made here, where the pre-registration is silent (fixed before any of these models ran):

* C4 validation's windows: 256 tokens, every non-overlapping one (47 windows of its 12,054
  SmolLM2 tokens). The paper protocol's 2048-token windows would leave 5 windows, too few for an
  interval or a test over windows; 256 is also the repairs' calibration length. WikiText-2 test
  keeps the paper protocol (``eval.protocol=paper``: 148 windows of 2048 tokens).
* S2 is tested on both held-out corpora, like S3: its p is the larger of the two corpora's TOST p
  (an intersection-union test: "within" only where both are within).
* The two one-sided tests use the study's paired z statistic over windows
  (``stats.paired_test``: the mean of the per-window differences in mean NLL, its standard error
  from their sample variance): p = max(Phi((d - delta) / se), Phi((-delta - d) / se)), delta =
  log 1.01 (the margin is on the log-perplexity scale: a ratio of perplexities within 1.01).
  The 95% intervals are the paired percentile bootstrap over windows (``stats.paired_diff_ci``,
  2,000 resamples, seed 0; the same resample for both models), as the pre-registration's
  perplexity section says. Every window has the same number of tokens, so the mean over windows
  of their mean NLL is the corpus's log-perplexity. Amended since (issue 37; what the code below does and the
  table states): the intervals and the TOST are Student t over the windows (:func:`window_diff`,
  :func:`tost_t`), or over 16 clusters of windows where only study 2's batch-position sums exist.
* The family: Holm over S1, S2, S3 (m = 3); nothing is decided while S2 or S3 has not run.
  A claim is decided ("S1: the objectives shape the set", "S2/S3: within +-1%") when its Holm-
  adjusted p is at most 0.05, else "not decided". S4 and the 8- and 16-sequence models'
  differences to 32 are reported with their intervals, not tested.
* Order of work: the models S2 and S3 decide on first (G32, G64, W32), then G8 and G16, so an
  interrupted run has decided what it can."""

from __future__ import annotations

import dataclasses
import json
import math
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ghostsearch.stats import inference as stats
from ghostsearch.stats.windows import cluster_diff, window_clusters
from ghostsearch.study.studies.base import redone_windows
from ghostsearch.study.studies.study2 import s1_test

if TYPE_CHECKING:
    from ghostsearch.data.dataplan import DataPlan

DELTA = math.log(1.01)  # the pre-registered margin: +-1% in perplexity, on the log scale
N_BOOT, BOOT_SEED = 2000, 0  # the windows' paired bootstrap (stats.paired_diff_ci)


@dataclass(frozen=True)
class Model:
    id: str
    dataset: str  # the repair's calibration: c4 (train) or wikitext2 (the tokenized validation split)
    n_seq: int  # calibration sequences (of Design.seq_len tokens)
    method: str = "ghosted"
    variant: str = "dense"

    def label(self, seq_len: int) -> str:
        name = {"c4": "C4 train", "wikitext2": "WikiText-2 validation (tokenized)"}.get(self.dataset, self.dataset)
        return f"{self.method} ({self.variant}), {name} {self.n_seq} x {seq_len}"


@dataclass(frozen=True)
class Corpus:
    name: str  # an evaluate.PPL_SPLIT corpus: wikitext2 (test), c4 (validation)
    window: int | None  # tokens per window; None: the paper protocol (min(2048, the model's context))
    max_windows: int | None  # None: every window


@dataclass(frozen=True)
class Claim:
    id: str
    left: str  # model ids: left - right
    right: str
    question: str
    tested: bool = True  # False: reported with its interval only


@dataclass(frozen=True)
class Design:
    removed: tuple[int, ...] = tuple(range(12, 20))  # the fastblock set (M3-M6 of study 2)
    seq_len: int = 256  # calibration tokens per sequence
    seed: int = 0  # calibration seed
    models: tuple[Model, ...] = (
        Model("G32", "c4", 32),
        Model("G64", "c4", 64),
        Model("W32", "wikitext2", 32),
        Model("G8", "c4", 8),
        Model("G16", "c4", 16),
    )
    corpora: tuple[Corpus, ...] = (Corpus("wikitext2", None, None), Corpus("c4", 256, None))
    claims: tuple[Claim, ...] = (
        Claim("S2", "G64", "G32", "Ghosted's calibration saturation: 64 minus 32 C4 sequences"),
        Claim("S3", "W32", "G32", "calibration text: WikiText-2 validation minus C4 train (32 x 256)"),
        Claim("S2'", "G8", "G32", "8 minus 32 C4 sequences", tested=False),
        Claim("S2'", "G16", "G32", "16 minus 32 C4 sequences", tested=False),
    )


CORPUS_NAME = {"wikitext2": "WikiText-2 test", "c4": "C4 validation"}


def s1_p(run_dir: Path) -> float:
    """S1's exact permutation p from its run's result.json (``study2.s1_test``)."""
    return float(s1_test(run_dir)[1].p)


# ---------------------------------------------------------------- running the models
def model_config(cfg, design: Design, m: Model):
    """The study's config with this model's repair: method, variant, calibration data and size, seed."""
    rec = dataclasses.replace(
        cfg.recovery, method=m.method, variant=m.variant, dataset=m.dataset, n_seq=m.n_seq, seq_len=design.seq_len
    )
    return dataclasses.replace(cfg, recovery=rec, calibration=dataclasses.replace(cfg.calibration, seed=design.seed))


def spec(cfg, design: Design, m: Model) -> dict:
    """Everything a model's numbers depend on: a rerun under other settings is refused."""
    return {
        "model": cfg.model,
        "dtype": cfg.dtype,
        "removed": list(design.removed),
        "method": m.method,
        "variant": m.variant,
        "ridge": cfg.recovery.ridge,
        "calibration": m.dataset,
        "n_seq": m.n_seq,
        "seq_len": design.seq_len,
        "seed": design.seed,
        "corpora": [dataclasses.asdict(c) for c in design.corpora],
    }


def corpus_eval(cfg, c: Corpus):
    """cfg.eval set to evaluate one corpus: the paper protocol, or windows of ``c.window`` tokens."""
    if c.window is None:
        return dataclasses.replace(cfg.eval, perplexity=[c.name], protocol="paper")
    return dataclasses.replace(
        cfg.eval, perplexity=[c.name], protocol="quick", ppl_seq_len=c.window, ppl_max_seq=c.max_windows
    )


def check_data(cfg, design: Design) -> list[DataPlan]:
    """Each calibration checked disjoint from the held-out corpora (``dataplan.plan``); held_out
    must come out empty (C4 train and WikiText-2 validation are not evaluation sets)."""
    from ghostsearch.data.dataplan import plan

    plans = []
    for ds in dict.fromkeys(m.dataset for m in design.models):
        m = next(x for x in design.models if x.dataset == ds)
        c = model_config(cfg, design, m)
        c = dataclasses.replace(
            c, eval=dataclasses.replace(c.eval, tasks=[], perplexity=[x.name for x in design.corpora])
        )
        p = plan(c, [], evaluate=True, repair=True)
        if p.held_out:
            raise SystemExit(f"calibration {ds} draws from evaluation sets {p.held_out}: not this design")
        plans.append(p)
    return plans


def evaluate_group(model, tok, cfg, design: Design, group: list[Model]) -> list[tuple[list[dict], dict]]:
    """Fit each model's repair, then evaluate the group together on every held-out corpus (one
    ``evaluate.perplexity_finalists`` call a corpus: one dense pass over its windows, then every model
    from its first removed block): per model (per-window rows, summary)."""
    from ghostsearch.evaluation.evaluate import perplexity_finalists
    from ghostsearch.recovery.repair import fit

    ops, fit_s = [], []
    for m in group:
        t0 = time.monotonic()
        ops.append(
            None
            if m.method == "none"
            else fit(model, tok, list(design.removed), model_config(cfg, design, m), m.method)
        )
        fit_s.append(time.monotonic() - t0)
    finalists = [(tuple(design.removed), o) for o in ops]
    results: list[tuple[list[dict], dict[str, Any]]] = [
        ([], {"ppl": {}, "windows": {}, "seconds": {"fit": f}}) for f in fit_s
    ]
    for c in design.corpora:
        t1 = time.monotonic()
        outs = perplexity_finalists(model, tok, finalists, corpus_eval(cfg, c), cfg.data_dir)
        seconds = time.monotonic() - t1
        tokens = window_tokens(model, c)
        for m, out, (rows, summary) in zip(group, outs, results):
            nll = out.window_nll[c.name]
            rows += [
                {
                    "model": m.id,
                    "corpus": c.name,
                    "window": i,
                    "tokens": tokens,
                    "nll": float(v),
                    "nll_sum": float(v) * tokens,
                }
                for i, v in enumerate(nll)
            ]
            summary["ppl"][c.name], summary["windows"][c.name] = out.perplexity[c.name], len(nll)
            summary["seconds"][c.name] = seconds
    for m, o, (_, summary) in zip(group, ops, results):
        summary["seconds"]["total"] = summary["seconds"]["fit"] + sum(
            summary["seconds"][c.name] for c in design.corpora
        )
        cuts = [
            {
                k: r[k]
                for k in (
                    "cut",
                    "tokens",
                    "alignment_before",
                    "alignment_after",
                    "antisymmetric_share",
                    "antisymmetric_share_w",
                )
                if k in r
            }
            for r in (o.report if o is not None else [])
        ]
        summary.update(
            {
                "id": m.id,
                "label": m.label(design.seq_len),
                "spec": spec(cfg, design, m),
                "cuts": cuts,
                "evaluated_with": [x.id for x in group],
            }
        )  # the seconds of a corpus are the group's
    return results


def window_tokens(model, c: Corpus) -> int:
    """Tokens each window predicts (its length - 1), as evaluate.perplexity_finalists counts them."""
    from ghostsearch.evaluation.evaluate import protocol_windows

    seq_len, _ = protocol_windows(model, "paper" if c.window is None else "quick", c.window or 0, c.max_windows)
    return seq_len - 1


def write_rows(rows: list[dict], path: Path) -> None:
    import pyarrow as pa

    from ghostsearch.core.io import write_parquet_atomic

    schema = pa.schema(
        [
            ("model", pa.string()),
            ("corpus", pa.string()),
            ("window", pa.int64()),
            ("tokens", pa.int64()),
            ("nll", pa.float64()),
            ("nll_sum", pa.float64()),
        ]
    )
    write_parquet_atomic(path, pa.Table.from_pylist(rows, schema=schema))


def finished(out: Path, cfg, design: Design, m: Model) -> bool:
    """Whether ``m`` has run under these settings (its Parquet, written last, is there); one that
    ran under other settings stops the run rather than mixing numbers."""
    if not (out / f"{m.id}.parquet").exists():
        return False
    old = json.loads((out / f"{m.id}.json").read_text())["spec"]
    if old != spec(cfg, design, m):
        raise SystemExit(
            f"{out / m.id}.json was written under other settings ({old}); use another --out or "
            f"remove {m.id}.json and {m.id}.parquet to evaluate it again"
        )
    return True


def run(model, tok, cfg, out: Path, design: Design = Design(), on_model=None, share: int = 1) -> list[str]:
    """Evaluate every model of ``design`` not yet in ``out``, ``share`` at a time (in the design's
    order; 1: each model saved as soon as it ends); returns the ids evaluated now. ``on_model(id,
    summary)`` is called after each model's files are written."""
    from ghostsearch.core.io import write_json_atomic

    out.mkdir(parents=True, exist_ok=True)
    todo = []
    for m in design.models:
        if finished(out, cfg, design, m):
            print(f"{m.id}: already evaluated, skipped", flush=True)
        else:
            todo.append(m)
    done = []
    for i in range(0, len(todo), max(1, share)):
        group = todo[i : i + max(1, share)]
        for m, (rows, summary) in zip(group, evaluate_group(model, tok, cfg, design, group)):
            write_json_atomic(out / f"{m.id}.json", summary)
            write_rows(rows, out / f"{m.id}.parquet")  # last: the model counts as finished once this exists
            s = summary["seconds"]
            print(
                f"{m.id} ({summary['label']}): "
                + ", ".join(
                    f"{CORPUS_NAME.get(c, c)} ppl {summary['ppl'][c]:.3f} over {summary['windows'][c]} windows in "
                    f"{s[c]:.0f} s"
                    for c in summary["ppl"]
                )
                + f"; fit {s['fit']:.0f} s; {s['total']:.0f} s in all"
                + (
                    f" (evaluated together with {', '.join(x.id for x in group if x is not m)})"
                    if len(group) > 1
                    else ""
                ),
                flush=True,
            )
            done.append(m.id)
            if on_model is not None:
                on_model(m.id, summary)
    return done


# ---------------------------------------------------------------- the table
def load_rows(out: Path, design: Design) -> dict[str, dict[str, list[dict]]]:
    """{model id: {corpus: rows in window order}} of every finished model."""
    import pyarrow.parquet as pq

    res: dict[str, dict[str, list[dict]]] = {}
    for m in design.models:
        f = out / f"{m.id}.parquet"
        if f.exists():
            for r in sorted(pq.read_table(f).to_pylist(), key=lambda r: (r["corpus"], r["window"])):
                res.setdefault(m.id, {}).setdefault(r["corpus"], []).append(r)
    return res


def contrast(rows: dict, left: str, right: str, corpus: str, redo: Path | None = None) -> dict | None:
    """The paired difference in log-perplexity, left - right, over the same windows: estimate, 95%
    t interval, TOST; None while either model has not run."""
    a, b = rows.get(left, {}).get(corpus), rows.get(right, {}).get(corpus)
    if not a or not b:
        return None
    if [(r["window"], r["tokens"]) for r in a] != [(r["window"], r["tokens"]) for r in b]:
        raise SystemExit(f"{left} and {right} were evaluated on different {corpus} windows; they cannot be paired")
    w = window_diff(a, b, left, right, corpus, redo)
    return {**w, **tost_t(w)}


def window_diff(a: list[dict], b: list[dict], left: str, right: str, corpus: str, redo: Path | None = None) -> dict:
    """Left - right in log-perplexity, paired over windows (``stats.windows.cluster_diff``): over each
    window where bench/study2_ppl.py has recomputed both models' windows (``redo``: its directory,
    study 2's RUN_DIR/ppl-windows), else over the committed rows, which
    were written before the fix of ``evaluation_native.window_items`` (issue 37) and hold 16
    batch-position sums (clusters of windows) followed by zeros."""
    names = {"G32": "M4"} if corpus == "wikitext2" else {}  # study 2's name of the same model
    wl, wr = (redone_windows(names.get(m, m), redo, corpus) if redo else None for m in (left, right))
    if wl and wr and len(wl) == len(a):
        return {**cluster_diff(wl, wr, [1] * len(wl)), "kind": "windows"}
    (sl, nl), (sr, nr) = window_clusters([r["nll"] for r in a]), window_clusters([r["nll"] for r in b])
    if nl != nr:
        raise SystemExit(f"{left} and {right} were summed over different clusters of {corpus} windows")
    return {**cluster_diff(sl, sr, nl), "kind": "windows" if set(nl) == {1} else "clusters"}


def tost_t(w: dict, delta: float = DELTA) -> dict:
    """Two one-sided tests of |d| < delta from ``window_diff``'s estimate, s.e. and degrees of
    freedom (Student t; ``stats.inference.tost``): p_low tests H0 d <= -delta, p_high H0 d >= delta;
    p is the larger."""

    t = stats.tost(w["estimate"], w["se"], delta, df=w["df"])
    return {"p_low": t.p_low, "p_high": t.p_high, "p": t.p}


def log_ppl(rs: list[dict]) -> float:
    return sum(r["nll_sum"] for r in rs) / sum(r["tokens"] for r in rs)


def numbers(out: Path, design: Design, s1_dir: Path | None, redo: Path | None = None) -> dict:
    """Every number of the table, computed from the per-window rows (and S1's run; ``redo``: see
    :func:`window_diff`)."""

    rows = load_rows(out, design)
    summaries = {m.id: json.loads((out / f"{m.id}.json").read_text()) for m in design.models if m.id in rows}
    models = []
    for m in design.models:
        s = summaries.get(m.id)
        models.append(
            {
                "id": m.id,
                "label": m.label(design.seq_len),
                "run": s is not None,
                "ppl": {c.name: math.exp(log_ppl(rows[m.id][c.name])) for c in design.corpora} if s else {},
                "windows": {c.name: len(rows[m.id][c.name]) for c in design.corpora} if s else {},
                "cuts": s["cuts"] if s else [],
                "seconds": s["seconds"]["total"] if s else None,
            }
        )
    claims: list[dict[str, Any]] = []
    for cl in design.claims:
        per = {c.name: contrast(rows, cl.left, cl.right, c.name, redo) for c in design.corpora}
        done = all(v is not None for v in per.values())
        claims.append(
            {
                "id": cl.id,
                "left": cl.left,
                "right": cl.right,
                "question": cl.question,
                "tested": cl.tested,
                "corpora": per,
                "p": max(v["p"] for v in per.values() if v is not None) if done and cl.tested else math.nan,
            }
        )
    s1 = s1_p(s1_dir) if s1_dir is not None and (s1_dir / "result.json").exists() else math.nan
    family: list[tuple[str, float]] = [("S1", s1)] + [(c["id"], c["p"]) for c in claims if c["tested"]]
    complete = not any(math.isnan(p) for _, p in family)
    adj = stats.holm([p for _, p in family]) if complete else [math.nan] * len(family)
    decisions = {
        cid: {"p": p, "p_holm": float(a), "decided": bool(complete and a <= stats.ALPHA)}
        for (cid, p), a in zip(family, adj)
    }
    return {
        "delta": DELTA,
        "alpha": stats.ALPHA,
        "n_boot": N_BOOT,
        "boot_seed": BOOT_SEED,
        "removed": list(design.removed),
        "models": models,
        "claims": claims,
        "family": decisions,
        "complete": complete,
    }


VERDICT = {"S1": "the objectives shape the removed set", "S2": "saturated: within +-1%", "S3": "within +-1%"}


def fmt_p(p: float) -> str:
    return "-" if math.isnan(p) else f"{p:.4f}" if p >= 1e-4 else f"{p:.1e}"


def render(nums: dict, design: Design) -> str:
    corpora = [c.name for c in design.corpora]
    win = {c.name: "paper protocol" if c.window is None else f"{c.window}-token windows" for c in design.corpora}
    lines = [
        f"Fastblock set {' '.join(map(str, nums['removed']))} repaired by Ghosted; held out: "
        + ", ".join(f"{CORPUS_NAME.get(c, c)} ({win[c]})" for c in corpora)
        + f". Margin +-1% in perplexity (delta = log 1.01 = {nums['delta']:.5f} in log-perplexity); "
        "differences are left - right in log-perplexity (mean NLL per token), paired over windows, 95% "
        "Student t intervals over the windows, or over 16 clusters of windows where only study 2's "
        "batch-position sums exist (issue 37; the column says which).",
        "",
        "| model | repair calibration | "
        + " | ".join(f"{CORPUS_NAME.get(c, c)} ppl (windows)" for c in corpora)
        + " | S4: antisymmetric share of W* = I + M, per cut | seconds |",
        "|---|---|" + "---|" * len(corpora) + "---|---|",
    ]
    for m in nums["models"]:
        if not m["run"]:
            lines.append(f"| {m['id']} | {m['label']} | " + " | ".join("not run" for _ in corpora) + " | - | - |")
            continue
        shares = (
            ", ".join(f"{a}-{b}: {c['antisymmetric_share_w']:.4f}" for c in m["cuts"] for a, b in [c["cut"]]) or "-"
        )
        lines.append(
            f"| {m['id']} | {m['label']} | "
            + " | ".join(f"{m['ppl'][c]:.3f} ({m['windows'][c]})" for c in corpora)
            + f" | {shares} | {m['seconds']:.0f} |"
        )
    lines += [
        "",
        "| claim | left - right | held out | windows (clusters) | difference | 95% interval | TOST p | claim p | "
        "Holm-adjusted p | verdict |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    fam = nums["family"]
    s1 = fam["S1"]
    lines.append(
        f"| S1 objectives shape the removed set | - | - | - | - | - | - | {fmt_p(s1['p'])} | "
        f"{fmt_p(s1['p_holm'])} | {verdict('S1', fam, nums['complete'])} |"
    )
    for cl in nums["claims"]:
        for c in corpora:
            v = cl["corpora"][c]
            head = f"| {cl['id']} {cl['question']} | {cl['left']} - {cl['right']} | {CORPUS_NAME.get(c, c)} |"
            if v is None:
                lines.append(head + " - | not run | - | - | - | - | pending |")
                continue
            tail = (
                f" {fmt_p(cl['p'])} | {fmt_p(fam[cl['id']]['p_holm'])} | {verdict(cl['id'], fam, nums['complete'])} |"
                if cl["tested"]
                else " - | - | reported |"
            )
            lines.append(
                head + f" {v['windows']}{'' if v['kind'] == 'windows' else ' (' + str(v['clusters']) + ')'} | "
                f"{v['estimate']:+.5f} | [{v['lo']:+.5f}, {v['hi']:+.5f}] | "
                f"{fmt_p(v['p']) if cl['tested'] else '-'} |" + tail
            )
    lines += [
        "",
        f"Rule: Holm at {nums['alpha']} over S1-S3 (S1's exact permutation p from its run; S2 and S3: the "
        "larger of the two held-out corpora's TOST p, each the larger of two one-sided paired t tests over "
        "windows, or clusters of windows, against +-delta). A claim is decided when its Holm-adjusted p is at most "
        f"{nums['alpha']}; nothing is decided until S2 and S3 have run. S4 and the S2' rows are reported only.",
    ]
    return "\n".join(lines) + "\n"


def verdict(cid: str, fam: dict, complete: bool) -> str:
    if not complete:
        return "pending (S2 and S3 not all run)"
    return VERDICT[cid] if fam[cid]["decided"] else "not decided"


def report(out: Path, design: Design = Design(), s1_dir: Path | None = None, redo: Path | None = None) -> str:
    """Writes out/cheap.md and out/cheap.json from what has run; returns the table."""
    from ghostsearch.core.io import write_json_atomic

    nums = numbers(out, design, s1_dir, redo)
    text = render(nums, design)
    (out / "cheap.md").write_text(text)
    write_json_atomic(out / "cheap.json", nums)
    return text
