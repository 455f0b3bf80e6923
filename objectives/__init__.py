"""Calibration objectives. Every objective is lower-is-better; each module states its sign.

Registry: ``get_objective(name)`` -> class; names: perplexity, margin, kl.
"""
from objectives.base import REGISTRY, CalibrationSpec, Objective, get_objective, register  # noqa: F401
from objectives import perplexity, margin, kl  # noqa: F401,E402  (register)
