"""study, above evaluation: what the commands decide: compare (a grid on one pool), claims (verdicts),
report/, plan (what a run costs), target (the largest certified k)."""
