"""``ghostsearch speed TARGET``: what pruning buys, measured (``ghostsearch.evaluation.speed``): parameters,
weight memory, peak memory, prefill and decode tokens/s of the dense model and of pruned models,
in one process with interleaved repeats, as a ratio to dense beside the ideal L / (L - k).

TARGET is one of
* a run directory: every cell's removed set, and every repair ``recover`` fitted there
  (RUN_DIR/recovery.parquet; a repair's cost does not depend on its fitted numbers, so its
  operators' shape is timed without fitting it again); writes RUN_DIR/speed.json and speed.parquet;
* a model directory written by ``ghostsearch export``, timed as it loads (``load_pruned``) beside
  the dense model it was cut from (the config's ``model``, or ``model=...``);
* a CONFIG file with ``--remove 3,4,5`` (repeatable) and optionally ``--recovery ghosted``.
Prints a table, dense first; ``--json`` prints the record instead; ``--out FILE.json`` writes it
(and FILE.parquet beside it). The work is ghostsearch.study.speed (source, check, measure); this
module parses and prints."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from ghostsearch.cli.common import parse_remove, positive_int
from ghostsearch.recovery import RECOVERY


def add(sub) -> None:
    sp = sub.add_parser(
        "speed",
        help="parameters, memory and tokens/s of pruned models against the dense model",
        description=__doc__.split("\n\n")[0] if __doc__ else None,
    )
    sp.add_argument("target", help="RUN_DIR, an exported model directory, or a CONFIG (with --remove)")
    sp.add_argument("overrides", nargs="*", help="key=value config overrides, e.g. dtype=fp32")
    sp.add_argument(
        "--remove",
        action="append",
        default=None,
        help="comma-separated block indices (repeat for several sets); with a run directory: instead of its cells",
    )
    sp.add_argument(
        "--recovery",
        action="append",
        default=None,
        choices=RECOVERY.names(),
        help="also time each set with this repair's operators (repeatable)",
    )
    sp.add_argument("--batch", type=positive_int, nargs="+", default=[1, 8], help="batch sizes (default: 1 8)")
    sp.add_argument("--seq-len", type=positive_int, default=128, help="prompt tokens per row (default 128)")
    sp.add_argument("--decode-tokens", type=positive_int, default=16, help="greedy tokens decoded (default 16)")
    sp.add_argument("--repeats", type=positive_int, default=5, help="interleaved rounds (default 5)")
    sp.add_argument("--threads", type=positive_int, default=None, help="torch threads (default: torch's)")
    sp.add_argument("--json", action="store_true", help="print the JSON record instead of the table")
    sp.add_argument("--out", default=None, help="JSON file (default: RUN_DIR/speed.json; none otherwise)")


def run(args):
    from ghostsearch.core.logs import progress_enabled
    from ghostsearch.evaluation.speed import speed_table
    from ghostsearch.study.speed import check, measure, source

    given = [tuple(sorted(parse_remove(r))) for r in args.remove] if args.remove else None
    cfg, sets, repairs, export_dir, default_out = source(Path(args.target), args.overrides, given, args.recovery)
    out = Path(args.out) if args.out else default_out
    check(cfg, sets, repairs, export_dir, out, not args.out)
    report = measure(
        cfg,
        sets,
        repairs,
        export_dir,
        out,
        batches=args.batch,
        seq_len=args.seq_len,
        decode_tokens=args.decode_tokens,
        repeats=args.repeats,
        threads=args.threads,
        progress=(lambda line: print(line, file=sys.stderr, flush=True)) if progress_enabled() else None,
    )
    if args.json:
        print(json.dumps(report.to_dict()), flush=True)
    else:
        print(speed_table(report), flush=True)
        if out is not None:
            print(f"speed: wrote {out} and {out.with_suffix('.parquet').name}", flush=True)
    return report
