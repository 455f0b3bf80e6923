"""The ``ghostsearch`` command: ``main.py`` builds the parser from the explicit list of command
modules (one per command); each module has ``add(sub)`` and ``run(args)``."""

from ghostsearch.cli.main import main

__all__ = ["main"]
