"""YAML parsers on a `kubectl get -o yaml` List: parse time, conversion into desched's structs,
peak RSS.

    .venv/bin/python bench/yaml_parsers.py --snapshot /tmp/yaml15k/cluster.yaml --items 1000

The first --items items of the List (with its header) are written to a temporary file; each
parser then runs in a fresh process: the document parsed whole, then every item converted into
desched's structs the way its output allows (Python objects -> msgspec.json.encode -> the
loader's JSON decoders; rapidyaml's tree -> its JSON writer -> the same decoders). `desched` is
the loader itself (read_batches: rapidyaml a List item at a time, PyYAML where it must). The
other parsers are not desched's dependencies: install them into the virtualenv to measure them
(rapidyaml, fastyaml-rs, ryaml, yaml-rs, ruamel.yaml with ruamel.yaml.clib); a parser not
installed is reported as such. Times are CPU seconds of the child (the machine may be shared),
peak RSS its VmHWM.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

_CHILD = r"""
import json, sys, time
name, path = sys.argv[1], sys.argv[2]
import msgspec
from desched.model.kinds import JSON_DECODERS
from desched.snapshot import loader, yamlcheck

def hwm():
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024

def convert(items):
    count = 0
    for item in items:
        data = msgspec.json.encode(item)
        kind = item.get("kind", "")
        if kind in JSON_DECODERS:
            JSON_DECODERS[kind].decode(data)
            count += 1
    return count

text = open(path, "rb").read()
start = time.process_time()
if name == "desched":
    parsed = time.process_time()
    objects = sum(len(batch) for batch in loader.read_batches(path, warn=lambda message: None))
elif name == "rapidyaml":
    import ryml
    tree = ryml.parse_in_arena(text)
    parsed = time.process_time()
    items = tree.find_child(tree.root_id(), b"items")
    objects, node = 0, tree.first_child(items)
    while node != ryml.NONE:
        data = ryml.emit_json(tree, node).encode()
        kind = msgspec.json.decode(data, type=dict).get("kind", "")
        if kind in JSON_DECODERS:
            JSON_DECODERS[kind].decode(data)
            objects += 1
        node = tree.next_sibling(node)
else:
    if name == "pyyaml":
        import yaml
        doc = yaml.load(text, Loader=yamlcheck.SnapshotLoader)
    elif name == "ruamel":
        from ruamel.yaml import YAML
        doc = YAML(typ="safe", pure=False).load(text)
    elif name == "ryaml":
        import ryaml
        doc = ryaml.loads(text.decode())
    elif name == "yaml-rs":
        import yaml_rs
        doc = yaml_rs.loads(text.decode(), parse_datetime=False)
    elif name == "fastyaml-rs":
        import fast_yaml
        doc = fast_yaml.safe_load(text.decode())
    parsed = time.process_time()
    objects = convert(doc["items"])
end = time.process_time()
print(json.dumps({"parse": parsed - start, "convert": end - parsed, "objects": objects,
                  "peak_rss": hwm()}))
"""

PARSERS = ["desched", "rapidyaml", "fastyaml-rs", "yaml-rs", "ryaml", "ruamel", "pyyaml"]


def excerpt(source: Path, items: int, out: Path) -> int:
    """The List's header and first `items` items (cut at its column-0 `- ` lines)."""
    count = 0
    with source.open("rb") as src, out.open("wb") as dst:
        for line in src:
            if line.startswith(b"- "):
                count += 1
                if count > items:
                    break
            elif not line.startswith((b" ", b"items:", b"apiVersion:")):
                break
            dst.write(line)
        dst.write(b"kind: List\nmetadata:\n  resourceVersion: ''\n")
    return min(count, items)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--snapshot", type=Path, required=True, help="a `kubectl get -o yaml` List")
    ap.add_argument("--items", type=int, default=1000, help="items of it to parse")
    ap.add_argument("--parsers", nargs="+", default=PARSERS, choices=PARSERS)
    opts = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "excerpt.yaml"
        items = excerpt(opts.snapshot, opts.items, path)
        size = path.stat().st_size
        print(f"{items} items, {size / 2**20:.1f} MiB of YAML")
        print(f"{'parser':<12} {'parse s':>8} {'convert s':>10} {'MiB/s':>7} "
              f"{'peak MiB':>9} objects")
        for name in opts.parsers:
            proc = subprocess.run([sys.executable, "-c", _CHILD, name, str(path)],
                                  capture_output=True, text=True)
            if proc.returncode != 0:
                last = (proc.stderr.strip().splitlines() or ["failed"])[-1]
                print(f"{name:<12} {last[:80]}")
                continue
            r = json.loads(proc.stdout)
            total = r["parse"] + r["convert"]
            print(f"{name:<12} {r['parse']:8.2f} {r['convert']:10.2f} {size / 2**20 / total:7.1f} "
                  f"{r['peak_rss'] / 2**20:9.0f} {r['objects']}")


if __name__ == "__main__":
    main()
