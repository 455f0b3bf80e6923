"""``ghostsearch export (RUN_DIR | CONFIG --remove 3,4,5) --method M --out DIR [--force]``: a
pruned (and repaired) model directory; from a run directory the best finalist unless --remove, and
from a ``ghostsearch target`` run directory its certified set, repaired with the certified repair
(``--method`` then defaults to it) and the certificate written into the model card. The command
parses and prints; the work is ``ghostsearch.run.export``."""

from __future__ import annotations

from pathlib import Path

from ghostsearch.cli.common import parse_remove, positive_int, print_json
from ghostsearch.recovery import RECOVERY


def add(sub) -> None:
    sp = sub.add_parser("export", help="write a pruned (and repaired) model directory")
    sp.add_argument("source", help="a run directory, or a YAML config with --remove")
    sp.add_argument("overrides", nargs="*", help="key=value config overrides")
    sp.add_argument("--remove", default=None, help="comma-separated block indices, e.g. 3,4,5")
    sp.add_argument(
        "--method",
        choices=RECOVERY.names(),
        default=None,
        help="repair to apply before writing (required, except from a target run: its certified repair)",
    )
    sp.add_argument("--out", required=True, help="the model directory to write")
    sp.add_argument(
        "--force",
        action="store_true",
        help="replace --out if it is a previous ghostsearch export (never a run directory or another directory)",
    )
    sp.add_argument("--threads", type=positive_int, default=None, help="torch threads (default: torch's)")
    sp.add_argument(
        "--format",
        choices=("safetensors", "gguf", "gguf-f32"),
        default="safetensors",
        help="gguf / gguf-f32: also write DIR/model-f16.gguf / model-f32.gguf for llama.cpp (plain exports only)",
    )


def run(args) -> Path:
    from ghostsearch.run.export import export_model

    written = export_model(
        Path(args.source),
        args.overrides,
        args.out,
        remove=None if args.remove is None else parse_remove(args.remove),
        method=args.method,
        force=args.force,
        threads=args.threads,
        fmt=args.format,
    )
    print_json(written)
    return Path(written["out"])
