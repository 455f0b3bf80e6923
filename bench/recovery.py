"""Ghosted solve: streamed float64 Gram solve vs torch.linalg.pinv on the stacked X_pre.

  python bench/recovery.py [--n-seq 128 --seq-len 256 --cut 1,3 --micro-batch 8]

SmolLM2-135M, C4 calibration windows. The states entering blocks a and b of the cut [a, b) are
captured once for all tokens (the capture is not timed; only blocks 0..b run, on a truncated
copy) and held as fp32 micro-batches: the data source both methods read. Then, in the same
process, for 1/4, 1/2 and all of the tokens:
  streamed: GramLS over micro-batches (X^T X, X^T Delta in float64) + solve (pinv in Gram form,
            and the default ridge 1e-6);
  baseline: torch.cat of all X_pre and Delta (float64) + torch.linalg.pinv(X_pre) @ Delta.
Peak memory = the peak RSS above the RSS before the step (sampled every 2 ms, after malloc_trim). Prints the relative
difference of M (target <= 1e-6) and the time and memory ratios baseline / streamed.
"""

from __future__ import annotations

import argparse
import ctypes
import os
import threading
import time

import benchenv  # noqa: E402,F401  (the repository on sys.path, offline HF, ../shared/data as the data directory)
import psutil
import torch

from ghostsearch.model.models import load_model  # noqa: E402
from ghostsearch.model.stack import Batch, Stack, physically_prune  # noqa: E402
from ghostsearch.objectives import CalibrationSpec  # noqa: E402
from ghostsearch.objectives.perplexity import text_windows  # noqa: E402
from ghostsearch.recovery.gram import GramLS  # noqa: E402


def trim() -> None:
    """Give freed heap memory back to the OS, so the next step's peak RSS counts its own allocations."""
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except OSError:
        pass


class PeakRSS:
    def __enter__(self):
        trim()
        self.proc, self.base, self.peak, self.stop = psutil.Process(), psutil.Process().memory_info().rss, 0, False
        self.thread = threading.Thread(target=self.poll, daemon=True)
        self.thread.start()
        self.t0 = time.perf_counter()
        return self

    def poll(self):
        while not self.stop:
            self.peak = max(self.peak, self.proc.memory_info().rss)
            time.sleep(0.002)

    def __exit__(self, *exc):
        self.seconds = time.perf_counter() - self.t0
        self.stop = True
        self.thread.join()
        self.peak = max(self.peak, self.proc.memory_info().rss)
        self.mib = (self.peak - self.base) / 2**20


def capture(model, tok, args, a, b):
    spec = CalibrationSpec("c4", args.n_seq, args.seq_len, 0, args.data_dir)
    ids = text_windows(spec, tok)
    head = Stack(physically_prune(model, range(b, Stack(model).n_blocks)))  # type: ignore[arg-type]  # blocks 0..b-1 only
    pairs = []
    with torch.no_grad():
        for s in range(0, ids.shape[0], args.micro_batch):
            st = head.capture(Batch(input_ids=ids[s : s + args.micro_batch])).states
            pairs.append((st[a].reshape(-1, st[a].shape[-1]).clone(), st[b].reshape(-1, st[b].shape[-1]).clone()))
    return pairs


def streamed(pairs, solver, ridge=1e-6):
    ls = GramLS()
    for xa, xb in pairs:
        ls.update(xa, xb - xa)
    return ls.solve(ridge=ridge, solver=solver)


def baseline(pairs):
    x = torch.cat([xa for xa, _ in pairs]).double()
    d = torch.cat([xb for _, xb in pairs]).double() - x
    return torch.linalg.pinv(x) @ d


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--n-seq", type=int, default=128)
    ap.add_argument("--seq-len", type=int, default=256)
    ap.add_argument("--micro-batch", type=int, default=8)
    ap.add_argument("--cut", default="1,3", help="a,b: the cut [a, b) (blocks a..b-1 removed)")
    ap.add_argument("--data-dir", default=os.environ.get("GHOSTSEARCH_DATA_DIR"))
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    a, b = (int(x) for x in args.cut.split(","))
    model, tok = load_model("smollm2-135m", dtype="fp32")
    t0 = time.perf_counter()
    pairs = capture(model, tok, args, a, b)
    n_all = sum(x.shape[0] for x, _ in pairs)
    print(
        f"SmolLM2-135M, cut [{a},{b}), C={pairs[0][0].shape[1]}, {n_all} tokens captured in "
        f"{time.perf_counter() - t0:.0f}s; torch threads {args.threads}"
    )
    print(
        f"{'tokens':>7} {'stream s':>9} {'stream MiB':>10} {'pinv s':>8} {'pinv MiB':>9} "
        f"{'t ratio':>7} {'mem ratio':>9} {'rel diff (pinv)':>15} {'rel diff (ridge 1e-6)':>21}"
    )
    for frac in (4, 2, 1):
        part = pairs[: max(1, len(pairs) // frac)]
        n = sum(x.shape[0] for x, _ in part)
        with PeakRSS() as ms:
            m_stream = streamed(part, "pinv")
        m_ridge = streamed(part, "ridge")
        with PeakRSS() as mb:
            m_ref = baseline(part)
        rel = float((m_stream - m_ref).norm() / m_ref.norm())
        rel_r = float((m_ridge - m_ref).norm() / m_ref.norm())
        print(
            f"{n:>7} {ms.seconds:>9.2f} {ms.mib:>10.1f} {mb.seconds:>8.2f} {mb.mib:>9.1f} "
            f"{mb.seconds / ms.seconds:>7.2f} {mb.mib / max(ms.mib, 1e-9):>9.1f} {rel:>15.2e} {rel_r:>21.2e}"
        )
    share = float(((m_stream - m_stream.T) / 2).norm() / m_stream.norm())
    print(f"antisymmetric share of M (all tokens): {share:.3f}")


if __name__ == "__main__":
    main()
