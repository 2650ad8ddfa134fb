"""A configuration file's one YAML document."""

from __future__ import annotations

from typing import Any

import yaml

from desched.errors import InputError
from desched.util import yamlguard


def one_document(source: str, text: str, what: str) -> Any:
    """The one YAML document of a configuration file (`what` names it in errors), read with
    yamlguard's limits; InputError naming `source` otherwise."""
    try:
        docs = [d for d in yamlguard.load_all(text) if d is not None]
    except yaml.YAMLError as err:
        raise InputError(source, f"invalid YAML: {yamlguard.describe_yaml_error(err)}") from None
    except yamlguard.YamlLimitError as err:
        raise InputError(source, str(err)) from None
    if len(docs) != 1:
        raise InputError(source, f"expected one {what} document, found {len(docs)}")
    return docs[0]
