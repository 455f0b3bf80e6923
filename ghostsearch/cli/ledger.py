"""``ghostsearch ledger RUN_DIR [--csv PATH]``: every evaluation of a run, with readable columns
(cell, removed, value, node name, ISO time ...), printed as a table or written as CSV. Reads a
running or crashed run too (parts and journals, de-duplicated)."""

from __future__ import annotations

from pathlib import Path

from ghostsearch.core.errors import GhostsearchError


def add(sub) -> None:
    sp = sub.add_parser("ledger", help="print a run's ledger (every evaluation) or export it as CSV")
    sp.add_argument("run_dir", help="a run directory (ledger/ inside)")
    sp.add_argument("--csv", default=None, metavar="PATH", help="write the ledger as CSV to PATH ('-' = stdout)")
    sp.add_argument("--cell", default=None, help="only this cell's rows")


def frame(run_dir: Path, cell: str | None = None):
    """The ledger as a pandas DataFrame with readable columns, in time order."""
    import pandas as pd

    from ghostsearch.rundir.ledger import read_ledger

    df = read_ledger(run_dir).to_pandas()
    if cell is not None:
        df = df[df["cell"] == cell]
    names = _node_names(df["node"].unique()) if len(df) else {}
    df = df.assign(
        removed=df["removed"].map(lambda r: ",".join(map(str, r))),
        node=df["node"].map(lambda n: names.get(n, n)),
        time=pd.to_datetime(df["time"], unit="s", utc=True).map(lambda t: t.isoformat(timespec="seconds")),
    )
    return df.sort_values("time", kind="stable")[list(COLUMNS)].reset_index(drop=True)


COLUMNS = (
    "time",
    "cell",
    "searcher",
    "objective",
    "k",
    "removed",
    "fidelity",
    "value",
    "cached",
    "tokens",
    "seconds",
    "actor",
    "node",
    "seed",
    "objective_key",
    "eval_id",
)


def _node_names(ids) -> dict:
    """Ray node ids -> node-1, node-2 ... in order of first appearance (the ids are 56 hex digits)."""
    return {n: f"node-{i + 1}" for i, n in enumerate(i for i in ids if i)}


def _our_csv(path: Path) -> bool:
    """A CSV ``ledger --csv`` wrote before (its header line is the ledger's columns)."""
    try:
        with open(path, encoding="utf-8") as f:
            return f.readline().strip() == ",".join(COLUMNS)
    except (OSError, UnicodeDecodeError):
        return False


def run(args) -> None:
    import sys

    d = Path(args.run_dir)
    if not (d / "ledger").is_dir():
        raise GhostsearchError(f"{d} has no ledger/; point at a run directory written by ghostsearch search or compare")
    if args.csv and args.csv != "-":  # before reading anything: never over a run's or another program's file
        from ghostsearch.core.io import check_output, check_writable

        check_output(args.csv, "--csv", ours=_our_csv)
        check_writable(Path(args.csv).parent, f"--csv {args.csv}:", "give a path on a writable disk")
    df = frame(d, args.cell)
    if args.csv == "-":
        df.to_csv(sys.stdout, index=False)
    elif args.csv:
        from ghostsearch.core.io import write_text_atomic

        out = Path(args.csv)
        write_text_atomic(out, df.to_csv(index=False))
        print(f"{len(df)} rows -> {out}")
    else:
        import pandas as pd

        with pd.option_context("display.max_rows", None, "display.width", 200, "display.max_columns", 13):
            print(
                df.drop(columns=["objective_key", "eval_id", "seed"]).to_string(index=False)
                if len(df)
                else "(no evaluations yet)"
            )
