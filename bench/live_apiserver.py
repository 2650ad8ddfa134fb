"""Live benchmark against a real API server (kube-apiserver and etcd): load a generated cluster into
it, then measure a command's initial sync as both sides pay for it.

    # put a generate_production.py cluster into the server (namespaces, PriorityClasses, nodes
    # and their status, pods bound by nodeName and their status, PDBs), with concurrency:
    .venv/bin/python bench/live_apiserver.py load --kubeconfig /work/rk8s/kubeconfig \\
        --cluster /tmp/live150k/cluster.jsonl

    # desched's informers alone: every kind `desched run` watches, listed once (--encoding
    # picks what the client asks for, --watch-list whether the initial state may be streamed;
    # either left out: the code's default, so the script also measures older code):
    .venv/bin/python bench/live_apiserver.py sync --kubeconfig /work/rk8s/kubeconfig \\
        [--encoding protobuf|json] [--watch-list yes|no]

    # any command, with the API server's CPU seconds and peak RSS while it runs:
    .venv/bin/python bench/live_apiserver.py measure -- .venv/bin/desched run --once \\
        --dry-run --policy bench/all-strategies-limited.yaml --kubeconfig /work/rk8s/kubeconfig

`measure` reports the command's wall time and peak RSS (wait4), and the API server's utime +
stime (from /proc/<pid>/stat, before and after) and its VmRSS, sampled every 0.1 s, with its
VmRSS before the command for reference. The server's pid comes from realk8s' state folder.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgspec

DEFAULT_PID_FILE = "/work/rk8s/state/kube-apiserver.pid"
_TICKS = os.sysconf("SC_CLK_TCK")


# -- load ----------------------------------------------------------------------------------------

def _objects(path: Path) -> Iterator[dict[str, Any]]:
    """The items of every list line of a generate_production.py JSON-lines file."""
    with path.open("rb") as fh:
        for line in fh:
            document = json.loads(line)
            kind = document.get("kind", "")
            for item in document.get("items") or ():
                item.setdefault("kind", kind.removesuffix("List"))
                yield item


def _plain(obj: dict[str, Any]) -> dict[str, Any]:
    """The object as a client would create it: no server-set identity."""
    meta = obj["metadata"]
    for key in ("resourceVersion", "uid", "creationTimestamp"):
        meta.pop(key, None)
    return obj


def _collection(obj: dict[str, Any]) -> str:
    kind, namespace = obj["kind"], obj["metadata"].get("namespace", "")
    paths = {"Node": "/api/v1/nodes", "Namespace": "/api/v1/namespaces",
             "PriorityClass": "/apis/scheduling.k8s.io/v1/priorityclasses",
             "Pod": f"/api/v1/namespaces/{namespace}/pods",
             "PodDisruptionBudget": f"/apis/policy/v1/namespaces/{namespace}/poddisruptionbudgets"}
    return paths[kind]


async def _worker(client: Any, queue: asyncio.Queue[dict[str, Any] | None],
                  counts: dict[str, int]) -> None:
    while (obj := await queue.get()) is not None:
        status = obj.pop("status", None) if obj["kind"] in ("Node", "Pod") else None
        if obj["kind"] == "Pod":
            obj["spec"].pop("priority", None)  # Priority admission sets it from the class name
        path = _collection(obj)
        body = msgspec.json.encode(obj)
        for attempt in range(5):
            response = await client.request("POST", path, body=body, what=f"create {path}")
            if response.status_code < 500 and response.status_code != 429:
                break
            await asyncio.sleep(0.5 * (attempt + 1))
        if response.status_code == 409:
            counts["existed"] = counts.get("existed", 0) + 1
        elif response.status_code >= 300:
            raise SystemExit(f"create {obj['kind']} {obj['metadata']['name']}: "
                             f"{response.status_code} {response.text[:300]}")
        if status:
            patch = msgspec.json.encode({"status": status})
            target = f"{path}/{obj['metadata']['name']}/status"
            response = await client.request("PATCH", target, body=patch, what=f"patch {target}",
                                            content_type="application/merge-patch+json")
            if response.status_code >= 300:
                raise SystemExit(f"status of {obj['kind']} {obj['metadata']['name']}: "
                                 f"{response.status_code} {response.text[:300]}")
        counts[obj["kind"]] = counts.get(obj["kind"], 0) + 1


async def _feed(objects: Iterator[dict[str, Any]], client: Any, concurrency: int,
                counts: dict[str, int]) -> None:
    queue: asyncio.Queue[dict[str, Any] | None] = asyncio.Queue(maxsize=concurrency * 4)
    workers = [asyncio.create_task(_worker(client, queue, counts)) for _ in range(concurrency)]
    for obj in objects:
        await queue.put(obj)
        if any(w.done() for w in workers):
            break
    for _ in workers:
        await queue.put(None)
    await asyncio.gather(*workers)


async def load(kubeconfig: str, cluster: Path, concurrency: int) -> None:
    from desched.live.client import ApiClient

    started = time.monotonic()
    namespaces: set[str] = set()
    classes, nodes, pdbs = [], [], []
    for obj in _objects(cluster):  # a first pass for everything pods depend on (small)
        kind = obj["kind"]
        if kind == "Pod":
            namespaces.add(obj["metadata"]["namespace"])
        elif kind == "PriorityClass":
            classes.append(_plain(obj))
        elif kind == "Node":
            nodes.append(_plain(obj))
        elif kind == "PodDisruptionBudget":
            obj.pop("status", None)
            pdbs.append(_plain(obj))
    counts: dict[str, int] = {}
    async with ApiClient.from_config(kubeconfig, timeout=120) as client:
        spaces = [{"kind": "Namespace", "metadata": {"name": ns}}
                  for ns in sorted(namespaces - {"default", "kube-system"})]
        await _feed(iter(spaces + classes), client, concurrency, counts)
        await _feed(iter(nodes), client, concurrency, counts)
        marks = time.monotonic()
        pods = (_plain(o) for o in _objects(cluster) if o["kind"] == "Pod")
        await _feed(pods, client, concurrency, counts)
        pod_time = time.monotonic() - marks
        await _feed(iter(pdbs), client, concurrency, counts)
    print(f"loaded {counts} in {time.monotonic() - started:.1f} s "
          f"(pods with their status: {pod_time:.1f} s)")


# -- sync ----------------------------------------------------------------------------------------

async def sync(kubeconfig: str, encoding: str | None, watch_list: str | None) -> None:
    from desched.live.client import ApiClient
    from desched.live.informer import make_informers, start_informers, stop_informers

    # Options passed only when asked for, so the script also measures a desched without them.
    client_options = {"protobuf": encoding == "protobuf"} if encoding else {}
    informer_options = {"watch_list": watch_list == "yes"} if watch_list else {}
    async with ApiClient.from_config(kubeconfig, timeout=300, **client_options) as client:
        informers = make_informers(client, **informer_options)
        started = time.perf_counter()
        await start_informers(informers)
        took = time.perf_counter() - started
        await stop_informers(informers)
    sizes = {i.resource.kind: len(i.store) for i in informers if i.store}
    print(json.dumps({"sync_s": round(took, 2), "objects": sizes,
                      "rss_mib": _status_mib(os.getpid(), "VmRSS"),
                      "peak_rss_mib": _status_mib(os.getpid(), "VmHWM")}))


# -- measure -------------------------------------------------------------------------------------

def _status_mib(pid: int, field: str) -> int:
    with open(f"/proc/{pid}/status") as fh:
        for line in fh:
            if line.startswith(field + ":"):
                return int(line.split()[1]) // 1024
    raise KeyError(field)


def _cpu_seconds(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as fh:
        fields = fh.read().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / _TICKS  # utime, stime


class _Sampler(threading.Thread):
    """The API server's highest VmRSS while the command runs."""

    def __init__(self, pid: int) -> None:
        super().__init__(daemon=True)
        self.pid = pid
        self.peak = 0
        self.done = threading.Event()

    def run(self) -> None:
        while not self.done.wait(0.1):
            self.peak = max(self.peak, _status_mib(self.pid, "VmRSS"))


def measure(command: list[str], pid: int) -> None:
    gc.collect()
    rss_before = _status_mib(pid, "VmRSS")
    cpu_before = _cpu_seconds(pid)
    sampler = _Sampler(pid)
    sampler.start()
    started = time.monotonic()
    child = subprocess.Popen(command)
    _, status, usage = os.wait4(child.pid, 0)
    wall = time.monotonic() - started
    sampler.done.set()
    sampler.join()
    cpu = _cpu_seconds(pid) - cpu_before
    code = os.waitstatus_to_exitcode(status)
    print(f"command: {' '.join(command)}")
    print(f"exit {code}, wall {wall:.1f} s, peak RSS {usage.ru_maxrss // 1024} MiB, "
          f"CPU {usage.ru_utime + usage.ru_stime:.1f} s")
    print(f"kube-apiserver: CPU {cpu:.1f} s, RSS {rss_before} MiB before, "
          f"peak {max(sampler.peak, rss_before)} MiB")


def main() -> None:
    ap = argparse.ArgumentParser(description="load and measure against a real API server")
    sub = ap.add_subparsers(dest="what", required=True)
    p_load = sub.add_parser("load", help="create a generated cluster's objects")
    p_load.add_argument("--kubeconfig", required=True)
    p_load.add_argument("--cluster", required=True, type=Path, help="cluster.jsonl")
    p_load.add_argument("--concurrency", type=int, default=48)
    p_sync = sub.add_parser("sync", help="desched's initial lists of every kind, once")
    p_sync.add_argument("--kubeconfig", required=True)
    p_sync.add_argument("--encoding", choices=("protobuf", "json"))
    p_sync.add_argument("--watch-list", choices=("yes", "no"))
    p_measure = sub.add_parser("measure", help="run a command, with the API server's cost")
    p_measure.add_argument("--pid-file", default=DEFAULT_PID_FILE)
    p_measure.add_argument("command", nargs="+")
    opts = ap.parse_args()
    if opts.what == "load":
        asyncio.run(load(opts.kubeconfig, opts.cluster, opts.concurrency))
    elif opts.what == "sync":
        asyncio.run(sync(opts.kubeconfig, opts.encoding, opts.watch_list))
    else:
        measure(opts.command, int(Path(opts.pid_file).read_text().strip()))


if __name__ == "__main__":
    main()
