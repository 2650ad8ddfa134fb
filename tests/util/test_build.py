"""util/build.py: the commit and branch read from a source checkout's .git files (loose ref,
packed ref, detached HEAD, a worktree), and nothing for a copy that is not a checkout."""

from __future__ import annotations

from pathlib import Path

from desched.util.build import _read_git

SHA = "0123456789abcdef0123456789abcdef01234567"


def checkout(tmp_path: Path) -> tuple[Path, Path]:
    """(the package directory ROOT/src/desched, ROOT/.git)."""
    package = tmp_path / "src" / "desched"
    package.mkdir(parents=True)
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'desched'\n")
    git = tmp_path / ".git"
    git.mkdir()
    return package, git


def test_loose_ref(tmp_path: Path) -> None:
    package, git = checkout(tmp_path)
    (git / "HEAD").write_text("ref: refs/heads/release-0.1\n")
    (git / "refs" / "heads").mkdir(parents=True)
    (git / "refs" / "heads" / "release-0.1").write_text(SHA + "\n")
    assert _read_git(package) == (SHA, "release-0.1")


def test_packed_ref(tmp_path: Path) -> None:
    package, git = checkout(tmp_path)
    (git / "HEAD").write_text("ref: refs/heads/main\n")
    (git / "packed-refs").write_text(f"# pack-refs with: peeled\n{SHA} refs/heads/main\n")
    assert _read_git(package) == (SHA, "main")


def test_detached_head_has_no_branch(tmp_path: Path) -> None:
    package, git = checkout(tmp_path)
    (git / "HEAD").write_text(SHA + "\n")
    assert _read_git(package) == (SHA, "")


def test_worktree(tmp_path: Path) -> None:
    main = tmp_path / "main"
    main.mkdir()
    _, common = checkout(main)
    (common / "refs" / "heads").mkdir(parents=True)
    (common / "refs" / "heads" / "topic").write_text(SHA + "\n")
    private = common / "worktrees" / "wt"
    private.mkdir(parents=True)
    (private / "HEAD").write_text("ref: refs/heads/topic\n")
    (private / "commondir").write_text("../..\n")
    tree = tmp_path / "wt"
    (tree / "src" / "desched").mkdir(parents=True)
    (tree / "pyproject.toml").write_text("")
    (tree / ".git").write_text(f"gitdir: {private}\n")
    assert _read_git(tree / "src" / "desched") == (SHA, "topic")


def test_an_installed_copy_is_not_a_checkout(tmp_path: Path) -> None:
    # site-packages/desched inside a venv inside some repository: not desched's commit.
    package = tmp_path / ".venv" / "lib" / "site-packages" / "desched"
    package.mkdir(parents=True)
    (tmp_path / ".git").mkdir()
    (tmp_path / ".git" / "HEAD").write_text(SHA + "\n")
    assert _read_git(package) is None
