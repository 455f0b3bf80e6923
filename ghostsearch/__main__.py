"""`python -m ghostsearch ...` (for Ray images where the console script is not installed)."""

import sys

from ghostsearch.cli import main

sys.exit(main())
