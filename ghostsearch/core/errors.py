"""The one exception type a user can cause. The CLI prints its message as one line, no traceback."""


class GhostsearchError(Exception):
    """Bad input or an unusable environment. The message names the problem and the fix."""
