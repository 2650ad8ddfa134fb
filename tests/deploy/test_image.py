"""The OCI image scripts/build-image builds (docs/deploy.md, "Build the image"): its config, what
its root filesystem holds, and its entrypoint running `desched simulate` on the shipped example
in a chroot, as the image's user, on a read-only root filesystem. It is built with the example
plugin package (`--plugin examples/out-of-tree-plugin`, docs/writing-plugins.md), which the
image's desched lists and runs.

The build is cached under a directory keyed by the hash of its inputs (the script, the package
metadata and sources), so only a change to those rebuilds it (about a minute on 2 cores).
scripts/test installs mmdebstrap and umoci; the build and the chroot need root.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tarfile
import time
import tomllib
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "scripts" / "build-image"
EXAMPLES = REPO / "examples"
PLUGIN = EXAMPLES / "out-of-tree-plugin"
VENV = "opt/desched"
NONROOT = 65532
# Cached builds unused for this long are removed by the next build: an entry is about 230 MB
# (layout, archive, unpacked rootfs), and every change to src/ makes a new one.
CACHE_TTL = 3600

pytestmark = [pytest.mark.image, pytest.mark.timeout(1800),  # a first build bootstraps Debian
              pytest.mark.skipif(os.geteuid() != 0,
                                 reason="building and chrooting into the image needs root")]


def project_version() -> str:
    return str(tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["version"])


def inputs_digest() -> str:
    """What the image is built from: the script and what `pip install .` reads, for desched
    and the plugin package."""
    h = hashlib.sha256()
    files = [SCRIPT, REPO / "pyproject.toml", REPO / "README.md", PLUGIN / "pyproject.toml"]
    files += sorted(p for folder in (REPO / "src", PLUGIN / "src") for p in folder.rglob("*")
                    if p.is_file() and "__pycache__" not in p.parts
                    and not any(part.endswith(".egg-info") for part in p.parts))
    for path in files:
        h.update(str(path.relative_to(REPO)).encode() + b"\0" + path.read_bytes() + b"\0")
    return h.hexdigest()[:16]


def prune(cache: Path, keep: Path) -> None:
    for entry in cache.iterdir():
        if entry.is_dir() and entry != keep and time.time() - entry.stat().st_mtime > CACHE_TTL:
            shutil.rmtree(entry, ignore_errors=True)
            (cache / f"{entry.name}.lock").unlink(missing_ok=True)


@pytest.fixture(scope="module")
def image() -> Path:
    """The cache entry: `oci/` and `desched.oci.tar` (the layout and the archive the script
    wrote) and `bundle/` (umoci unpack of the layout, never written to by the tests: the chroot
    binds it read-only)."""
    for tool in ("mmdebstrap", "umoci", "unshare", "chroot"):
        assert shutil.which(tool), f"{tool} is not installed: scripts/test installs it"
    root = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache"))
    cache = root / "desched" / "image"
    cache.mkdir(parents=True, exist_ok=True)
    entry = cache / inputs_digest()
    # Across xdist workers one builds, the other waits and reuses the build; closing the file
    # releases the lock.
    with (cache / f"{entry.name}.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (entry / "done").exists():
            shutil.rmtree(entry, ignore_errors=True)
            entry.mkdir()
            build = subprocess.run([str(SCRIPT), "--layout", str(entry / "oci"),
                                    "--out", str(entry / "desched.oci.tar"),
                                    "--plugin", str(PLUGIN)],
                                   capture_output=True, text=True, timeout=600, check=False)
            assert build.returncode == 0, build.stdout[-3000:] + build.stderr[-3000:]
            unpack = subprocess.run(["umoci", "unpack", "--image",
                                     f"{entry / 'oci'}:{project_version()}",
                                     str(entry / "bundle")],
                                    capture_output=True, text=True, timeout=300, check=False)
            assert unpack.returncode == 0, unpack.stderr
            (entry / "done").write_text(build.stdout)
            prune(cache, entry)
        os.utime(entry)
    return entry


def test_build_image_replaces_only_an_oci_layout(tmp_path: Path) -> None:
    """--layout removes what is there first: a directory that is not an OCI layout is refused
    before anything is built."""
    (tmp_path / "notes.txt").write_text("mine")
    proc = subprocess.run([str(SCRIPT), "--layout", str(tmp_path)], capture_output=True,
                          text=True, timeout=60, check=False)
    assert proc.returncode == 2
    assert proc.stderr == (f"build-image: --layout {tmp_path.resolve()} exists and is not an "
                           "OCI layout\n")
    assert (tmp_path / "notes.txt").read_text() == "mine"


def blob(layout: Path, digest: str) -> Any:
    algorithm, _, value = digest.partition(":")
    return json.loads((layout / "blobs" / algorithm / value).read_bytes())


def image_config(layout: Path) -> tuple[dict[str, Any], dict[str, Any]]:
    """The manifest tagged with desched's version, and its image config."""
    index = json.loads((layout / "index.json").read_text())
    (desc,) = [m for m in index["manifests"]
               if m["annotations"]["org.opencontainers.image.ref.name"] == project_version()]
    manifest = blob(layout, desc["digest"])
    return manifest, blob(layout, manifest["config"]["digest"])


def test_image_config(image: Path) -> None:
    manifest, config = image_config(image / "oci")
    assert config["os"] == "linux"
    c = config["config"]
    assert c["User"] == f"{NONROOT}:{NONROOT}"
    assert c["Entrypoint"] == ["desched"]
    assert c["Cmd"] == ["run", "--policy", "/policy-dir/policy.yaml", "--once"]
    env = dict(e.split("=", 1) for e in c["Env"])
    assert env["PATH"].split(":")[0] == f"/{VENV}/bin"
    assert env["PYTHONDONTWRITEBYTECODE"] == "1"
    assert set(c["ExposedPorts"]) == {"10258/tcp", "10259/tcp"}
    labels = c["Labels"]
    assert labels["org.opencontainers.image.version"] == project_version()
    assert labels["org.opencontainers.image.title"] == "desched"
    # The Debian base and the virtualenv are separate layers (the base is shared between builds).
    assert len(manifest["layers"]) == 2
    size = sum(layer["size"] for layer in manifest["layers"])
    # 61 MiB measured: the base 34, the virtualenv 27 (9 of them grpcio and OpenTelemetry, for
    # --otel-collector-endpoint's OTLP/gRPC exporter).
    assert size < 70 * 1024 * 1024, f"image is {size / 2**20:.0f} MiB compressed"


def test_image_archive_holds_the_layout(image: Path) -> None:
    """--out writes the OCI layout as a tar (what `skopeo copy oci-archive:...` pushes)."""
    layout = image / "oci"
    with tarfile.open(image / "desched.oci.tar") as tar:
        files = {m.name.removeprefix("./"): m for m in tar.getmembers() if m.isfile()}
        index = tar.extractfile(files["index.json"])
        assert index is not None
        assert json.loads(index.read()) == json.loads((layout / "index.json").read_text())
    expected = {str(p.relative_to(layout)) for p in layout.rglob("*") if p.is_file()}
    assert set(files) == expected
    assert "oci-layout" in files


def test_image_holds_desched_and_nothing_to_install_with(image: Path) -> None:
    rootfs = image / "bundle" / "rootfs"
    passwd = (rootfs / "etc" / "passwd").read_text().splitlines()
    assert f"desched:x:{NONROOT}:{NONROOT}:desched:/nonexistent:/usr/sbin/nologin" in passwd
    site = next((rootfs / VENV / "lib").glob("python3.*/site-packages"))
    assert (site / "desched" / "commands/cli.py").is_file()
    # No package installer, no documentation, no package caches.
    assert not list(site.glob("pip*")) and not (rootfs / "usr/share/python-wheels").exists()
    assert not (rootfs / "usr/bin/apt-get").exists()
    assert not [p for p in (rootfs / "usr/share/man").rglob("*") if p.is_file()]
    docs = [p for p in (rootfs / "usr/share/doc").rglob("*") if p.is_file()]
    assert docs and all(p.name == "copyright" for p in docs)
    assert not [p for p in (rootfs / "var/cache/apt").rglob("*.deb")]
    assert not list((rootfs / "var/lib/apt/lists").glob("*_Packages"))
    # Every module is compiled with an unchecked hash: no .pyc is written (or checked against
    # its source's mtime) at run time.
    sources = list((rootfs / VENV).rglob("*.py"))
    assert len(sources) > 500
    for source in sources:
        tag = f"{source.stem}.cpython-{site.parent.name.removeprefix('python').replace('.', '')}"
        pyc = source.parent / "__pycache__" / f"{tag}.pyc"
        assert pyc.is_file(), f"{source} was not compiled"
        flags = int.from_bytes(pyc.read_bytes()[4:8], "little")
        assert flags == 0b01, f"{pyc}: flags {flags:#b}, not an unchecked hash"


def run_in_image(image: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """The image's entrypoint with `args`, as the image's user and environment (umoci's runtime
    config), chrooted into the unpacked rootfs bound read-only, examples/ bound at /mnt."""
    bundle = image / "bundle"
    process = json.loads((bundle / "config.json").read_text())["process"]
    user = f"{process['user']['uid']}:{process['user']['gid']}"
    entrypoint = process["args"][0]  # then the image's Cmd, which `args` replaces
    rootfs, mnt = bundle / "rootfs", bundle / "rootfs" / "mnt"
    script = ('set -e; mount --bind "$1" "$1"; mount -o remount,bind,ro "$1"; '
              'mount --bind "$2" "$3"; mount -o remount,bind,ro "$3"; shift 3; '
              'exec chroot --userspec="$0" "$ROOTFS" "$@"')
    env = dict(e.split("=", 1) for e in process["env"])
    # The host's mount and chroot are found on the image's PATH (/usr/bin, /usr/sbin);
    # `desched` is then found on it inside the chroot, as a container runtime does.
    return subprocess.run(
        ["unshare", "--mount", "--", "sh", "-c", script, user, str(rootfs), str(EXAMPLES),
         str(mnt), entrypoint, *args],
        env={**env, "ROOTFS": str(rootfs)}, capture_output=True, text=True, timeout=120,
        check=False)


def test_image_runs_simulate_as_nonroot_on_a_read_only_root(image: Path) -> None:
    version = run_in_image(image, "--version")
    assert version.returncode == 0, version.stderr
    assert project_version() in version.stdout

    args = ["simulate", "--policy", "/mnt/policy.yaml", "--snapshot", "/mnt/cluster.yaml",
            "--now", "2026-11-22T12:00:00Z"]
    text = run_in_image(image, *args)
    assert text.returncode == 0, text.stderr
    assert "summary: 3 pod(s) evicted in 1 cycle(s)" in text.stdout
    assert "evict   shop/report-28891 on worker-2 [default/PodLifeTime]" in text.stdout
    assert text.stderr == ""

    # The same decisions as this checkout's desched on the host.
    image_json = run_in_image(image, *args, "--output", "json")
    assert image_json.returncode == 0, image_json.stderr
    host = subprocess.run(
        [sys.executable, "-m", "desched", *[a.replace("/mnt", str(EXAMPLES)) for a in args],
         "--output", "json"], capture_output=True, text=True, timeout=120, check=False)
    assert host.returncode == 0, host.stderr
    inside, outside = json.loads(image_json.stdout), json.loads(host.stdout)
    assert inside["evictions"] == outside["evictions"]
    assert [e["pod"] for e in inside["evictions"]] == ["report-28891", "web-5d8f9-2",
                                                        "web-5d8f9-3"]


def test_image_runs_the_plugin_package_it_was_built_with(image: Path) -> None:
    """`--plugin`: the package is installed beside desched, found through its entry point, and
    runs as on the host."""
    listed = run_in_image(image, "plugins")
    assert listed.returncode == 0, listed.stderr
    row = [line.split() for line in listed.stdout.splitlines()
           if line.startswith("RemovePodsPastDeadline ")]
    assert row == [["RemovePodsPastDeadline", "deschedule", "desched-deadline", "0.1.0"]]
    example = "/mnt/out-of-tree-plugin/example"
    proc = run_in_image(image, "simulate", "--policy", f"{example}/policy.yaml", "--snapshot",
                        f"{example}/cluster.yaml", "--now", "2026-03-01T06:00:00Z", "-o", "json")
    assert proc.returncode == 0, proc.stderr
    assert [(e["pod"], e["plugin"]) for e in json.loads(proc.stdout)["evictions"]] == [
        ("api-7c9f4-k2x8p", "RemovePodsPastDeadline"),
        ("api-7c9f4-m4q7z", "RemovePodsPastDeadline")]
