"""Shared helpers for the policy tests: write a policy to a file and load it."""

from __future__ import annotations

import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from desched.framework.policy import Policy
from desched.plugins.catalog import PLUGINS
from desched.policy_files.loader import load_policy, policy_from_document


@pytest.fixture
def write_policy(tmp_path: Path) -> Callable[[str], str]:
    """Write a (dedented) YAML string to a file in tmp_path and return its path."""
    counter = iter(range(1_000_000))

    def write(text: str, name: str | None = None) -> str:
        path = tmp_path / (name or f"policy-{next(counter)}.yaml")
        path.write_text(textwrap.dedent(text), encoding="utf-8")
        return str(path)

    return write


@pytest.fixture
def load_yaml(write_policy: Callable[[str], str]) -> Callable[[str], Policy]:
    """Load a policy given as a YAML string, through the real file loader."""

    def load(text: str) -> Policy:
        return load_policy(write_policy(text), PLUGINS)

    return load


POLICY_PATH = "policy.yaml"


@pytest.fixture
def from_yaml() -> Callable[[str], Policy]:
    """Load a policy document given as YAML text (no file) via policy_from_document; errors
    name the path "policy.yaml"."""

    def load(text: str) -> Policy:
        doc: Any = yaml.safe_load(textwrap.dedent(text))
        return policy_from_document(POLICY_PATH, doc, PLUGINS)

    return load
