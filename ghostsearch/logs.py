"""Process-wide library settings, applied by the CLI and by every Ray worker ghostsearch starts."""
from __future__ import annotations

import os


def quiet_libraries() -> None:
    """No tokenizer fork warnings, no transformers info lines or download bars."""
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    try:
        import transformers

        transformers.utils.logging.set_verbosity_error()
        transformers.utils.logging.disable_progress_bar()
    except Exception:  # noqa: BLE001  (transformers missing or changed: only cosmetic)
        pass


def setup_logging(verbosity: int = 0) -> None:
    """The CLI's progress messages: ``ghostsearch: ...`` lines on stderr through ``logging`` (the
    JSON result lines stay on stdout). verbosity -1 (-q): warnings only, no progress bars;
    0: progress; 1 (-v): debug."""
    import logging
    import sys

    level = logging.WARNING if verbosity < 0 else logging.INFO if verbosity == 0 else logging.DEBUG
    log = logging.getLogger("ghostsearch")
    log.setLevel(level)
    if not any(getattr(h, "_ghostsearch", False) for h in log.handlers):
        h = logging.StreamHandler(sys.stderr)
        h.setFormatter(logging.Formatter("ghostsearch: %(message)s"))
        h._ghostsearch = True  # noqa: SLF001  (ours, so a second call does not add another)
        log.addHandler(h)
    log.propagate = False


def progress_enabled() -> bool:
    """Progress bars unless the CLI was run with -q (a library caller gets them as before)."""
    import logging

    log = logging.getLogger("ghostsearch")
    return not log.handlers or log.level <= logging.INFO
