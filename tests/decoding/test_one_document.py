"""A configuration file's one YAML document (decoding/document.py)."""

from __future__ import annotations

import pytest

from desched.decoding.document import one_document
from desched.errors import InputError


def test_the_one_document_of_a_file() -> None:
    assert one_document("f.yaml", "---\na: 1\n", "policy") == {"a": 1}


def test_empty_documents_do_not_count() -> None:
    assert one_document("f.yaml", "---\n---\na: [1, 2]\n---\n", "policy") == {"a": [1, 2]}


@pytest.mark.parametrize(("text", "message"), [
    ("", "f.yaml: expected one policy document, found 0"),
    ("a: 1\n---\nb: 2\n", "f.yaml: expected one policy document, found 2"),
    ("a: [1\n", "f.yaml: invalid YAML: line 2: did not find expected ',' or ']'"),
    ("[" * 300 + "]" * 300, "f.yaml: line 1: nesting deeper than 256 levels"),
])
def test_a_file_without_exactly_one_readable_document(text: str, message: str) -> None:
    with pytest.raises(InputError) as err:
        one_document("f.yaml", text, "policy")
    assert str(err.value) == message
