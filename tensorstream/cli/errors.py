"""The one error type of the ``tensorstream`` command."""


class CLIError(ValueError):
    """A user error with a ready-made one-line message."""
