"""Aggregated policy errors, printed the way upstream's utilerrors.NewAggregate prints them."""

from __future__ import annotations

from desched.decoding.go import aggregate
from desched.errors import InputError


class PolicyError(InputError):
    """An invalid policy file."""

    def __init__(self, path: str, messages: list[str] | str) -> None:
        msgs = [messages] if isinstance(messages, str) else messages
        super().__init__(path, aggregate(msgs))
        self.messages = msgs


class DecodeError(InputError):
    """Upstream's `failed decoding descheduler's policy config "<file>": <err>` (names the file)."""

    def __init__(self, path: str, detail: str) -> None:
        super().__init__("", f'failed decoding descheduler\'s policy config "{path}": {detail}')
        self.detail = detail
