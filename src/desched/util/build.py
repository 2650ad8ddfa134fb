"""What build of desched is running: its version and the git commit and branch it came from.

Upstream stamps these into the binary at link time (pkg/version); a Python package has no link
step, so they are read where they are recorded: the installed distribution's version, and the
commit either from the git checkout the package is imported from (a development or editable
install) or from pip's record of a VCS install (PEP 610 `direct_url.json`). Where neither
exists (an install from a plain directory or wheel), the commit and branch stay empty.
"""

from __future__ import annotations

import json
import platform
from dataclasses import dataclass
from functools import cache
from importlib import metadata
from pathlib import Path

DIST = "desched"


@dataclass(frozen=True)
class BuildInfo:
    version: str  # the distribution's version, e.g. 0.1.0 ("dev" when not installed)
    git_sha1: str
    git_branch: str

    @property
    def git_version(self) -> str:
        """Upstream's GitVersion style: the version tag."""
        return self.version if self.version == "dev" else f"v{self.version}"

    @property
    def runtime(self) -> str:
        """The language runtime, as Go's runtime.Version() names its own (go1.24.4)."""
        return f"python{platform.python_version()}"


def _read_git(package: Path) -> tuple[str, str] | None:
    """(sha1, branch) of the checkout when the package is imported from its source tree
    (ROOT/src/desched, ROOT holding pyproject.toml and .git), from .git's files (no git binary
    needed, none may be installed); None for an installed copy, even in a venv inside some
    other repository."""
    root = package.parents[1]
    if package.parent.name != "src" or not (root / "pyproject.toml").is_file():
        return None
    dot_git = root / ".git"
    if dot_git.is_file():  # a worktree: "gitdir: PATH"
        text = dot_git.read_text().strip()
        if not text.startswith("gitdir:"):
            return None
        dot_git = (root / text.removeprefix("gitdir:").strip()).resolve()
    return _resolve_head(dot_git) if dot_git.is_dir() else None


def _resolve_head(git_dir: Path) -> tuple[str, str] | None:
    try:
        head = (git_dir / "HEAD").read_text().strip()
    except OSError:
        return None
    if not head.startswith("ref:"):
        return head, ""  # detached
    ref = head.removeprefix("ref:").strip()
    branch = ref.removeprefix("refs/heads/")
    # A worktree's refs live in the common directory.
    common = git_dir
    if (git_dir / "commondir").is_file():
        common = (git_dir / (git_dir / "commondir").read_text().strip()).resolve()
    for base in (git_dir, common):
        loose = base / ref
        if loose.is_file():
            return loose.read_text().strip(), branch
    packed = common / "packed-refs"
    if packed.is_file():
        for line in packed.read_text().splitlines():
            sha, _, name = line.partition(" ")
            if name == ref:
                return sha, branch
    return "", branch  # a branch with no commit yet


def _pip_vcs_record() -> tuple[str, str] | None:
    try:
        text = metadata.distribution(DIST).read_text("direct_url.json")
    except metadata.PackageNotFoundError:
        return None
    if not text:
        return None
    vcs = json.loads(text).get("vcs_info") or {}
    if not vcs.get("commit_id"):
        return None
    return str(vcs["commit_id"]), str(vcs.get("requested_revision") or "")


@cache
def build_info() -> BuildInfo:
    try:
        version = metadata.version(DIST)
    except metadata.PackageNotFoundError:
        version = "dev"
    git = _read_git(Path(__file__).resolve().parents[1]) or _pip_vcs_record() or ("", "")
    return BuildInfo(version, *git)
