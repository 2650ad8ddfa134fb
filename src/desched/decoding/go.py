"""Go's conventions both readers reproduce: the ranges of its integer types, and how
apimachinery's utilerrors.NewAggregate prints several errors."""

from __future__ import annotations

from typing import Annotated

import msgspec

# Go's integer types: a JSON number out of range is a decode error there, not a huge Python int
# here (an int32 threshold nothing can reach). (msgspec cannot bound beyond int64, so Go's uint
# fields keep plain ints and their own checks.)
Int32 = Annotated[int, msgspec.Meta(ge=-(2**31), le=2**31 - 1)]
Int64 = Annotated[int, msgspec.Meta(ge=-(2**63), le=2**63 - 1)]


def aggregate(messages: list[str]) -> str:
    """One error prints bare; several print as `[e1, e2]`."""
    if len(messages) == 1:
        return messages[0]
    return "[" + ", ".join(messages) + "]"
