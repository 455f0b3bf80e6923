"""Calibration objectives. Every objective is lower-is-better; each module states its sign.

``OBJECTIVES.get(name)`` -> class; built-in names: perplexity, margin, kl. ``ObjectiveSpec`` is
one objective with its calibration data, parameters and recovery-aware setting.
"""

from ghostsearch.objectives.base import OBJECTIVES, AwareSpec, CalibrationSpec, Objective, ObjectiveSpec

__all__ = ["OBJECTIVES", "AwareSpec", "CalibrationSpec", "Objective", "ObjectiveSpec"]
