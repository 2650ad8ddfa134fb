"""Fuzzing the real CLI with mutated example policies and snapshots.

Every input, however broken, must end in exit 0, or exit 2 with exactly one line on stderr and no
traceback: never exit 1 (a bug), a signal (139: a crash), a timeout or the memory limit. The
mutations are what hostile or careless files hold: values of the wrong type, numbers out of
range, unknown and missing fields, truncation, binary garbage, deep nesting, aliases, control
characters, huge values.

The suite runs a few dozen inputs, derandomized (about half a minute); set
DESCHED_FUZZ_EXAMPLES=N for N random inputs per test, and DESCHED_FUZZ_LOG=FILE to collect
every exit code.
"""

from __future__ import annotations

import copy
import json
import os
import resource
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

REPO = Path(__file__).resolve().parents[2]
POLICIES = sorted([*REPO.glob("examples/*.yaml"), *REPO.glob("examples/*/policy.yaml"),
                   *REPO.glob("examples/plugins/*/policy.yaml")])
POLICIES = [p for p in POLICIES if "kind: DeschedulerPolicy" in p.read_text()
            or "kind: DeschedulerConfiguration" in p.read_text()]
SNAPSHOTS = sorted([REPO / "examples" / "cluster.yaml", *REPO.glob("examples/*/cluster.yaml")])
NOW = "2026-11-22T12:00:00Z"
EXAMPLES = int(os.environ.get("DESCHED_FUZZ_EXAMPLES", "0"))
LONG = EXAMPLES > 0
pytestmark = [pytest.mark.fuzz, pytest.mark.timeout(0 if LONG else 600)]
MEMORY_LIMIT = 2 << 30
TIMEOUT = 60

FUZZ = settings(max_examples=EXAMPLES or 12, deadline=None, derandomize=not LONG,
                database=None, suppress_health_check=list(HealthCheck))


def _limit_memory() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT, MEMORY_LIMIT))


def run_cli(*args: str) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run([sys.executable, "-m", "desched", *args], capture_output=True,
                          timeout=TIMEOUT, preexec_fn=_limit_memory, check=False,
                          stdin=subprocess.DEVNULL)


def assert_clean(proc: subprocess.CompletedProcess[bytes], data: bytes) -> None:
    log = os.environ.get("DESCHED_FUZZ_LOG")  # one exit code a line, for a run's figures
    if log:
        with open(log, "a", encoding="utf-8") as fh:
            fh.write(f"{proc.returncode}\n")
    stderr = proc.stderr.decode("utf-8", "replace")
    context = (proc.returncode, stderr[-2000:], data[:600])
    assert b"Traceback" not in proc.stderr, context
    assert proc.returncode in (0, 2), context
    if proc.returncode == 2:
        assert len(stderr.splitlines()) == 1, context
        assert stderr.startswith("error: "), context


# -- structured mutations ------------------------------------------------------------------

CONTROL = st.sampled_from(["\n", "\r", "\x00", "\x1b[31m", "\u2028", "\x85", "\t", "\"'\\"])
WEIRD_STRINGS = st.one_of(
    st.text(max_size=20),
    st.builds(lambda a, c, b: a + c + b, st.text(max_size=5), CONTROL, st.text(max_size=5)),
    st.sampled_from(["", "1.5.3", "-1", "1e400", "99999999999h", "٥m", "NaN", "*", "a/b/c",
                     "Pod", "true", "null", "9999-12-31T23:59:59Z", "0001-01-01T00:00:00Z",
                     "x" * 300]),
    st.integers(min_value=1, max_value=5).map(lambda n: "a" * 10 ** n),
)
WEIRD_NUMBERS = st.one_of(
    st.sampled_from([0, -1, 1, 2**31, -(2**31) - 1, 2**63, 2**64, -(2**64), 10**30]),
    st.integers(), st.floats(allow_nan=True, allow_infinity=True))
LEAVES = st.one_of(st.none(), st.booleans(), WEIRD_NUMBERS, WEIRD_STRINGS)
VALUES = st.recursive(LEAVES, lambda inner: st.one_of(
    st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=8), inner, max_size=3)),
    max_leaves=6)


def _paths(doc: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [prefix]
    if isinstance(doc, dict):
        for key, value in doc.items():
            out += _paths(value, (*prefix, key))
    elif isinstance(doc, list):
        for index, value in enumerate(doc):
            out += _paths(value, (*prefix, index))
    return out


def _get(doc: Any, path: tuple[Any, ...]) -> Any:
    for step in path:
        doc = doc[step]
    return doc


@st.composite
def mutated_doc(draw: st.DrawFn, source: Any) -> Any:
    doc = copy.deepcopy(source)
    for _ in range(draw(st.integers(min_value=1, max_value=3))):
        paths = _paths(doc)
        path = draw(st.sampled_from(paths))
        if not path:
            if draw(st.booleans()):
                doc = draw(VALUES)
            continue
        parent, last = _get(doc, path[:-1]), path[-1]
        action = draw(st.sampled_from(["replace", "delete", "add", "duplicate", "stringify"]))
        if action == "replace":
            parent[last] = draw(VALUES)
        elif action == "delete":
            del parent[last]
        elif action == "add" and isinstance(parent, dict):
            parent[draw(WEIRD_STRINGS)] = draw(VALUES)
        elif action == "duplicate" and isinstance(parent, list):
            parent.extend([parent[last]] * draw(st.integers(min_value=1, max_value=50)))
        elif action == "stringify":
            parent[last] = str(parent[last])
        else:
            parent[last] = draw(VALUES)
    return doc


def _dump(doc: Any) -> bytes:
    return yaml.safe_dump(doc, allow_unicode=True, sort_keys=False).encode()


# -- textual mutations ---------------------------------------------------------------------

def _laughs(levels: int) -> str:
    lines = ["x0: &a0 [lol, lol, lol, lol, lol, lol, lol, lol, lol]"]
    lines += [f"x{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 9) + "]" for i in range(1, levels)]
    return "\n".join(lines) + "\n"


@st.composite
def mutated_text(draw: st.DrawFn, text: bytes) -> bytes:
    kind = draw(st.sampled_from(["truncate", "garbage", "deep", "aliases", "control", "huge",
                                 "json"]))
    if kind == "truncate":
        return text[:draw(st.integers(min_value=0, max_value=len(text)))]
    if kind == "garbage":
        at = draw(st.integers(min_value=0, max_value=len(text)))
        return text[:at] + draw(st.binary(min_size=1, max_size=64)) + text[at:]
    if kind == "deep":
        depth = draw(st.sampled_from([100, 300, 1000, 5000, 50000]))
        opener, closer = draw(st.sampled_from([("[", "]"), ("{a: ", "}"), ('{"a":', "}")]))
        return text + f"\nzz: {opener * depth}1{closer * depth}\n".encode()
    if kind == "aliases":
        return text + b"\n" + _laughs(draw(st.integers(min_value=2, max_value=14))).encode()
    if kind == "control":
        char = draw(CONTROL).encode()
        at = draw(st.integers(min_value=0, max_value=len(text)))
        return text[:at] + char + text[at:]
    if kind == "huge":
        return text.replace(b"name: ", b"name: " + b"n" * 1_000_000, 1)
    doc = yaml.safe_load(text)  # the same objects as JSON, then cut or garbled
    data = json.dumps(doc).encode()
    return data[:draw(st.integers(min_value=0, max_value=len(data)))]


def _policy_sources() -> list[tuple[Path, Any]]:
    return [(p, yaml.safe_load(p.read_text(encoding="utf-8"))) for p in POLICIES]


def _snapshot_sources() -> list[tuple[Path, Any]]:
    return [(p, yaml.safe_load(p.read_text(encoding="utf-8"))) for p in SNAPSHOTS]


@st.composite
def policy_input(draw: st.DrawFn) -> bytes:
    path, doc = draw(st.sampled_from(_policy_sources()))
    if draw(st.booleans()):
        return _dump(draw(mutated_doc(doc)))
    return draw(mutated_text(path.read_bytes()))


@st.composite
def snapshot_input(draw: st.DrawFn) -> tuple[Path, bytes]:
    path, doc = draw(st.sampled_from(_snapshot_sources()))
    policy = path.parent / "policy.yaml"
    if not policy.exists():
        policy = REPO / "examples" / "policy.yaml"
    if draw(st.booleans()):
        return policy, _dump(draw(mutated_doc(doc)))
    return policy, draw(mutated_text(path.read_bytes()))


@FUZZ
@given(data=policy_input())
def test_validate_mutated_policies(data: bytes, tmp_path_factory: Any) -> None:
    path = tmp_path_factory.mktemp("fuzz") / "policy.yaml"
    path.write_bytes(data)
    assert_clean(run_cli("validate", "--policy", str(path)), data)


@FUZZ
@given(data=policy_input())
def test_simulate_mutated_policies(data: bytes, tmp_path_factory: Any) -> None:
    path = tmp_path_factory.mktemp("fuzz") / "policy.yaml"
    path.write_bytes(data)
    proc = run_cli("simulate", "--policy", str(path), "--snapshot",
                   str(REPO / "examples" / "cluster.yaml"), "--now", NOW)
    assert_clean(proc, data)


@FUZZ
@given(case=snapshot_input())
def test_simulate_mutated_snapshots(case: tuple[Path, bytes], tmp_path_factory: Any) -> None:
    policy, data = case
    path = tmp_path_factory.mktemp("fuzz") / "cluster.yaml"
    path.write_bytes(data)
    proc = run_cli("simulate", "--policy", str(policy), "--snapshot", str(path), "--now", NOW,
                   "--cycles", "2")
    assert_clean(proc, data)
