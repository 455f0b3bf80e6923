"""The dense model's perplexity under both evaluation protocols (docs/compare.md quotes it).

  python bench/dense_reference.py [--model smollm2-135m] [--data-dir ../shared/data]

quick: eval.ppl_max_seq (64) windows of eval.ppl_seq_len (512) tokens; paper: the whole set in
non-overlapping windows of min(2048, context), as SLEB and ShortGPT report WikiText-2 (test) and C4
(validation). Prints one line per (corpus, protocol) with the windows and tokens scored, and seconds.
"""

from __future__ import annotations

import argparse
import os
import time

import benchenv  # noqa: E402,F401  (the repository on sys.path, offline HF, ../shared/data as the data directory)

from ghostsearch.config import Eval  # noqa: E402
from ghostsearch.data import corpora as data  # noqa: E402
from ghostsearch.evaluation.evaluate import PPL_SPLIT, protocol_windows, window_perplexity  # noqa: E402
from ghostsearch.model.models import load_model  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="smollm2-135m")
    ap.add_argument("--data-dir", default=os.environ.get("GHOSTSEARCH_DATA_DIR"))
    ap.add_argument("--corpora", default="wikitext2,c4")
    args = ap.parse_args()
    model, tok = load_model(args.model, dtype="fp32")
    e = Eval()
    for name in args.corpora.split(","):
        ids = data.tokenize_corpus(tok, data.load_texts(name, PPL_SPLIT.get(name), args.data_dir))
        for protocol in ("quick", "paper"):
            seq_len, max_seq = protocol_windows(model, protocol, e.ppl_seq_len, e.ppl_max_seq)
            n = len(data.chunk_windows(ids, seq_len, max_seq))
            t0 = time.perf_counter()
            ppl = window_perplexity(model, ids, seq_len, max_seq, batch_size=1)
            print(
                f"{args.model} {name}: protocol {protocol}: {n} windows x {seq_len} tokens "
                f"({n * seq_len} of {ids.numel()}): ppl {ppl:.4f} ({time.perf_counter() - t0:.0f} s)",
                flush=True,
            )


if __name__ == "__main__":
    main()
