"""ghostsearch.study.studies.study2_cheap (study 2's cheap claims S2-S4; bench/study2_cheap.py is its
command line) end to end on a tiny random Llama, offline:
a design of three models on a couple of windows of WikiText-2 test and C4 validation. Checks that a
rerun evaluates nothing, that the table's numbers are what the written per-window rows give, and
that the two one-sided tests decide "within" for two identical models and not for two very
different ones; and that the default design is the pre-registered one."""

from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest
from scipy.stats import t as t_dist

from ghostsearch.stats import inference as stats
from ghostsearch.stats.windows import cluster_diff, window_clusters
from ghostsearch.study.studies import study2
from ghostsearch.study.studies import study2_cheap as sc

ROOT = Path(__file__).resolve().parents[2]
S1 = ROOT / "docs" / "results" / "study-cpu-2" / "s1"


def _cells(line: str) -> list[str]:
    return [c.strip() for c in line.strip().strip("|").split("|")]


def test_default_design_is_the_preregistered_one():
    d = sc.Design()
    assert d.removed == tuple(range(12, 20)) and d.seq_len == 256 and d.seed == 0
    assert {(m.id, m.dataset, m.n_seq, m.method, m.variant) for m in d.models} == {
        ("G8", "c4", 8, "ghosted", "dense"),
        ("G16", "c4", 16, "ghosted", "dense"),
        ("G32", "c4", 32, "ghosted", "dense"),
        ("G64", "c4", 64, "ghosted", "dense"),
        ("W32", "wikitext2", 32, "ghosted", "dense"),
    }
    tested = {c.id: (c.left, c.right) for c in d.claims if c.tested}
    assert tested == {"S2": ("G64", "G32"), "S3": ("W32", "G32")}
    assert [(c.name, c.window, c.max_windows) for c in d.corpora] == [("wikitext2", None, None), ("c4", 256, None)]
    assert sc.DELTA == pytest.approx(math.log(1.01))
    # the paper protocol: SmolLM2's context is 8192, so every window is 2048 tokens (2047 predicted)
    from ghostsearch.config import load_config

    cfg = load_config(str(ROOT / "configs" / "study2-smollm2.yaml"), [])
    ev = sc.corpus_eval(cfg, d.corpora[0])
    assert ev.protocol == "paper" and ev.perplexity == ["wikitext2"]

    class Smol:  # model.config is all protocol_windows reads
        config = type("C", (), {"max_position_embeddings": 8192})()

    assert sc.window_tokens(Smol(), d.corpora[0]) == 2047 and sc.window_tokens(Smol(), d.corpora[1]) == 255


def test_windows_summed_by_batch_position_are_read_as_clusters():
    """Rows written before the fix of window_items (issue 37) hold 16 batch-position sums and zeros:
    they are read as 16 clusters of windows (stats.windows.window_clusters), whose t interval is centred on
    the full-data log ratio; the same windows one by one give the ordinary paired t interval."""
    rng = np.random.default_rng(1)
    a, b = 4.0 + rng.normal(0, 0.3, 148), 4.2 + rng.normal(0, 0.3, 148)
    slots = lambda x: [x[j::16].sum() for j in range(16)] + [0.0] * 132  # noqa: E731
    rows = lambda x, m: [{"model": m, "window": i, "tokens": 2047, "nll": v} for i, v in enumerate(x)]  # noqa: E731
    w = sc.window_diff(rows(slots(a), "X"), rows(slots(b), "Y"), "X", "Y", "c4")
    assert w["kind"] == "clusters" and w["clusters"] == 16 and w["windows"] == 148 and w["df"] == 15
    assert w["estimate"] == pytest.approx((a - b).mean(), abs=1e-12)
    one = sc.window_diff(rows(a, "X"), rows(b, "Y"), "X", "Y", "c4")
    d = a - b
    assert one["kind"] == "windows" and one["df"] == 147
    assert one["se"] == pytest.approx(d.std(ddof=1) / math.sqrt(148))
    assert window_clusters([1.0, 2.0, 0.0, 0.0, 0.0]) == ([1.0, 2.0], [3, 2])
    with pytest.raises(ValueError):
        window_clusters([1.0, 0.0, 2.0])


def test_cluster_interval_covers_at_its_level():
    """Simulation where the truth is known: 148 windows with a heteroscedastic per-window difference
    (true mean 0.1, each window's s.d. drawn from a gamma), summed into 16 batch-position clusters;
    the 95% cluster t interval covers the true mean in 0.95 of 4,000 draws (Monte Carlo s.e. 0.0034;
    accepted 0.935-0.965). With strongly skewed differences (centred exponential noise) it covered
    0.9325 in a run of this simulation: with 16 clusters read the 95% as about 93-95%."""
    rng = np.random.default_rng(2)
    sizes = [len(range(j, 148, 16)) for j in range(16)]
    hits = 0
    for _ in range(4000):
        scale = rng.gamma(2.0, 0.5, 148)
        d = 0.1 + scale * rng.normal(0.0, 0.05, 148)
        sums = [d[j::16].sum() for j in range(16)]
        w = cluster_diff(sums, [0.0] * 16, sizes)
        hits += w["lo"] <= 0.1 <= w["hi"]
    assert 0.935 <= hits / 4000 <= 0.965, hits / 4000


def test_tost_t_is_the_stats_modules_student_t_tost():
    """The table's TOST is ``stats.inference.tost`` on window_diff's estimate, s.e. and df."""
    from ghostsearch.stats import inference as stats

    w = {"estimate": 0.004, "se": 0.003, "df": 15}
    t = stats.tost(0.004, 0.003, sc.DELTA, df=15)
    assert sc.tost_t(w) == {"p_low": t.p_low, "p_high": t.p_high, "p": t.p}


def test_s1_p_is_study2s(monkeypatch):
    if not (S1 / "result.json").exists():
        pytest.skip("no committed S1 run")
    p = sc.s1_p(S1)
    assert p == pytest.approx(2 / 70)
    assert f"exact permutation p = {p:.4f}" in study2.s1(S1)


def test_driver_end_to_end_resumes_and_reports_its_rows(tmp_path, tiny_model_dir, data_dir, monkeypatch):
    import ghostsearch.evaluation.evaluate as evaluate
    import ghostsearch.recovery.repair as repair
    from ghostsearch.config import load_config
    from ghostsearch.data import corpora as data
    from ghostsearch.model.models import load_model

    cfg = load_config(
        None,
        [f"model={tiny_model_dir}", "dtype=fp32", "device=cpu", "eval.batch_size=4"]
        + ([f"data_dir={data_dir}"] if data_dir else []),
    )
    if not all(
        data.text_available(n, s, cfg.data_dir)
        for n, s in (("wikitext2", "test"), ("c4", "validation"), ("c4", "train"))
    ):
        pytest.skip("no data directory with WikiText-2 and C4")
    # S2's two models are the same repair (identical numbers); S3's right model is unrepaired with four
    # of six blocks gone against a repaired one (very different)
    design = sc.Design(
        removed=(1, 2, 3, 4),
        seq_len=32,
        seed=0,
        models=(sc.Model("G32", "c4", 4), sc.Model("G64", "c4", 4), sc.Model("W32", "c4", 4, method="none")),
        corpora=(sc.Corpus("wikitext2", 64, 3), sc.Corpus("c4", 64, 3)),
        claims=(
            sc.Claim("S2", "G64", "G32", "identical"),
            sc.Claim("S3", "W32", "G32", "very different"),
            sc.Claim("S2'", "W32", "G64", "reported", tested=False),
        ),
    )
    sc.check_data(cfg, design)
    calls = {"fit": 0, "ppl": 0}
    real_fit, real_ppl = repair.fit, evaluate.perplexity_finalists

    def fit(*a, **k):
        calls["fit"] += 1
        return real_fit(*a, **k)

    def ppl(*a, **k):
        calls["ppl"] += 1
        return real_ppl(*a, **k)

    monkeypatch.setattr(repair, "fit", fit)
    memo, real_tokenize = {}, data.tokenize_corpus

    def tokenize(tokenizer, docs, sep="\n\n"):  # each corpus tokenized once for the whole test (time only)
        key = (id(tokenizer), sep, hash(tuple(docs)))
        if key not in memo:
            memo[key] = real_tokenize(tokenizer, docs, sep)
        return memo[key]

    monkeypatch.setattr(data, "tokenize_corpus", tokenize)
    monkeypatch.setattr(evaluate, "perplexity_finalists", ppl)
    model, tok = load_model(cfg.model, dtype="fp32")
    saved = []
    # two at a time: G32 and G64 over one dense pass, then W32 (unrepaired: nothing to fit)
    assert sc.run(model, tok, cfg, tmp_path, design, on_model=lambda m, s: saved.append(m), share=2) == [
        "G32",
        "G64",
        "W32",
    ]
    assert saved == ["G32", "G64", "W32"] and calls == {"fit": 2, "ppl": 4}
    # resumable: a second run evaluates nothing
    assert sc.run(model, tok, cfg, tmp_path, design) == [] and calls == {"fit": 2, "ppl": 4}
    with pytest.raises(SystemExit, match="other settings"):  # a finished model under other settings is refused
        sc.run(model, tok, cfg, tmp_path, dataclasses.replace(design, seed=1))

    text = sc.report(tmp_path, design, S1)
    assert (tmp_path / "cheap.md").read_text() == text
    rows = {m: pq.read_table(tmp_path / f"{m}.parquet").to_pylist() for m in ("G32", "G64", "W32")}
    by = {
        m: {c: sorted((r for r in rs if r["corpus"] == c), key=lambda r: r["window"]) for c in ("wikitext2", "c4")}
        for m, rs in rows.items()
    }
    for m, rs in rows.items():
        assert len(rs) == 6 and all(r["tokens"] == 63 and r["nll_sum"] == pytest.approx(r["nll"] * 63) for r in rs)
        summary = json.loads((tmp_path / f"{m}.json").read_text())
        for c in ("wikitext2", "c4"):  # the rows give the perplexity the evaluation computed
            lp = sum(r["nll_sum"] for r in by[m][c]) / sum(r["tokens"] for r in by[m][c])
            assert math.exp(lp) == pytest.approx(summary["ppl"][c], rel=1e-5)
    assert by["G32"] == {c: [{**r, "model": "G32"} for r in by["G64"][c]] for c in by["G64"]}  # identical models
    alone, _ = sc.evaluate_group(model, tok, cfg, design, [design.models[0]])[0]  # one at a time: the same rows
    assert sorted(alone, key=lambda r: (r["corpus"], r["window"])) == by["G32"]["c4"] + by["G32"]["wikitext2"]
    ops_cut = json.loads((tmp_path / "G32.json").read_text())["cuts"]
    assert [c["cut"] for c in ops_cut] == [[1, 5]] and 0 <= ops_cut[0]["antisymmetric_share_w"] <= 1
    assert json.loads((tmp_path / "W32.json").read_text())["cuts"] == []  # unrepaired: no operator

    lines = text.splitlines()
    name = {"wikitext2": "WikiText-2 test", "c4": "C4 validation"}
    # the models' table: perplexities from the rows
    for m in ("G32", "G64", "W32"):
        cells = _cells(next(x for x in lines if x.startswith(f"| {m} |")))
        for i, c in enumerate(("wikitext2", "c4")):
            lp = sum(r["nll_sum"] for r in by[m][c]) / sum(r["tokens"] for r in by[m][c])
            assert cells[2 + i] == f"{math.exp(lp):.3f} (3)"
    # the claims' table: recomputed here from the rows, independently of the driver's helpers
    delta, p_claim = math.log(1.01), {}
    for cid, left, right in (("S2", "G64", "G32"), ("S3", "W32", "G32"), ("S2'", "W32", "G64")):
        ps = []
        for c in ("wikitext2", "c4"):
            a = np.array([r["nll"] for r in by[left][c]])
            b = np.array([r["nll"] for r in by[right][c]])
            d = a - b
            est, se = d.mean(), d.std(ddof=1) / math.sqrt(len(d))
            # Student t on n - 1 degrees of freedom over windows (issue 37: not a bootstrap of 3 windows)
            p = (
                (0.0 if abs(est) < delta else 1.0)
                if se == 0
                else max(t_dist.sf((est + delta) / se, len(d) - 1), t_dist.sf((delta - est) / se, len(d) - 1))
            )
            ps.append(p)
            q = t_dist.ppf(0.975, len(d) - 1)
            row = next(x for x in lines if x.startswith(f"| {cid} ") and f"| {left} - {right} | {name[c]} |" in x)
            cells = _cells(row)
            assert cells[3:6] == ["3", f"{est:+.5f}", f"[{est - q * se:+.5f}, {est + q * se:+.5f}]"], row
            if cid != "S2'":
                assert cells[6] == sc.fmt_p(p), row
        p_claim[cid] = max(ps)
    p1 = sc.s1_p(S1) if (S1 / "result.json").exists() else math.nan
    nums = json.loads((tmp_path / "cheap.json").read_text())
    assert nums["family"]["S2"]["p"] == 0.0 == p_claim["S2"]  # identical: within
    assert p_claim["S3"] > 0.5 and nums["family"]["S3"]["p"] == pytest.approx(p_claim["S3"])  # very different: not
    s2_row = next(x for x in lines if x.startswith("| S2 ") and "WikiText-2" in x)
    s3_row = next(x for x in lines if x.startswith("| S3 ") and "WikiText-2" in x)
    if math.isnan(p1):
        assert "pending" in s2_row
    else:
        adj = stats.holm([p1, p_claim["S2"], p_claim["S3"]])
        assert _cells(s2_row)[8] == sc.fmt_p(adj[1]) and _cells(s3_row)[8] == sc.fmt_p(adj[2])
        assert _cells(s2_row)[9] == "saturated: within +-1%" and _cells(s3_row)[9] == "not decided"
        s1_row = _cells(next(x for x in lines if x.startswith("| S1 ")))
        assert s1_row[7:9] == [sc.fmt_p(p1), sc.fmt_p(adj[0])]
        assert s1_row[9] == ("the objectives shape the removed set" if adj[0] <= 0.05 else "not decided")
