"""stats, above core: paired intervals and tests, Holm, power and group-sequential bounds
(inference.py), pre-registered contrasts, adaptive looks and the certification rule of `ghostsearch
target`. numpy only: no model, no run."""
