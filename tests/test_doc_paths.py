"""Every module path the docs, docstrings and comments cite exists: `live/eviction_api.py`,
`scheduler/config/`, `snapshot/workloads`, `tests/live/fake_clock.py`. A module that moves
leaves no reader sent to where it was."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "src" / "desched"
# Where a cited path may be read from: the package (how the docs name modules), the repository,
# the tests, an example package's own tree (examples/out-of-tree-plugin/).
BASES = (PACKAGE, ROOT, ROOT / "tests", *(p for p in ROOT.glob("examples/*") if p.is_dir()))
PACKAGES = {p.name for p in PACKAGE.iterdir() if (p / "__init__.py").exists()}
TOPS = PACKAGES | {"src", "tests", "bench", "scripts", "docs", "examples", "deploy"}
# Paths of two parts or more: a .py file or a folder (trailing slash) under one of TOPS, or a
# module named without its .py under one of desched's packages (`snapshot/workloads`).
CITED = re.compile(r"(?<![\w./-])((?:[a-z_][\w-]*/)+(?:[\w-]+\.py|[a-z_]\w*)?)(?![\w/-]|\.\w)")
BARE = re.compile(r"(?<![\w./-])([a-z_]\w*\.py)(?![\w/-]|\.\w)")
# Not desched's: API versions (policy/v1) and kube-scheduler's Go packages named in comments.
FOREIGN = re.compile(r"v\d\w*|framework/runtime")


def texts() -> list[Path]:
    return sorted(p for p in {
        *ROOT.glob("docs/**/*.md"), ROOT / "README.md", *ROOT.glob("*/README.md"),
        *ROOT.glob("tests/**/README.md"), *PACKAGE.rglob("*.py"), *ROOT.glob("bench/*.py"),
        *ROOT.glob("tests/**/*.py"), *ROOT.glob("scripts/*")}
        if p.is_file() and p != Path(__file__).resolve())  # this file's examples are made up


def cited(text: str) -> list[str]:
    """The paths `text` cites that this test checks."""
    found = []
    for match in CITED.finditer(text):
        path = match.group(1)
        parts = path.rstrip("/").split("/")
        if path.endswith((".py", "/")):
            if parts[0] in TOPS:
                found.append(path)
        elif parts[0] in PACKAGES and not FOREIGN.fullmatch(parts[-1]) \
                and not FOREIGN.fullmatch(path):
            found.append(path)
    return found


def exists(path: str, near: Path) -> bool:
    return any((base / path).exists() or (base / f"{path}.py").exists()
               for base in (*BASES, near))


def test_every_cited_module_path_exists() -> None:
    stale = {str(p.relative_to(ROOT)): missing for p in texts()
             if (missing := [c for c in cited(p.read_text(errors="replace"))
                             if not exists(c, p.parent)])}
    assert stale == {}


def test_every_module_cited_by_name_alone_exists_somewhere() -> None:
    """`types.py`, `planner.py`: named in the text about its folder, so only its name is known."""
    modules = {p.name for top in ("src", "tests", "bench", "scripts", "examples")
               for p in (ROOT / top).rglob("*.py")}
    stale = {str(p.relative_to(ROOT)): missing for p in texts()
             if (missing := [m for m in BARE.findall(p.read_text(errors="replace"))
                             if m not in modules])}
    assert stale == {}


def test_the_paths_checked() -> None:
    text = ("`live/eviction_api.py`, `scheduler/config/`, `snapshot/workloads`, "
            "policy/v1 PodDisruptionBudgets, kube-scheduler's `framework/runtime`, "
            "`framework/plugins/registry.go`, tests/live/fake_clock.py, shop/web")
    assert cited(text) == ["live/eviction_api.py", "scheduler/config/", "snapshot/workloads",
                           "tests/live/fake_clock.py"]
    assert not exists("snapshot/utilization", ROOT)
