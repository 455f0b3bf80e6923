"""Training-free repair of pruned cuts (ghosted, linearpatch, replaceme, none), recovery-aware
scoring, and pruned-model export. See base.py for the protocol."""
from ghostsearch.recovery.base import Calibration, Operators, Recovery, cuts, get_recovery  # noqa: F401
