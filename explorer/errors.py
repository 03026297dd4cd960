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
