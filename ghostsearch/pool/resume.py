"""Resume: what a resumed cell reads back from its run's ledger.

Every value the run's ledger holds for the cell's objective (computed, not a cache hit) answers
that candidate again without scoring it; a race block (search/racing.py) is found by its removed
set, the fidelity it reached and how many rows it scored. The cell's own rows are counted per
candidate, so a replay answered from the ledger adds no row until the cell asks a candidate more
often than its ledger records.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable

from ghostsearch.pool.keys import canonical_fidelity
from ghostsearch.rundir.ledger import LedgerRow, read_ledger

# The ledger's identity of an evaluation of one objective: (removed set, fidelity as keys compare it,
# and for a race block the number of rows it scored; None for a value).
Entry = tuple[tuple[int, ...], float, int | None]


def entry_of(removed: Iterable[int], fidelity: float, block: int | None = None) -> Entry:
    return tuple(int(i) for i in removed), canonical_fidelity(fidelity), block


@dataclass
class Resume:
    """The ledgered evaluations of one cell's objective (``objective_key``) that a resumed cell
    replays, and how many rows the cell (``cell``) already has per evaluation."""

    objective_key: str
    cell: str
    known: dict[Entry, LedgerRow] = field(default_factory=dict)  # computed rows, the latest per entry
    replays: dict[Entry, int] = field(default_factory=dict)  # this cell's rows not yet replayed

    def load(self, run_dir: str | Path) -> int:
        """Read the run's ledger; returns how many evaluations it can answer."""
        for d in read_ledger(run_dir).to_pylist():
            self.add(LedgerRow.from_dict(d))
        return len(self.known)

    def add(self, row: LedgerRow) -> None:
        if row.objective_key != self.objective_key:
            return
        key = entry_of(row.removed, row.fidelity, None if row.row_losses is None else len(row.row_losses))
        if not row.cached:
            self.known[key] = row
        if row.cell == self.cell:
            self.replays[key] = self.replays.get(key, 0) + 1

    def value(self, removed: Iterable[int], fidelity: float) -> LedgerRow | None:
        """The ledgered evaluation of ``removed`` at ``fidelity``, if any."""
        return self.known.get(entry_of(removed, fidelity))

    def block(self, removed: Iterable[int], fidelity: float, n_rows: int) -> LedgerRow | None:
        """The ledgered race block of ``removed`` that scored ``n_rows`` rows and reached ``fidelity``."""
        return self.known.get(entry_of(removed, fidelity, n_rows))

    def is_new(self, key: Entry) -> bool:
        """Whether the cell's answer for ``key`` is a new row (False: the ledger already holds this
        cell's row for it, which this answer replays; counted once)."""
        if self.replays.get(key, 0) > 0:
            self.replays[key] -= 1
            return False
        return True
