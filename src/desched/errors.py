"""Errors that reach the user as one line and exit code 2."""

from __future__ import annotations

import re
import sys
from collections.abc import Collection, Iterator
from contextlib import contextmanager


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


# -- warnings ------------------------------------------------------------------------------------
# A command whose input is refused prints one line, the error: warnings about an input that is
# then refused (a snapshot's missing kinds before its bad item) would only bury it. Commands that
# finish (simulate, explain, validate) therefore hold their warnings and print them once the run
# has succeeded (commands/cli.py); long-running ones print them at once.
_held: list[str] | None = None


def warn(message: str) -> None:
    """A warning as the commands print one: a line on stderr (held while `holding`)."""
    line = f"warning: {one_line(message)}"
    if _held is not None:
        _held.append(line)
    else:
        print(line, file=sys.stderr)


@contextmanager
def holding() -> Iterator[None]:
    """Hold warnings inside the block: printed when it ends normally (or on `release`),
    dropped when it raises InputError."""
    global _held
    outer, _held = _held, []
    try:
        yield
        release()
    finally:
        _held = outer


def release(skip: Collection[str] = ()) -> None:
    """Print the warnings held so far, but those whose message is in `skip` (already shown
    where the user reads them)."""
    if not _held:
        return
    dropped = {f"warning: {one_line(m)}" for m in skip}
    for line in _held:
        if line not in dropped:
            print(line, file=sys.stderr)
    _held.clear()
