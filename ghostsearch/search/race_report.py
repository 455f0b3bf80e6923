"""What a cell's result says of a searcher's races (``CellResult.race``), kept out of the Searcher
base (as Ray Tune keeps behaviour that cuts across searchers in wrappers): ``search.run`` counts, in
the searcher's ``race_tally`` (a ``RaceTally``), the races asked, those scored exactly because no look
could pay, the candidates the ``cut`` heuristic dropped without the bound, and ``race: auto``'s
look-cost estimate; ``race_report`` turns them and the searcher's race setting into the record."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass
class RaceTally:
    """What ``search.run`` saw of one searcher's races."""

    asked: int = 0  # races asked
    exact: int = 0  # of them, scored exactly because no look could pay (race: auto)
    cut: int = 0  # candidates the race's ``cut`` heuristic dropped on partial means (no bound)
    look_costs: dict | None = None  # race: auto's frozen look-cost estimate (racing.LookCosts.frozen)


def race_report(searcher: Any) -> dict | None:
    """Which scoring a searcher with a ``race`` parameter used, for the cell's result: ``used``
    ``raced`` or ``exact`` (``auto`` races from 32 calibration rows, and scores a race exactly
    where no look of it could pay: ``exact`` when it did so for every race), the rows, how many
    candidates the ``cut`` heuristic dropped without the bound (0 unless a searcher asks for
    it), the bound; ``races``: races asked, ``exact_races``: those scored exactly because no look
    could pay, ``look_costs``: ``auto``'s measured look cost (racing.LookCosts.frozen: look_s,
    row_s, look_rows, looks timed, ...; None when not measured). None without a race parameter."""
    racing = getattr(searcher, "racing", None)
    if racing is None or not hasattr(searcher.params, "race"):
        return None
    rp = racing()
    t: RaceTally = searcher.race_tally
    every_race_exact = t.asked > 0 and t.exact == t.asked
    return {
        "setting": searcher.params.race if isinstance(searcher.params.race, (bool, str)) else "custom",
        "used": "raced" if rp and not every_race_exact else "exact",
        "rows": searcher.rows,
        "cut": t.cut,
        "bound": rp.bound if rp else None,
        "races": t.asked,
        "exact_races": t.exact,
        "look_costs": t.look_costs,
    }
