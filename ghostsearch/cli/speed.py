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
(and FILE.parquet beside it)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from ghostsearch.cli.common import parse_remove, positive_int
from ghostsearch.core.errors import GhostsearchError
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


def _our_file(path: Path) -> bool:
    """A file speed wrote before: its JSON record, or the Parquet beside it."""
    if path.suffix == ".parquet":
        import pyarrow.parquet as pq

        try:
            return {"label", "ideal_speedup"} <= set(pq.read_schema(path).names)
        except Exception:  # noqa: BLE001  (not Parquet: not ours)
            return False
    try:
        return "peak_method" in json.loads(path.read_text())
    except (OSError, ValueError, TypeError):
        return False


def plan(args):
    """(config, removed sets, [(removed, method)] repairs, export dir or None, default out) — every
    input error before a model loads."""
    from ghostsearch.config import load_config
    from ghostsearch.rundir import cells, run_config
    from ghostsearch.rundir.outputs import recovered_methods

    t = Path(args.target)
    methods = [m for m in (args.recovery or []) if m != "none"]
    given = [tuple(sorted(parse_remove(r))) for r in args.remove] if args.remove else None
    if (t / "result.json").exists():
        cfg = run_config(t, args.overrides)
        sets = given if given is not None else list(dict.fromkeys(r for _, r, _ in cells(t)))
        repairs = [(r, m) for r in sets for m in methods]
        repairs += [x for x in recovered_methods(t) if x not in repairs and (given is None or x[0] in sets)]
        return cfg, sets, repairs, None, t / "speed.json"
    if (t / "config.json").exists():
        if args.remove or args.recovery:
            raise GhostsearchError(f"{t} is an exported model (already pruned and repaired); drop --remove/--recovery")
        return load_config(None, args.overrides), [], [], t, None
    if t.is_file():
        if not given:
            raise GhostsearchError(f"speed {t} needs --remove BLOCKS (e.g. --remove 3,4,5; repeat for several sets)")
        return load_config(str(t), args.overrides), given, [(r, m) for r in given for m in methods], None, None
    raise GhostsearchError(
        f"{t} is neither a run directory (result.json), an exported model directory (config.json) nor a config file"
    )


def run(args):
    import torch

    from ghostsearch.core.io import check_output
    from ghostsearch.core.logs import progress_enabled
    from ghostsearch.evaluation.speed import cost_operators, exported, measure_speed, speed_table, write_report
    from ghostsearch.model.models import load_configured, model_depth
    from ghostsearch.model.stack import Stack, check_removed

    cfg, sets, repairs, export_dir, default_out = plan(args)
    out = Path(args.out) if args.out else default_out
    if out is not None:
        if out.suffix != ".json":
            raise GhostsearchError(f"speed --out {out}: give a .json path (the Parquet goes beside it)")
        own = ("speed.json", "speed.parquet") if args.out is None else ()
        for p in (out, out.with_suffix(".parquet")):
            check_output(p, "speed --out" if args.out else "speed:", ours=_our_file, own=own)
    depth = model_depth(cfg.model, cfg.trust_remote_code) if export_dir is None else None
    if depth is not None:
        for r in sets + [r for r, _ in repairs]:
            check_removed(r, depth)
    if args.threads:
        torch.set_num_threads(args.threads)
    model, _ = load_configured(cfg)
    L = Stack(model).n_blocks
    hidden = int(model.config.hidden_size)
    prebuilt = [exported(export_dir, model, cfg.model)] if export_dir is not None else []
    report = measure_speed(
        model,
        sets,
        repairs=[cost_operators(m, r, L, hidden) for r, m in repairs],
        batches=args.batch,
        seq_len=args.seq_len,
        decode_tokens=args.decode_tokens,
        repeats=args.repeats,
        progress=(lambda line: print(line, file=sys.stderr, flush=True)) if progress_enabled() else None,
        prebuilt=prebuilt,
    )
    if out is not None:
        write_report(report, out)
    if args.json:
        print(json.dumps(report.to_dict()), flush=True)
    else:
        print(speed_table(report), flush=True)
        if out is not None:
            print(f"speed: wrote {out} and {out.with_suffix('.parquet').name}", flush=True)
    return report
