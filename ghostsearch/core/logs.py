"""Process-wide library settings, applied by the CLI and by every Ray worker ghostsearch starts."""

from __future__ import annotations

import logging
import os
import sys


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
    level = logging.WARNING if verbosity < 0 else logging.INFO if verbosity == 0 else logging.DEBUG
    log = logging.getLogger("ghostsearch")
    log.setLevel(level)
    if not any(isinstance(h, _Stderr) for h in log.handlers):
        h = _Stderr()
        h.setFormatter(logging.Formatter("ghostsearch: %(message)s"))
        log.addHandler(h)
    log.propagate = False


class _Stderr(logging.StreamHandler):
    """Writes to whatever sys.stderr is at the time of the message (not at set-up: a caller, a
    test's capture or a notebook may have replaced it since)."""

    def emit(self, record):
        self.stream = sys.stderr
        super().emit(record)


def progress_enabled() -> bool:
    """Progress bars unless the CLI was run with -q (a library caller gets them as before)."""
    log = logging.getLogger("ghostsearch")
    return not log.handlers or log.level <= logging.INFO
