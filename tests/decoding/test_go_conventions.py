"""Go's integer ranges and aggregated errors (decoding/go.py)."""

from __future__ import annotations

import msgspec
import pytest

from desched.decoding.go import Int32, Int64, aggregate


class _Numbers(msgspec.Struct):
    small: Int32 = 0
    large: Int64 = 0


def test_numbers_within_gos_ranges_decode() -> None:
    got = msgspec.convert({"small": 2**31 - 1, "large": -(2**63)}, _Numbers)
    assert (got.small, got.large) == (2**31 - 1, -(2**63))


@pytest.mark.parametrize(("raw", "message"), [
    ({"small": 2**31}, "Expected `int` <= 2147483647 - at `$.small`"),
    ({"small": -(2**31) - 1}, "Expected `int` >= -2147483648 - at `$.small`"),
    ({"large": 2**63}, "Expected `int` <= 9223372036854775807 - at `$.large`"),
])
def test_a_number_out_of_gos_range_is_a_decode_error(raw: dict[str, int], message: str) -> None:
    with pytest.raises(msgspec.ValidationError) as err:
        msgspec.convert(raw, _Numbers)
    assert str(err.value) == message


def test_one_error_prints_bare_several_in_brackets() -> None:
    assert aggregate(["a: bad"]) == "a: bad"
    assert aggregate(["a: bad", "b: worse"]) == "[a: bad, b: worse]"
