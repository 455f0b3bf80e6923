"""`python -m ghostsearch.cli ...`, the same as `python -m ghostsearch ...` and `ghostsearch ...`."""

import sys

from ghostsearch.cli.main import main

if __name__ == "__main__":  # importing the package's modules (tests list them) must not run the CLI
    sys.exit(main())
