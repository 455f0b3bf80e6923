"""model, above search: a decoder as blocks that can be skipped (stack.py), loading (models.py),
devices (placement.py), memory plans (memplan.py); corpora and task items are ghostsearch/data/."""
