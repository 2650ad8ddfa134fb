"""The Layers contract (pyproject.toml, docs/architecture.md) names every module: import-linter's
`exhaustive` sees only the children of `desched`, and the modules of commands/, simulate/ and
report/ are layers of their own, so a module added there must be named in a layer too."""

from __future__ import annotations

import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "src" / "desched"


def _layers_contract() -> dict[str, object]:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    (contract,) = [c for c in config["tool"]["importlinter"]["contracts"]
                   if c["type"] == "layers"]
    return contract


def _named(contract: dict[str, object]) -> set[str]:
    layers = contract["layers"]
    assert isinstance(layers, list)
    return {name.strip() for layer in layers for name in layer.split("|")}


def test_every_module_of_a_package_split_into_layers_is_named() -> None:
    contract = _layers_contract()
    split = contract["exhaustive_ignores"]
    assert isinstance(split, list)
    assert sorted(split) == ["commands", "report", "simulate"]
    modules = {f"{package}.{path.stem}" for package in split
               for path in (PACKAGE / package).glob("*.py") if path.stem != "__init__"}
    assert modules - _named(contract) == set()
    # and none named is missing, so the contract says what the tree holds
    assert {n for n in _named(contract) if n.split(".")[0] in split} == modules


def test_no_package_split_into_layers_has_subpackages() -> None:
    """A subpackage would be a child the contract does not see."""
    split = _layers_contract()["exhaustive_ignores"]
    assert isinstance(split, list)
    assert [p for package in split for p in (PACKAGE / package).iterdir()
            if p.is_dir() and p.name != "__pycache__"] == []
