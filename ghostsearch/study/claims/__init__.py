"""The study's verdicts, computed from a compare run (never written by hand): ``base`` (the verdict
row, the decision rule, the family, the Markdown table, claims of paired models), one module per
paper's claims (``search_paper``: the search paper's, run on every compare; ``ghosted_paper``:
the Ghosted paper's, on the Ghosted study). The item matrix and its bootstraps are
``ghostsearch.stats.bootstrap``."""
