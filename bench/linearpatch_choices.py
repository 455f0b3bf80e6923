"""LinearPatch's two choices (issue 37 item 4), measured: the Hadamard construction (quarot, the
authors' code, against paley, this project's first) and the scale estimator (mean_ratio, the
authors', against pooled), on SmolLM2-135M (fp32), study 2's fastblock set at k = 8 (blocks 12-19),
fitted on study 2's repair data (C4 train, 32 x 256, seed 0) and scored on WikiText-2 text.

  python bench/linearpatch_choices.py [--removed 12,13,14,15,16,17,18,19] [--n-seq 32] [--eval-seq 32]

Prints, for each variant (hadamard, diagonal) and choice: the patch P = I + M's relative Frobenius
difference to the default's, the relative difference of the scale vectors s (diagonal: P = diag(s)),
and the WikiText-2 perplexity (eval_seq windows of 512 tokens, default 8).
"""

from __future__ import annotations

import argparse
import itertools

import benchenv  # noqa: F401  (repository on sys.path, offline HF, ../shared/data)
import torch


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--removed", default="12,13,14,15,16,17,18,19")
    ap.add_argument("--n-seq", type=int, default=32)
    ap.add_argument("--seq-len", type=int, default=256)
    ap.add_argument("--eval-seq", type=int, default=8)
    args = ap.parse_args()
    from ghostsearch.config import Config
    from ghostsearch.model.models import load_model
    from ghostsearch.model.stack import Stack
    from ghostsearch.objectives import CalibrationSpec, ObjectiveSpec
    from ghostsearch.recovery import Activations, get_recovery
    from ghostsearch.scoring import Scorer

    torch.set_num_threads(1)
    data_dir = Config().data_dir
    removed = tuple(int(x) for x in args.removed.split(","))
    model, tok = load_model("smollm2-135m", dtype="fp32")
    sc = Scorer(Stack(model), tok)
    calib = sc.prepare(
        ObjectiveSpec.make("perplexity", CalibrationSpec("c4", args.n_seq, args.seq_len, 0, data_dir, micro_batch=8))
    )
    wiki = sc.prepare(ObjectiveSpec.make("perplexity", CalibrationSpec("wikitext2", args.eval_seq, 512, 0, data_dir)))
    data = Activations.from_scorer(sc, calib)
    print(f"removed {removed}; repair data c4 {args.n_seq}x{args.seq_len} seed 0; wikitext2 {args.eval_seq}x512")
    fits = {}
    for variant in ("hadamard", "diagonal"):  # the fits first (cheap), then the perplexities
        for rotation, scale in itertools.product(("quarot", "paley"), ("mean_ratio", "pooled")):
            if variant == "diagonal" and rotation == "paley":
                continue  # no rotation: the construction does not enter
            rec = get_recovery("linearpatch", variant=variant, rotation=rotation, scale=scale)
            fits[(variant, rotation, scale)] = (rec, rec.fit(sc.stack, removed, data))
    for variant in ("hadamard", "diagonal"):
        p0 = patch(fits[(variant, "quarot", "mean_ratio")][1])
        for (v, rotation, scale), (_, ops) in fits.items():
            if v != variant:
                continue
            p = patch(ops)
            line = f"{variant:8s} {rotation:6s} {scale:10s} ||P - P_default||/||P_default|| {rel(p, p0):.4f}"
            if variant == "diagonal":
                line += f"  ||s - s_default||/||s_default|| {rel(p.diagonal(), p0.diagonal()):.4f}"
            print(line + f"  [{ops.report[0]['rotation']}]", flush=True)
        if (variant, "paley", "pooled") in fits:
            p = patch(fits[(variant, "paley", "pooled")][1])
            print(
                f"  {variant}: the whole change (paley, pooled) -> (quarot, mean_ratio): P {rel(p0, p):.4f}", flush=True
            )
    ppl = {}
    for key, (rec, ops) in fits.items():
        with rec.patches(sc.stack, ops) as patches:
            ppl[key] = sc.score(wiki, removed, patches=patches).value
        base = ppl.get((key[0], "quarot", "mean_ratio"), ppl[key])
        print(
            f"{' '.join(key):30s} wikitext2 ppl {ppl[key]:9.3f} ({ppl[key] / base - 1:+.4%} against the default)",
            flush=True,
        )
    for variant in ("hadamard", "diagonal"):
        old = (variant, "paley", "pooled") if variant == "hadamard" else (variant, "quarot", "pooled")
        new = (variant, "quarot", "mean_ratio")
        print(f"  {variant}: perplexity {' '.join(old[1:])} -> {' '.join(new[1:])}: {ppl[new] / ppl[old] - 1:+.4%}")


def patch(ops) -> torch.Tensor:
    (m,) = ops.mats.values()
    return torch.eye(m.shape[0], dtype=torch.float64) + m.double().cpu()


def rel(a: torch.Tensor, b: torch.Tensor) -> float:
    return float((a - b).norm() / b.norm())


if __name__ == "__main__":
    main()
