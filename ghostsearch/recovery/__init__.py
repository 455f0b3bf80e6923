"""Training-free repair of pruned cuts (ghosted, linearpatch, replaceme, none), recovery-aware
scoring (aware.py), one repair path from a config (repair.py) and pruned-model export (export.py).
See base.py for the protocol."""

from ghostsearch.recovery.base import RECOVERY, Activations, Operators, Recovery, cuts, get_recovery

__all__ = ["RECOVERY", "Activations", "Operators", "Recovery", "cuts", "get_recovery"]
