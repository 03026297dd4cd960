"""User-facing errors.

Every failure a user can cause (a bad model name, an impossible parameter, a malformed trace file) is
raised as an ``ExplorerError`` whose message is one readable line that says what went wrong and what to
do. The CLI prints it without a stack trace; the app shows it in the page.
"""


class ExplorerError(Exception):
    """A problem the user can fix; ``str(err)`` is the whole message."""


class ModelLoadError(ExplorerError):
    """A model could not be found or loaded."""


class TraceFormatError(ExplorerError):
    """A trace file is malformed or comes from another program."""


def one_line(message: object, limit: int = 290) -> str:
    """A message as the user sees it: one line, at most ``limit`` characters (an error may quote a value
    the user typed, and a value may be 100 000 characters long or hold line breaks)."""
    text = " ".join(str(message).split())
    return text if len(text) <= limit else text[: limit - 1] + "…"
