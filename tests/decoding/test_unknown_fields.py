"""Keys a document holds that its schema does not name (decoding/unknown_fields.py)."""

from __future__ import annotations

from typing import Any

import msgspec

from desched.decoding.unknown_fields import ARGS_TYPE_META, describe, info, unknown_fields, visit


class _Item(msgspec.Struct, rename="camel"):
    max_skew: int = 0


class _Doc(msgspec.Struct, rename="camel"):
    profiles: list[_Item] = []
    by_name: dict[str, _Item] = {}
    pair: tuple[_Item, _Item] | None = None
    name: str | _Item = ""


def test_every_unknown_key_in_document_order_with_the_nearest_known_name() -> None:
    doc: dict[str, Any] = {
        "profile": [],
        "profiles": [{"maxSkew": 1}, {"maxskew": 2}],
        "byName": {"a": {"maxSkw": 1}},
        "pair": [{}, {"other": 1}],
        "name": {"maxSkew": 1, "zzz": 0},
    }
    assert unknown_fields(doc, _Doc) == [
        ("profile", "profiles"),
        ("profiles[1].maxskew", "maxSkew"),
        ("byName.a.maxSkw", "maxSkew"),
        ("pair[1].other", None),
        ("name.zzz", None),
    ]


def test_extra_names_are_accepted_at_the_top_only() -> None:
    doc = {"apiVersion": "v1", "kind": "K", "profiles": [{"kind": "K"}]}
    assert unknown_fields(doc, _Doc, "args", extra=ARGS_TYPE_META) == [
        ("args.profiles[0].kind", None)]


def test_values_of_the_wrong_shape_are_not_walked() -> None:
    assert unknown_fields({"profiles": "x", "byName": [1]}, _Doc) == []


def test_visit_gives_each_place_its_schema_type() -> None:
    places = [place for place, _, _ in visit({"profiles": [{"maxSkew": 1}]}, info(_Doc))]
    assert places == ["", "profiles", "profiles[0]", "profiles[0].maxSkew"]


def test_one_warning_sentence_per_unknown_field() -> None:
    assert describe("f.yaml", [("profile", "profiles"), ("x.y", None)]) == [
        'f.yaml: unknown field "profile" (did you mean "profiles"?); it is ignored',
        'f.yaml: unknown field "x.y"; it is ignored',
    ]
