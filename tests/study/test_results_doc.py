"""docs/results.md quotes the study's computed output: every claims table in it is what
bench/study_table.py and bench/ghosted_study.py print from the committed Parquet files under
docs/results/ (so a number in a verdict row cannot be edited by hand, or go stale)."""

from __future__ import annotations

import contextlib
import io
from pathlib import Path

import pytest

from ghostsearch.study.report.study_table import study_report
from ghostsearch.study.studies import base as studies
from ghostsearch.study.studies import study2, study3
from ghostsearch.study.studies import study2_cheap as sc
from ghostsearch.study.studies.ghosted import claims_text
from tests.conftest import load_bench

ROOT = Path(__file__).resolve().parents[2]
RUN = ROOT / "docs" / "results" / "study-cpu"
REDO = ROOT / "docs" / "results" / "study-cpu-2" / studies.REDO_NAME  # bench/study2_ppl.py's windows


def _bench(name: str):
    return load_bench(name)


def _table_rows(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.startswith("| ") and line.count("|") >= 6]


@pytest.mark.skipif(not (RUN / "comparison.parquet").exists(), reason="no committed study run")
def test_results_doc_quotes_the_computed_claims():
    doc = (ROOT / "docs" / "results.md").read_text()
    rows = [r for r in _table_rows(study_report(str(RUN))) if " holds " in r or "within noise" in r or "not hold" in r]
    assert rows, "study_table printed no claims"
    missing = [r for r in rows if r not in doc]
    assert not missing, f"{len(missing)} computed claim rows are not in docs/results.md, e.g. {missing[0]}"
    if (RUN / "ghosted.parquet").exists():
        rows = _table_rows(claims_text(RUN / "ghosted"))[2:]
        missing = [r for r in rows if r not in doc]
        assert not missing, f"{len(missing)} Ghosted claim rows are not in docs/results.md, e.g. {missing[0]}"


def test_results_doc_quotes_study_2s_s1():
    """Study 2's S1 section is what bench/study2.py --s1 prints from the committed compare
    (docs/results/study-cpu-2/s1: every cell's removed set, the Jaccard gap, the exact p)."""
    printed = study2.s1(ROOT / "docs" / "results" / "study-cpu-2" / "s1")
    doc = (ROOT / "docs" / "results.md").read_text()
    assert printed in doc
    assert "exact permutation p = 0.0286 over 70 relabellings" in printed


def test_results_doc_quotes_study_2s_cheap_claims():
    """Study 2's S2-S4 section is what bench/study2_cheap.py --report-only prints from the committed
    per-window rows (docs/results/study-cpu-2/cheap) and S1's run: perplexities, differences,
    intervals, TOST and Holm p, verdicts."""
    out = ROOT / "docs" / "results" / "study-cpu-2" / "cheap"
    if not any(out.glob("*.parquet")):
        pytest.skip("no committed S2-S4 rows")
    nums = sc.numbers(out, sc.Design(), ROOT / "docs" / "results" / "study-cpu-2" / "s1", REDO)
    printed = sc.render(nums, sc.Design())
    doc = (ROOT / "docs" / "results.md").read_text()
    assert printed.rstrip("\n") in doc


def test_results_doc_quotes_study_2s_contrasts():
    """Study 2's C1-C7 table is what bench/study2.py --report-only prints from the committed
    per-item rows and looks.json (docs/results/study-cpu-2): each contrast's estimate, its interval at
    the level the sequential Holm rule held it to, the look, the items, the verdict."""

    run = ROOT / "docs" / "results" / "study-cpu-2"
    if not (run / "looks.json").exists():
        pytest.skip("no look of C1-C7 committed")
    keys = _keys(run)
    assert set(keys) == set(study2.MODELS)
    printed = studies.report(run, keys, study2.STUDY2)
    doc = (ROOT / "docs" / "results.md").read_text()
    assert printed.rstrip("\n") in doc


def test_results_doc_quotes_study_3s_contrasts():
    """Study 3's table (docs/results/study-3, bench/study3.py's report with study 2's machinery) is in
    docs/results.md as printed: the looks line, each contrast row up to its verdict, the models, the
    items and the mean accuracies. The perplexity column and line are left out of the check: they
    decide nothing and are measured after the last look (the next run of scripts/study3.sh fills
    them; regenerate the section then, as study 2's was)."""
    run = ROOT / "docs" / "results" / "study-3"
    if not (run / "looks.json").exists():
        pytest.skip("no look of study 3 committed")
    keys = _keys(run)
    s3 = study3.study(study3.pilot_sets(run / "pilot"))
    printed = studies.report(run, keys, s3)
    doc = (ROOT / "docs" / "results.md").read_text()
    # the contrast table's rows (the first cell names the contrast: "C1 Ghosted - none, ...")
    rows = [line for line in printed.splitlines() if line.startswith("| C") and " " in line.split("|")[1].strip()]
    assert len(rows) == 5, rows  # C1-C3, C5, C6 (C4 dropped with G6)
    for row in rows:
        assert row.rsplit("|", 2)[0] in doc, row  # up to and including the verdict
    for start in ("Looks run:", "Models:", "Items used per model:", "Mean accuracy over"):
        (line,) = [x for x in printed.splitlines() if x.startswith(start)]
        assert line in doc, line


def test_results_doc_reads_study_2s_perplexities_as_printed():
    """The prose under C1-C7 quotes the perplexity column of the printed table (rounded): each
    contrast's two perplexities, its log ratio and the interval over windows, and the repair's cut
    in per cent, so the reading cannot drift from the data."""
    import math
    import re

    run = ROOT / "docs" / "results" / "study-cpu-2"
    if not (run / "looks.json").exists():
        pytest.skip("no look of C1-C7 committed")
    keys = _keys(run)
    rows = {}
    for line in studies.report(run, keys, study2.STUDY2).splitlines():
        m = re.match(r"\| (C\d) .*\| ([\d.]+) / ([\d.]+); log ratio ([+-][\d.]+) \[([+-][\d.]+), ([+-][\d.]+)\]", line)
        if m:
            rows[m[1]] = (m[2], m[3], *(float(v) for v in m.groups()[3:]))
    if len(rows) < 7:
        pytest.skip("not every model's perplexity is measured yet")
    doc = " ".join((ROOT / "docs" / "results.md").read_text().split())

    def ci(c: str) -> str:
        return f"{rows[c][2]:.2f} [{rows[c][3]:.2f}, {rows[c][4]:.2f}]"

    c1, c2, c3, c4, c5, c6, c7 = (rows[f"C{i}"] for i in range(1, 8))
    cut = sorted(round(100 * (1 - math.exp(rows[c][2]))) for c in ("C1", "C2"))
    for quote in (
        f"{c1[0]} against {c1[1]} unrepaired on the greedy set (log ratio {c1[2]:.2f}, interval over windows "
        f"[{c1[3]:.2f}, {c1[4]:.2f}])",
        f"{c2[0]} against {c2[1]} on the fastblock set ({ci('C2')})",
        f"below LinearPatch's {c3[1]} ({ci('C3')}) and ReplaceMe's {c4[1]} ({ci('C4')})",
        f"cuts perplexity by {cut[0]}-{cut[1]}%",
        f"perplexity of {float(c5[0]):.0f}, against {float(c5[1]):.0f} for ShortGPT's and {float(c6[1]):.0f} for "
        "Streamline's",
        f"({c7[0]} against {c7[1]}, log ratio {ci('C7')})",
    ):
        assert quote in doc, quote


def test_results_doc_reads_the_saturation_curve_as_printed():
    """The prose after the S2-S4 table quotes its perplexities at 8, 16, 32 and 64 sequences, the
    log-perplexity each doubling buys and the antisymmetric shares, rounded from the committed rows."""
    import math

    out = ROOT / "docs" / "results" / "study-cpu-2" / "cheap"
    if not all((out / f"G{n}.parquet").exists() for n in (8, 16, 32, 64)):
        pytest.skip("the saturation curve has not run")
    models = {m["id"]: m for m in sc.numbers(out, sc.Design(), None)["models"]}
    g = [models[f"G{n}"] for n in (8, 16, 32, 64)]
    wt, c4 = [m["ppl"]["wikitext2"] for m in g], [m["ppl"]["c4"] for m in g]
    gains = [math.log(a / b) for a, b in zip(wt, wt[1:])]
    doc = " ".join((ROOT / "docs" / "results.md").read_text().split())
    for quote in (
        "falls " + " -> ".join(f"{v:.1f}" for v in wt) + " at 8, 16, 32 and 64 C4 sequences",
        "C4 validation's " + " -> ".join(f"{v:.1f}" for v in c4) + ":",
        "(in WikiText-2 log-perplexity " + ", then ".join(f"{v:.2f}" for v in gains) + ")",
        "(" + ", ".join(f"{m['cuts'][0]['antisymmetric_share_w']:.3f}" for m in g) + ")",
    ):
        assert quote in doc, quote


def test_a_report_only_run_changes_nothing_it_reads(tmp_path, monkeypatch):
    """`bench/study2.py --report-only` writes the report and nothing else: config.yaml keeps the
    settings of the last real run (it once rewrote them with each report's overrides) and study.json
    is untouched; on a directory that holds no study it stops with one line, creating nothing."""
    import shutil
    import sys

    import torch

    run = ROOT / "docs" / "results" / "study-cpu-2"
    if not (run / "looks.json").exists():
        pytest.skip("no look of C1-C7 committed")
    out = tmp_path / "study"
    shutil.copytree(run, out, ignore=shutil.ignore_patterns("cheap", "s1"))
    before = {p: (out / p).read_bytes() for p in ("config.yaml", "study.json", "looks.json")}
    cli = _bench("study2")
    config = str(ROOT / "configs" / "study2-smollm2.yaml")
    monkeypatch.setattr(sys, "argv", ["study2.py", "--config", config, "--report-only", f"out={out}", "pool.threads=1"])
    threads = torch.get_num_threads()  # main() sets the process's torch threads: give them back
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            cli.main()
    finally:
        torch.set_num_threads(threads)
    assert {p: (out / p).read_bytes() for p in before} == before
    assert (out / "study2.md").read_text().startswith(studies.report(out, _keys(out), study2.STUDY2).splitlines()[0])
    empty = tmp_path / "nothing"
    monkeypatch.setattr(sys, "argv", ["study2.py", "--config", config, "--report-only", f"out={empty}"])
    try:
        with pytest.raises(SystemExit, match="holds no study yet"):
            cli.main()
    finally:
        torch.set_num_threads(threads)
    assert not empty.exists()


def _keys(run: Path) -> dict:
    import json

    return {m: spec["eval_key"] for m, spec in json.loads((run / "study.json").read_text())["models"].items()}


def _cluster_t(a: list, b: list) -> tuple[float, float, float]:
    """Issue 37, computed here from scratch: the paired t interval over the batch-position sums of two
    committed per-window lists (16 sums then zeros), or over the windows when there are no zeros."""
    import math

    import numpy as np
    from scipy import stats as sps

    a, b = np.array(a, float), np.array(b, float)
    c = int((a != 0).sum())
    n = np.array([len(range(j, len(a), c)) for j in range(c)], float)
    d = a[:c] - b[:c]
    est = d.sum() / n.sum()
    se = math.sqrt(c / (c - 1) * ((d - est * n) ** 2).sum()) / n.sum()
    q = sps.t.ppf(0.975, c - 1)
    return est, est - q * se, est + q * se


def _window_t(a, b, level=0.95):
    """The paired Student t interval of mean(a - b) over windows, written out here (not study2's code)."""
    import math

    from scipy import stats as sps

    d = [x - y for x, y in zip(a, b)]
    n = len(d)
    est = sum(d) / n
    se = math.sqrt(sum((x - est) ** 2 for x in d) / (n - 1) / n)
    q = float(sps.t.ppf(1 - (1 - level) / 2, n - 1))
    return est, est - q * se, est + q * se


def test_study_2s_perplexity_intervals_are_over_windows():
    """Issue 37: the C1-C7 table's WikiText-2 intervals are paired over windows (here: study 2's 16
    batch-position sums as clusters of windows, recomputed independently), centred on the log ratio of
    the committed point perplexities; the withdrawn bootstrap intervals over sums-and-zeros (10-40x too
    wide) are gone from the page, and the dated note withdrawing them is there."""
    import json
    import math
    import re

    run = ROOT / "docs" / "results" / "study-cpu-2"
    if not (run / "looks.json").exists():
        pytest.skip("no look of C1-C7 committed")
    keys = _keys(run)
    ev = {m: json.loads((run / "evals" / f"{k}.json").read_text()) for m, k in keys.items()}
    printed = studies.report(run, keys, study2.STUDY2)
    redo = run / "ppl-windows" / "windows.jsonl"
    rows = [json.loads(x) for x in redo.read_text().splitlines()] if redo.exists() else []
    wiki = sorted((r for r in rows if r["corpus"] == "wikitext2"), key=lambda r: r["window"])
    windows = [r["nll"] for r in wiki] if [r["window"] for r in wiki] == list(range(148)) else []
    for cid, _, left, right in study2.CONTRASTS:
        line = next(x for x in printed.splitlines() if x.startswith(f"| {cid} "))
        m = re.search(r"log ratio ([+-][\d.]+) \[([+-][\d.]+), ([+-][\d.]+)\] over (\d+) windows", line)
        assert m, line
        if windows:  # bench/study2_ppl.py's recomputation, every window: the paired t over windows
            est, lo, hi = _window_t([w[left] for w in windows], [w[right] for w in windows])
            assert m[4] == str(len(windows)), line
        else:  # study 2's 16 batch-position sums as clusters of windows
            est, lo, hi = _cluster_t(ev[left]["ppl_wikitext2_window_nll"], ev[right]["ppl_wikitext2_window_nll"])
        assert [float(v) for v in m.groups()[:3]] == [round(est, 3), round(lo, 3), round(hi, 3)], line
        assert est == pytest.approx(math.log(ev[left]["ppl_wikitext2"] / ev[right]["ppl_wikitext2"]), abs=1e-4)
        assert hi - lo < 0.12, line  # the withdrawn intervals were 0.27-2.0 wide
    doc = " ".join((ROOT / "docs" / "results.md").read_text().split())
    for withdrawn in ("[-0.501, -0.191]", "[-0.656, -0.252]", "[-0.04686, -0.01777]", "interval at its level |"):
        assert withdrawn not in doc.replace("C1 was printed as [-0.501, -0.191]", ""), withdrawn
    assert "*Correction, 2026-12-03 (issue 37): the perplexity intervals" in doc


def test_results_doc_scopes_its_claims():
    """Issue 37's wording: every decided C1-C7 sentence is scoped to these fitted models, the
    saturation curve is called descriptive, the ReplaceMe gap is neither confirmed nor refuted, and
    C5/C6's achieved power and C7's MDD are the printed ones."""
    import re

    run = ROOT / "docs" / "results" / "study-cpu-2"
    if not (run / "looks.json").exists():
        pytest.skip("no look of C1-C7 committed")
    doc = " ".join((ROOT / "docs" / "results.md").read_text().split())
    printed = studies.report(run, _keys(run), study2.STUDY2)
    for phrase in (
        "Ghosted against no repair (C1, C2): for these fitted models,",
        "Ghosted against LinearPatch and ReplaceMe (C3, C4): for these fitted models,",
        "for these removed sets: one set per method",
        "is not decided, for these two sets",
        "which is **descriptive**: one fit per calibration size",
        "where the Ghosted paper's saturation claim concerns accuracy",
        "that part of the ordering is neither confirmed nor refuted here",
        "ReplaceMe against LinearPatch was not a contrast and is not tested",
    ):
        assert phrase in doc, phrase
    power = dict(re.findall(r"(C\d) (\d\.\d\d) \(s\.e\. ", printed))
    assert f"was {power['C5']} and {power['C6']}, not the planned 0.8" in doc
    mdd = re.search(r"C7 (\d\.\d{3}) \(bound", printed)[1]
    assert f"C7's minimum detectable difference (80% power, its level 0.01) was {mdd}" in doc


def test_results_doc_quotes_the_floor_and_single_tasks():
    """Issue 47: both studies' printed blocks carry the constant-answer floor, the majority answers and
    each contrast per task and without each task (study 2's whole block is guarded above; study 3's
    lines here), and the prose quotes them as computed from the committed per-item rows: the floors,
    C1's and C6's BoolQ shares and their values without BoolQ, C5's deficit elsewhere, C2 at alpha/6,
    the power at alpha/5, and ReplaceMe's wording."""
    import json
    import re

    from ghostsearch.core.eval_numbers import read_item_rows
    from ghostsearch.stats import inference as stats
    from ghostsearch.stats.looks import ContrastRow
    from ghostsearch.study.report import answers

    doc = (ROOT / "docs" / "results.md").read_text()
    flat = " ".join(doc.split())
    floors = {}
    for name in ("study-cpu-2", "study-3"):
        run = ROOT / "docs" / "results" / name
        if not (run / "looks.json").exists():
            pytest.skip(f"{name} not committed")
        keys = _keys(run)
        rows = {m: read_item_rows(run / "evals" / f"{k}.items.parquet") for m, k in keys.items()}
        floors[name] = answers.floor_of(rows, dense="M0" if name == "study-cpu-2" else "G0").macro_floor
    assert f"**{floors['study-cpu-2']:.3f}** macro" in flat and f"**{floors['study-3']:.3f}** macro" in flat
    assert "0.393 macro on study 2's items, 0.398 on study 3's" in flat  # the summary's, recomputed above
    assert (round(floors["study-cpu-2"], 3), round(floors["study-3"], 3)) == (0.393, 0.398)

    run = ROOT / "docs" / "results" / "study-3"
    keys = _keys(run)
    printed = studies.report(run, keys, study3.study(study3.pilot_sets(run / "pilot")))
    tail = printed.split("Mean accuracy over the items each model used", 1)[1].split("\n", 1)[1]
    for line in tail.splitlines():
        assert line in doc, line
    looks = json.loads((run / "looks.json").read_text())
    rows = [ContrastRow.from_dict(c) for c in looks["contrasts"]]
    by_key = {k: read_item_rows(run / "evals" / f"{k}.items.parquet") for k in set(keys.values())}
    sens = {c.split()[0]: s for c, s in answers.sensitivities(by_key, rows).items()}
    c1, c5, c6 = sens["C1"], sens["C5"], sens["C6"]
    for quote in (
        f"C1 is {c1.contribution['boolq']:+.3f} of BoolQ and {c1.left_out['boolq'].estimate:+.3f} "
        f"(z {c1.left_out['boolq'].z:.2f}) on the other seven tasks",
        f"C6 is {c6.contribution['boolq']:+.3f} of BoolQ and {c6.left_out['boolq'].estimate:+.3f} "
        f"(z {c6.left_out['boolq'].z:+.2f}) elsewhere",
        f"({c5.left_out['boolq'].estimate:+.3f}, z {c5.left_out['boolq'].z:+.2f} without BoolQ; ARC-Easy "
        f"{c5.by_task['arc_easy']:+.3f}, PIQA {c5.by_task['piqa']:+.3f})",
    ):
        assert quote in flat, quote
    fr = [n / looks["looks"][-1] for n in looks["looks"]]
    c2 = next(r for r in rows if r.contrast.startswith("C2"))
    b6 = stats.spending_bounds(fr, 0.05 / 6, looks["spending"])[c2.decided_at_look - 1]
    assert c2.estimate + b6 * c2.se > looks["margin"]  # not within at alpha/6
    assert f"it would end at {c2.estimate + b6 * c2.se:+.4f} and not be decided" in flat
    line = printed.split("Power at 0.03 at alpha / 5", 1)[1].split("\n")[0]
    power = [float(p) for p in re.findall(r"C\d (\d\.\d\d)", line)]
    assert f"was {min(power):.2f}-{max(power):.2f} at alpha/5" in flat
    summary = flat.split("## Pre-registration: study 2", 1)[0]
    assert "ReplaceMe cannot be folded into Gemma-3" in summary and "cannot be fitted" not in summary
