"""`python -m ghostsearch.cli ...`, the same as `python -m ghostsearch ...` and `ghostsearch ...`."""

import sys

from ghostsearch.cli.main import main

sys.exit(main())
