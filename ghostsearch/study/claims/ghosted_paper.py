"""The Ghosted paper's claims on the Ghosted study's finalists (bench/ghosted_study.py prints them):
Ghosted against the other repairs of a set, calibration saturation, C4 against WikiText-2 as the
calibration text, and the antisymmetric share of W* = I + M. The methods compared are the
caller's rows; no rule here decides by a searcher's name."""

from __future__ import annotations

from functools import partial

from ghostsearch.stats.bootstrap import ItemMatrix, item_bootstrap
from ghostsearch.study.claims.base import ClaimRow, claim_row, recovery_comparison

GHOSTED_PAPER = (
    "Ghosted > ReplaceMe > LinearPatch in mean accuracy (LLaMA-3.1-8B, 7 blocks removed: 60.01 / 59.68 / 53.27 %)"
)


SATURATION_PAPER = "accuracy saturates at 32 calibration sequences"


DATASET_PAPER = "C4 vs WikiText-2 as calibration: minimal impact"


ANTISYM_PAPER = "W* = I + M has a substantial antisymmetric part, which symmetric operators (LinearPatch) cannot reach"


GHOSTED_RIVALS = ("replaceme lstsq", "replaceme cosine", "linearpatch hadamard", "ghosted symmetric", "none")


def repair_label(r: dict) -> str:
    """A Ghosted-study row's repair: its method, and its variant unless that is the default (dense)."""
    return r["method"] + (f" {r['variant']}" if r["variant"] and r["variant"] != "dense" else "")


def _acc_gap(a: str, b: str, acc: dict) -> float:
    return acc[a] - acc[b]


def _abs_acc_gap(a: str, b: str, acc: dict) -> float:
    return abs(acc[a] - acc[b])


def _ghosted_vs_rivals(by_set: dict, matrix: ItemMatrix | None) -> tuple[list[ClaimRow], list[str]]:
    """Ghosted against every other repair of the same set (paired accuracy), and a line per set with
    each repair's WikiText-2 perplexity and Ghosted's antisymmetric shares."""
    pairs, lines = [], []
    for (kind, k), m in sorted(by_set.items()):
        g = m.get("ghosted")
        if g is None:
            continue
        for other in GHOSTED_RIVALS:
            if other in m:
                pairs.append((f"ghosted ({kind} k={k})", g["key"], other, m[other]["key"], GHOSTED_PAPER))
        ppl = {lab: r.get("ppl_wikitext2") for lab, r in m.items()}
        best = min(ppl, key=lambda x: ppl[x] if ppl[x] is not None else float("inf"))
        lines.append(
            f"{kind} k={k} {g['removed']}: WikiText-2 perplexity "
            + ", ".join(f"{lab} {v:.1f}" for lab, v in sorted(ppl.items(), key=lambda x: x[1] or 0))
            + f" (lowest: {best}); "
            f"antisymmetric share of W* {g.get('antisymmetric_share_w') or 0:.2f}, of M "
            f"{g.get('antisymmetric_share_m') or 0:.2f}"
        )
    return recovery_comparison(matrix, pairs), lines


def _ghosted_saturation(
    rows: list[dict], main_rows: list[dict], matrix: ItemMatrix | None
) -> tuple[list[ClaimRow], list[str]]:
    """Ghosted fitted on more calibration sequences (the saturation rows, and the main model at that
    k): the accuracy the most sequences gain over each count from 32 up, tested against 0.01."""
    extra = [r for r in rows if r["role"] == "saturation"]
    sat = sorted(
        extra
        + [
            r
            for r in main_rows
            if extra and r["set"] == extra[0]["set"] and r["k"] == extra[0]["k"] and repair_label(r) == "ghosted"
        ],
        key=lambda r: r["n_seq"],
    )
    out: list[ClaimRow] = []
    if matrix is None or len(sat) <= 1:
        return out, []
    top = sat[-1]
    for r in sat[:-1]:
        if r["n_seq"] >= 32 and r["key"] in matrix and top["key"] in matrix:
            p, lo, hi = item_bootstrap(matrix, partial(_acc_gap, top["key"], r["key"]), keys=[top["key"], r["key"]])
            cond = f"acc({top['n_seq']}) - acc({r['n_seq']}), {r['set']} k={r['k']}"
            out.append(
                claim_row("accuracy gained beyond n sequences is < 0.01", SATURATION_PAPER, cond, p, lo, hi, 0.01, "<")
            )
    line = f"saturation ({top['set']} k={top['k']}): " + ", ".join(
        f"{r['n_seq']} seq: ppl {r.get('ppl_wikitext2', float('nan')):.1f}, acc {r.get('mean_acc', float('nan')):.3f}"
        for r in sat
    )
    return out, [line]


def _ghosted_dataset(rows: list[dict], by_set: dict, matrix: ItemMatrix | None) -> tuple[list[ClaimRow], list[str]]:
    """Ghosted calibrated on WikiText-2 instead of C4 (the dataset rows): |accuracy difference| < 0.01."""
    out, lines = [], []
    for w in (r for r in rows if r["role"] == "dataset"):
        c4 = by_set.get((w["set"], w["k"]), {}).get("ghosted")  # the same set repaired on C4
        if c4 is None or matrix is None or c4["key"] not in matrix or w["key"] not in matrix:
            continue
        p, lo, hi = item_bootstrap(matrix, partial(_abs_acc_gap, c4["key"], w["key"]), keys=[c4["key"], w["key"]])
        cond = f"ghosted, {w['set']} k={w['k']}"
        out.append(
            claim_row("|acc(C4 calib) - acc(WikiText-2 calib)| < 0.01", DATASET_PAPER, cond, p, lo, hi, 0.01, "<")
        )
        lines.append(
            f"calibration data ({w['set']} k={w['k']}): C4 ppl {c4.get('ppl_wikitext2', float('nan')):.1f} / "
            f"acc {c4.get('mean_acc', float('nan')):.3f}; WikiText-2 ppl "
            f"{w.get('ppl_wikitext2', float('nan')):.1f}"
            f" / acc {w.get('mean_acc', float('nan')):.3f} (WikiText-2 perplexity is measured on its test "
            "split, calibration read its validation split)"
        )
    return out, lines


def _antisymmetric_share(main_rows: list[dict]) -> list[ClaimRow]:
    """The antisymmetric share of W* = I + M over the sets Ghosted (dense) repaired: reported, not tested."""
    shares = [
        r["antisymmetric_share_w"]
        for r in main_rows
        if r["method"] == "ghosted" and r["variant"] == "dense" and r.get("antisymmetric_share_w") is not None
    ]
    if not shares:
        return []
    return [
        ClaimRow(
            claim="antisymmetric share of W* = I + M",
            paper=ANTISYM_PAPER,
            condition=f"ghosted, {len(shares)} sets",
            ours=float(sum(shares) / len(shares)),
            lo=float(min(shares)),
            hi=float(max(shares)),
            rule="reported (range over sets)",
            verdict="reported",
        )
    ]


def ghosted_claims(rows: list[dict], matrix: ItemMatrix | None) -> tuple[list[ClaimRow], list[str]]:
    """The Ghosted paper's claims on the Ghosted study's finalists (``rows``: bench/ghosted_study.py's
    OUT.parquet, one dict per finalist: role, set, k, method, variant, key, n_seq, ppl_wikitext2,
    mean_acc, antisymmetric shares): paired accuracy differences (the :func:`verdict` rule) and the
    perplexity / antisymmetric-share lines (one evaluation each, no interval)."""
    main_rows = [r for r in rows if r["role"] == "main"]
    by_set: dict = {}
    for r in main_rows:
        by_set.setdefault((r["set"], r["k"]), {})[repair_label(r)] = r
    out, lines = _ghosted_vs_rivals(by_set, matrix)
    for more, more_lines in (_ghosted_saturation(rows, main_rows, matrix), _ghosted_dataset(rows, by_set, matrix)):
        out += more
        lines += more_lines
    return out + _antisymmetric_share(main_rows), lines
