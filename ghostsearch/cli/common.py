"""Argument helpers shared by the command modules."""

from __future__ import annotations

import argparse

from ghostsearch.core.errors import GhostsearchError


def add_config_command(sub, name: str, help_: str) -> argparse.ArgumentParser:
    """A subcommand taking CONFIG and key=value overrides."""
    sp = sub.add_parser(name, help=help_, description=help_)
    sp.add_argument("config", help="YAML config (see configs/)")
    sp.add_argument("overrides", nargs="*", help="key=value overrides, e.g. k=6 calibration.n_seq=16")
    return sp


def parse_remove(text: str) -> list[int]:
    """'3,7,12' -> [3, 7, 12]; '' -> [] (the dense model)."""
    try:
        return [int(x) for x in text.split(",") if x.strip() != ""]
    except ValueError:
        raise GhostsearchError(
            f"--remove {text!r} is not a comma-separated list of block indices, e.g. 3,7,12"
        ) from None


def positive_int(text: str) -> int:
    """argparse type of --threads, --top, --limit: an integer >= 1 (argparse prints the message)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{value} must be 1 or more")
    return value


def print_json(obj) -> None:
    import json

    print(json.dumps(obj, default=str), flush=True)
