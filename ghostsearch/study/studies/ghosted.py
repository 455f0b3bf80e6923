"""The Ghosted Layers part of the study: repairs compared on FIXED removed sets (bench/ghosted_study.py
is its command line and states the design). :func:`run` fits and evaluates them and writes the
rows; :func:`claims_text` is the Ghosted paper's claims on them (``claims.ghosted_paper``)."""

from __future__ import annotations

import json
import time
from pathlib import Path

METHODS = [
    ("none", None),
    ("ghosted", "dense"),
    ("ghosted", "symmetric"),
    ("replaceme", "lstsq"),
    ("replaceme", "cosine"),
    ("linearpatch", "hadamard"),
]
SATURATION = (8, 16, 32, 64, 128)


def cell_sets(run_dir: Path, ks: list[int]) -> list[tuple[str, int, tuple[int, ...]]]:
    """(kind, k, removed) of the perplexity-greedy and fastblock cells (seed 0) of the run."""
    from ghostsearch.rundir.layout import result_cells

    res = result_cells(json.loads((run_dir / "result.json").read_text()))
    out: list[tuple[str, int, tuple[int, ...]]] = []
    for k in ks:
        for kind in ("greedy", "fastblock"):
            name = f"{kind}-perplexity-k{k}-s0"
            if name not in res:
                raise SystemExit(f"{run_dir} has no cell {name}; run the study's compare first (scripts/study.sh)")
            removed = tuple(res[name]["removed"])
            if all(r != removed for _, _, r in out):  # e.g. greedy's set IS the fastblock window: once
                out.append((kind, k, removed))
    return out


def share(ops, key: str):
    vals = [r.get(key) for r in (ops.report if ops is not None else []) if r.get(key) is not None]
    return sum(vals) / len(vals) if vals else None


def claims_text(out: Path) -> str:
    """The Ghosted paper's claims on an earlier run's OUT files: the table, the lines, the rule."""
    import pyarrow.parquet as pq

    from ghostsearch.stats.bootstrap import ItemMatrix
    from ghostsearch.study.claims.base import RULE, render
    from ghostsearch.study.claims.ghosted_paper import ghosted_claims

    rows = pq.read_table(out.with_suffix(".parquet")).to_pylist()
    matrix = ItemMatrix.read(out.with_name(out.name + "_items.parquet"))
    cl, lines = ghosted_claims(rows, matrix)
    return "\n".join(
        [
            render(cl),
            "\n" + "\n".join(f"- {x}" for x in lines),
            "\n(antisymmetric share row: mean over sets, [min, max]; " + RULE + ")",
        ]
    )


def run(run_dir: Path, out: Path, ks: list[int], saturation=SATURATION, limit: int | None = None) -> None:
    """Fit every repair of METHODS on the sets of ``run_dir`` (:func:`cell_sets`), Ghosted at each
    calibration size of ``saturation`` and on WikiText-2 on the greedy set at the middle k, evaluate
    them all together (perplexity, the eight tasks, the run's held-out halves) and write OUT.parquet
    and OUT_items.parquet (``out``)."""
    import dataclasses

    import pyarrow as pa

    from ghostsearch.core.io import write_parquet_atomic
    from ghostsearch.evaluation.evaluate import perplexity_finalists, zero_shot_finalists
    from ghostsearch.evaluation.native import write_item_rows
    from ghostsearch.model.models import load_model
    from ghostsearch.model.stack import Stack
    from ghostsearch.recovery.repair import activations_from_config, captured_once, fit, recovery_from_config
    from ghostsearch.rundir.layout import run_config

    cfg = run_config(run_dir, [f"eval.limit={limit}"] if limit else None)
    held_out = json.loads((run_dir / "result.json").read_text()).get("data", {}).get("held_out", [])
    sets = cell_sets(run_dir, ks)
    model, tok = load_model(cfg.model, dtype=cfg.dtype, device=cfg.resolved_device())

    def with_recovery(**kw):
        return dataclasses.replace(cfg, recovery=dataclasses.replace(cfg.recovery, **kw))

    jobs = []  # (row, (removed, ops))
    t0 = time.monotonic()
    stack = Stack(model)  # every main fit reads one dense capture of the repair calibration
    data = captured_once(activations_from_config(stack, tok, cfg), cfg.eval.cache_gib * (1 << 30))
    for kind, k, removed in sets:
        for method, variant in METHODS:
            c = with_recovery(method=method, variant=variant or "dense")
            ops = None if method == "none" else recovery_from_config(c, method).fit(stack, list(removed), data)
            jobs.append(
                (
                    {
                        "set": kind,
                        "k": k,
                        "removed": list(removed),
                        "method": method,
                        "variant": variant or "",
                        "calibration": "none" if method == "none" else (cfg.recovery.dataset or "c4"),
                        "n_seq": 0 if method == "none" else cfg.recovery.n_seq,
                        "role": "main",
                    },
                    (removed, ops),
                )
            )
    mid = ks[len(ks) // 2]
    greedy_mid = next(r for kind, k, r in sets if kind == "greedy" and k == mid)
    for n in saturation:
        if n == cfg.recovery.n_seq:
            continue  # the main row
        ops = fit(model, tok, list(greedy_mid), with_recovery(method="ghosted", variant="dense", n_seq=n), "ghosted")
        jobs.append(
            (
                {
                    "set": "greedy",
                    "k": mid,
                    "removed": list(greedy_mid),
                    "method": "ghosted",
                    "variant": "dense",
                    "calibration": cfg.recovery.dataset or "c4",
                    "n_seq": n,
                    "role": "saturation",
                },
                (greedy_mid, ops),
            )
        )
    ops = fit(
        model, tok, list(greedy_mid), with_recovery(method="ghosted", variant="dense", dataset="wikitext2"), "ghosted"
    )
    jobs.append(
        (
            {
                "set": "greedy",
                "k": mid,
                "removed": list(greedy_mid),
                "method": "ghosted",
                "variant": "dense",
                "calibration": "wikitext2",
                "n_seq": cfg.recovery.n_seq,
                "role": "dataset",
            },
            (greedy_mid, ops),
        )
    )
    jobs.insert(
        0,
        (
            {
                "set": "dense",
                "k": 0,
                "removed": [],
                "method": "none",
                "variant": "",
                "calibration": "none",
                "n_seq": 0,
                "role": "dense",
            },
            ((), None),
        ),
    )
    fit_s = time.monotonic() - t0
    print(f"{len(jobs)} finalists fitted in {fit_s:.0f} s; evaluating", flush=True)

    finalists = [f for _, f in jobs]
    t0 = time.monotonic()
    ppl = [p.to_dict() for p in perplexity_finalists(model, tok, finalists, cfg.eval, cfg.data_dir, held_out)]
    zero_shot, items = zero_shot_finalists(model, tok, finalists, cfg.eval, cfg.data_dir, held_out, progress=True)
    zs = [z.to_dict() for z in zero_shot]  # the flat numbers (lm-eval's document is not one of them)
    eval_s = time.monotonic() - t0
    rows = []
    for i, ((row, (_, ops)), p, z) in enumerate(zip(jobs, ppl, zs)):
        key = (
            f"{row['set']}-k{row['k']}-{row['method']}{'-' + str(row['variant']) if row['variant'] else ''}"
            f"-{row['calibration']}-n{row['n_seq']}"
        )
        numbers = {
            m: float(v) for m, v in {**p, **z}.items() if isinstance(v, (int, float)) and not isinstance(v, bool)
        }
        rows.append(
            {
                **row,
                "key": key,
                "eval_key": key,
                **numbers,
                "antisymmetric_share_w": share(ops, "antisymmetric_share_w"),
                "antisymmetric_share_m": share(ops, "antisymmetric_share"),
                "alignment_before": share(ops, "alignment_before"),
                "alignment_after": share(ops, "alignment_after"),
            }
        )
        items = [dataclasses.replace(it, key=key) if it.finalist == i else it for it in items]
    out.parent.mkdir(parents=True, exist_ok=True)
    names = list(dict.fromkeys(k for r in rows for k in r))
    write_parquet_atomic(
        out.with_suffix(".parquet"), pa.Table.from_pylist([{k: r.get(k) for k in names} for r in rows])
    )
    write_item_rows(items, out.with_name(out.name + "_items.parquet"))
    print(
        f"fit {fit_s:.0f} s, evaluation {eval_s:.0f} s; wrote {out.with_suffix('.parquet')} and "
        f"{out.with_name(out.name + '_items.parquet')}\n"
    )
