"""Errors that reach the user as one line and exit code 2."""


class InputError(Exception):
    """Invalid input (policy, snapshot, flags): reported as one line, exit code 2."""

    def __init__(self, source: str, message: str) -> None:
        super().__init__(f"{source}: {message}" if source else message)
        self.source = source
        self.message = message
