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
