"""Installing a plugin package for a test, as `pip install --target DIR` would leave it, without
building a wheel: its packages copied from its source tree and a `.dist-info` written from its
pyproject.toml (METADATA, entry_points.txt, RECORD). A process with DIR on its PYTHONPATH then
finds the package's entry points through importlib.metadata, as desched does.

Building with pip would need a wheel builder in .venv, and setuptools from PyPI with build
isolation: slow and networked. What pip would take from pyproject.toml for the entry points
(its `[project]` name, version and `entry-points`) is read the same way here."""

from __future__ import annotations

import os
import re
import shutil
import sys
import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
EXAMPLE = REPO / "examples" / "out-of-tree-plugin"


def install(project: Path, target: Path) -> Path:
    """Install the setuptools project at `project` (a src layout, as the example's) into
    `target`; returns `target`."""
    meta = tomllib.loads((project / "pyproject.toml").read_text(encoding="utf-8"))
    info = meta["project"]
    where = meta.get("tool", {}).get("setuptools", {}).get("packages", {}).get(
        "find", {}).get("where", ["."])
    target.mkdir(parents=True, exist_ok=True)
    copied: list[Path] = []
    for root in where:
        for package in sorted((project / root).iterdir()):
            if (package / "__init__.py").is_file():
                shutil.copytree(package, target / package.name,
                                ignore=shutil.ignore_patterns("__pycache__"))
                copied.append(target / package.name)
    name = re.sub(r"[-_.]+", "_", info["name"]).lower()
    dist = target / f"{name}-{info['version']}.dist-info"
    dist.mkdir()
    requires = "".join(f"Requires-Dist: {r}\n" for r in info.get("dependencies", []))
    (dist / "METADATA").write_text(
        f"Metadata-Version: 2.1\nName: {info['name']}\nVersion: {info['version']}\n"
        f"Summary: {info.get('description', '')}\n{requires}", encoding="utf-8")
    groups = info.get("entry-points", {})
    (dist / "entry_points.txt").write_text("".join(
        f"[{group}]\n" + "".join(f"{key} = {value}\n" for key, value in points.items()) + "\n"
        for group, points in groups.items()), encoding="utf-8")
    (dist / "INSTALLER").write_text("desched-tests\n", encoding="utf-8")
    files = [p for root in (*copied, dist) for p in sorted(root.rglob("*")) if p.is_file()]
    (dist / "RECORD").write_text("".join(f"{p.relative_to(target)},,\n" for p in files)
                                 + f"{(dist / 'RECORD').relative_to(target)},,\n",
                                 encoding="utf-8")
    return target


def env_with(*paths: Path) -> dict[str, str]:
    """This process's environment with `paths` first on PYTHONPATH (the installed packages)."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([*map(str, paths),
                                         *filter(None, [env.get("PYTHONPATH", "")])])
    env.pop("DESCHED_DEBUG", None)
    return env


def desched_command() -> list[str]:
    return [sys.executable, "-m", "desched"]


def write_package(root: Path, distribution: str, module: str, source: str,
                  entry_points: dict[str, str], version: str = "1.0") -> Path:
    """A one-module project at `root` (pyproject.toml and src/<module>/__init__.py holding
    `source`) declaring `entry_points` in desched.plugins; returns `root`."""
    (root / "src" / module).mkdir(parents=True)
    (root / "src" / module / "__init__.py").write_text(source, encoding="utf-8")
    points = "".join(f'{name} = "{value}"\n' for name, value in entry_points.items())
    (root / "pyproject.toml").write_text(
        f'[project]\nname = "{distribution}"\nversion = "{version}"\n\n'
        f'[project.entry-points."desched.plugins"]\n{points}\n'
        f'[tool.setuptools.packages.find]\nwhere = ["src"]\n', encoding="utf-8")
    return root
