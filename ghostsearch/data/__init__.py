"""data, above search and below the model: corpora and task items and their loading (corpora.py),
the seeded item draw (items.py), and the data plan, what a run reads (dataplan.py)."""
