"""Errors that reach the user as one line and exit code 2."""

from __future__ import annotations

import re


def one_line(text: str) -> str:
    """`text` with every unprintable character (newlines, other line breaks such as U+2028,
    control characters) escaped, so it prints as exactly one line."""
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


def quote(value: object) -> str:
    """A user-supplied name for a message: double-quoted, control characters escaped
    (`"a\\nb"`), so a name can neither break the line nor pass for message text."""
    text = str(value).replace("\\", "\\\\").replace('"', '\\"')
    return f'"{one_line(text)}"'


def shown(value: object) -> str:
    """A user-supplied name where upstream's message prints it bare: bare when it is a plain
    name (letters, digits, `-._/:`), else quoted as `quote` does."""
    text = str(value)
    return text if _PLAIN.fullmatch(text) else quote(text)


_PLAIN = re.compile(r"[A-Za-z0-9._/:-]+")


class InputError(Exception):
    """Invalid input (policy, snapshot, flags): reported as one line, exit code 2. Whatever the
    message quotes from the input, it is printed on one line."""

    def __init__(self, source: str, message: str) -> None:
        super().__init__(one_line(f"{source}: {message}" if source else message))
        self.source = source
        self.message = message
