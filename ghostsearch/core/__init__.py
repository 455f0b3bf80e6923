"""core, the bottom layer: errors, atomic io, logs, interrupts, registries, tracking and the records
every layer passes (a finalist's numbers, a comparison row, lm-eval's results file). No model, no
run."""
