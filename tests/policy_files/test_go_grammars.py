"""Input Go's decoders refuse is refused, by class rather than by field (issue 22 item 5), through
`desched validate`, and the same line from `simulate` and `run`:

- every metav1.Duration a policy holds is parsed with time.ParseDuration's grammar and messages
  when the file is decoded (`--5m`, `5`, `1d` refused; `1.5h`, `0`, `5µs` accepted);
- every label selector string is read with apimachinery's labels.Parse: its grammar, operators
  (`gt`/`lt` included), key and value checks and messages; `k in ()` is valid and means
  `k in ("")`, as upstream reads it, with a warning;
- args' apiVersion and kind must be strings (Go reads them before anything else), and a value of
  the wrong type is refused wherever the format has a typed field, v1alpha1 params included.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import msgspec.inspect as mi
import pytest
import yaml
from policy_cli import KOORD, LNL_ARGS, PLT, UPSTREAM, accepted, koord, refused, upstream

from desched.plugins.catalog import PLUGINS
from desched.policy_files.koordinator import DeschedulerConfiguration
from desched.util.duration import DURATION

REPO = Path(__file__).resolve().parents[2]
CLUSTER = str(REPO / "examples" / "cluster.yaml")
V1ALPHA1 = {"apiVersion": "descheduler/v1alpha1", "kind": "DeschedulerPolicy"}

Build = Callable[[str], dict[str, Any]]


def _lnl(**args: Any) -> dict[str, Any]:
    return koord({"balance": [{"name": "LowNodeLoad"}]},
                 {"name": "LowNodeLoad", "args": {**LNL_ARGS, **args}})


def _mc(**args: Any) -> dict[str, Any]:
    """MigrationController's args in pluginConfig[1], with PodLifeTime enabled."""
    return koord({"deschedule": [{"name": "PodLifeTime"}]}, PLT,
                 {"name": "MigrationController", "args": args})


def _koord_evictor(**args: Any) -> dict[str, Any]:
    """DefaultEvictor's args in pluginConfig[1], the evict and filter plugin of a profile with
    PodLifeTime enabled."""
    doc = _mc()
    doc["profiles"][0]["pluginConfig"][1] = {"name": "DefaultEvictor", "args": args}
    doc["profiles"][0]["plugins"].update({
        ep: {"disabled": [{"name": "*"}], "enabled": [{"name": "DefaultEvictor"}]}
        for ep in ("evict", "filter")})
    return doc


# Every duration field of every format: how to put a value there, and its place in the file.
DURATIONS: dict[str, tuple[Build, str]] = {
    "DefaultEvictorArgs.minPodAge (upstream)": (
        lambda v: upstream({"deschedule": ["PodLifeTime"]}, PLT,
                           {"name": "DefaultEvictor", "args": {"minPodAge": v}}),
        "profiles[0].pluginConfig[1].args.minPodAge"),
    "DefaultEvictorArgs.minPodAge (Koordinator)": (
        lambda v: _koord_evictor(minPodAge=v),
        "profiles[0].pluginConfig[1].args.minPodAge"),
    "LowNodeLoadArgs.detectorCacheTimeout": (
        lambda v: _lnl(detectorCacheTimeout=v),
        "profiles[0].pluginConfig[0].args.detectorCacheTimeout"),
    "LowNodeLoadArgs.anomalyCondition.timeout": (
        lambda v: _lnl(anomalyCondition={"timeout": v, "consecutiveAbnormalities": 2,
                                         "consecutiveNormalities": 2}),
        "profiles[0].pluginConfig[0].args.anomalyCondition.timeout"),
    "LowNodeLoadArgs.nodePools[].anomalyCondition.timeout": (
        lambda v: _lnl(nodePools=[{"name": "a", "anomalyCondition": {"timeout": v}}]),
        "profiles[0].pluginConfig[0].args.nodePools[0].anomalyCondition.timeout"),
    "MigrationControllerArgs.defaultJobTTL": (
        lambda v: _mc(defaultJobTTL=v), "profiles[0].pluginConfig[1].args.defaultJobTTL"),
    "MigrationControllerArgs.objectLimiters{}.duration": (
        lambda v: _mc(objectLimiters={"workload": {"duration": v}}),
        "profiles[0].pluginConfig[1].args.objectLimiters.workload.duration"),
    "MigrationControllerArgs.arbitrationArgs.interval": (
        lambda v: _mc(arbitrationArgs={"interval": v}),
        "profiles[0].pluginConfig[1].args.arbitrationArgs.interval"),
    "DeschedulerConfiguration.deschedulingInterval": (
        lambda v: {**KOORD, "deschedulingInterval": v}, "deschedulingInterval"),
    "DeschedulerConfiguration.leaderElection.leaseDuration": (
        lambda v: {**KOORD, "leaderElection": {"leaseDuration": v}},
        "leaderElection.leaseDuration"),
    "DeschedulerConfiguration.leaderElection.renewDeadline": (
        lambda v: {**KOORD, "leaderElection": {"renewDeadline": v}},
        "leaderElection.renewDeadline"),
    "DeschedulerConfiguration.leaderElection.retryPeriod": (
        lambda v: {**KOORD, "leaderElection": {"retryPeriod": v}},
        "leaderElection.retryPeriod"),
    # desched's `moves` block, the same in both formats (framework/moves/args.py).
    "DeschedulerConfiguration.moves.minDelayBetweenMoves": (
        lambda v: {**KOORD, "moves": {"minDelayBetweenMoves": v}},
        "moves.minDelayBetweenMoves"),
    "DeschedulerConfiguration.moves.minDelayBetweenMoves (upstream)": (
        lambda v: upstream({"deschedule": ["PodLifeTime"]}, PLT,
                           moves={"minDelayBetweenMoves": v}),
        "moves.minDelayBetweenMoves"),
    "DeschedulerConfiguration.moves.replacementTimeout": (
        lambda v: {**KOORD, "moves": {"maxUnavailablePerWorkload": 1, "replacementTimeout": v}},
        "moves.replacementTimeout"),
    "DeschedulerConfiguration.moves.replacementTimeout (upstream)": (
        lambda v: upstream({"deschedule": ["PodLifeTime"]}, PLT,
                           moves={"maxUnavailablePerWorkload": 1, "replacementTimeout": v}),
        "moves.replacementTimeout"),
}


def _duration_fields(t: mi.Type, where: str, seen: set[type]) -> Iterator[str]:
    """Every place in a schema typed as a metav1.Duration (`[]` a list item, `{}` a map value)."""
    if isinstance(t, mi.Metadata):
        if t.extra == DURATION:
            yield where
        yield from _duration_fields(t.type, where, seen)
    elif isinstance(t, mi.UnionType):
        for alt in t.types:
            yield from _duration_fields(alt, where, seen)
    elif isinstance(t, mi.StructType) and t.cls not in seen:
        for f in t.fields:
            yield from _duration_fields(f.type, f"{where}.{f.encode_name}", seen | {t.cls})
    elif isinstance(t, mi.ListType):
        yield from _duration_fields(t.item_type, f"{where}[]", seen)
    elif isinstance(t, mi.DictType):
        yield from _duration_fields(t.value_type, f"{where}{{}}", seen)


def _looks_like_a_duration(name: str) -> bool:
    return any(word in name.lower() for word in ("timeout", "ttl", "interval", "duration",
                                                 "age", "period", "deadline"))


def test_every_duration_field_is_covered_and_typed() -> None:
    """The list above is every duration field the schemas have, and no field whose name says
    it is a duration holds plain text the decoder would not parse."""
    found = {f"DeschedulerConfiguration{p}"
             for p in _duration_fields(mi.type_info(DeschedulerConfiguration), "", set())}
    for spec in PLUGINS.values():
        found |= {f"{spec.args_type.__name__}{p}"
                  for p in _duration_fields(mi.type_info(spec.args_type), "", set())}
    assert found == {name.split(" ")[0] for name in DURATIONS}
    untyped: list[str] = []
    for schema in [DeschedulerConfiguration, *(spec.args_type for spec in PLUGINS.values())]:
        untyped.extend(_plain_text_durations(mi.type_info(schema), schema.__name__))
    assert untyped == []


def _plain_text_durations(t: mi.Type, where: str, seen: frozenset[type] = frozenset()
                          ) -> Iterator[str]:
    if isinstance(t, mi.UnionType):
        for alt in t.types:
            yield from _plain_text_durations(alt, where, seen)
    elif isinstance(t, mi.StructType) and t.cls not in seen:
        for f in t.fields:
            inner = f.type.types if isinstance(f.type, mi.UnionType) else (f.type,)
            if _looks_like_a_duration(f.encode_name) and any(isinstance(i, mi.StrType)
                                                             for i in inner):
                yield f"{where}.{f.encode_name}"
            yield from _plain_text_durations(f.type, f"{where}.{f.encode_name}",
                                             seen | {t.cls})
    elif isinstance(t, mi.ListType | mi.DictType):
        item = t.item_type if isinstance(t, mi.ListType) else t.value_type
        yield from _plain_text_durations(item, where, seen)


@pytest.mark.parametrize(("value", "message"), [
    ("--5m", 'time: invalid duration "--5m"'),
    ("1d", 'time: unknown unit "d" in duration "1d"'),
    ("5", 'time: missing unit in duration "5"'),
])
@pytest.mark.parametrize("field", DURATIONS)
def test_every_duration_field_refuses_what_go_refuses(tmp_path: Path, field: str, value: str,
                                                      message: str) -> None:
    build, place = DURATIONS[field]
    assert refused(tmp_path, build(value)).endswith(f"{message} - at `$.{place}`")


@pytest.mark.parametrize("field", DURATIONS)
def test_every_duration_field_accepts_go_durations(tmp_path: Path, field: str) -> None:
    accepted(tmp_path, DURATIONS[field][0]("1h2m3.5s"))


MIN_POD_AGE = DURATIONS["DefaultEvictorArgs.minPodAge (upstream)"]


@pytest.mark.parametrize(("value", "message"), [
    ("", 'time: invalid duration ""'),
    ("-", 'time: invalid duration "-"'),
    ("+-5m", 'time: invalid duration "+-5m"'),
    (" 5m", 'time: invalid duration " 5m"'),
    ("5m ", 'time: unknown unit "m " in duration "5m "'),
    ("5 m", 'time: unknown unit " m" in duration "5 m"'),
    (".s", 'time: invalid duration ".s"'),
    ("-.s", 'time: invalid duration "-.s"'),
    ("1.5.5h", 'time: missing unit in duration "1.5.5h"'),
    ("1e3s", 'time: unknown unit "e" in duration "1e3s"'),
    ("5M", 'time: unknown unit "M" in duration "5M"'),
    ("5sec", 'time: unknown unit "sec" in duration "5sec"'),
    ("\u0665m", 'time: invalid duration "\\xd9\\xa5m"'),  # Go compares bytes: no other digits
    ("5\u00b5", 'time: unknown unit "\\xc2\\xb5" in duration "5\\xc2\\xb5"'),
    ("9223372036854775808ns", 'time: invalid duration "9223372036854775808ns"'),
    ("2562047h47m16.854775808s", 'time: invalid duration "2562047h47m16.854775808s"'),
    ("106751d", 'time: unknown unit "d" in duration "106751d"'),
])
def test_go_duration_grammar_refuses(tmp_path: Path, value: str, message: str) -> None:
    build, place = MIN_POD_AGE
    assert refused(tmp_path, build(value)).endswith(f"{message} - at `$.{place}`")


@pytest.mark.parametrize("value", ["0", "+0", "-0", "0s", "1.5h", "1h30m", "300ms", "5us",
                                   "5\u00b5s", "5\u03bcs", "7ns", ".5s", "1.s", "+5m", "1h0m0s",
                                   "2562047h47m16.854775807s", "00000000000000000000001s"])
def test_go_duration_grammar_accepts(tmp_path: Path, value: str) -> None:
    accepted(tmp_path, MIN_POD_AGE[0](value))


def test_a_duration_that_is_not_text_is_a_type_error(tmp_path: Path) -> None:
    assert refused(tmp_path, _lnl(detectorCacheTimeout=300)).endswith(
        "LowNodeLoadArgs: Expected `str | null`, got `int` - at "
        "`$.profiles[0].pluginConfig[0].args.detectorCacheTimeout`")


# -- label selector strings ---------------------------------------------------------------------


# Every selector string of every format: how to put one there, and the prefix of its error.
SELECTORS: dict[str, tuple[Build, str]] = {
    "DeschedulerPolicy.nodeSelector": (
        lambda s: upstream({"deschedule": ["PodLifeTime"]}, PLT, nodeSelector=s),
        "policy.yaml: nodeSelector: "),
    "v1alpha1 nodeSelector": (
        lambda s: {**V1ALPHA1, "nodeSelector": s,
                   "strategies": {"RemoveDuplicates": {"enabled": True}}},
        "policy.yaml: nodeSelector: "),
    "DefaultEvictorArgs.nodeSelector (upstream)": (
        lambda s: upstream({"deschedule": ["PodLifeTime"]}, PLT,
                           {"name": "DefaultEvictor", "args": {"nodeSelector": s}}),
        "policy.yaml: in profile p: DefaultEvictor nodeSelector: "),
    "DefaultEvictorArgs.nodeSelector (Koordinator)": (
        lambda s: _koord_evictor(nodeSelector=s),
        'policy.yaml: profile "p": DefaultEvictor nodeSelector: '),
    "MigrationControllerArgs.nodeSelector": (
        lambda s: _mc(nodeSelector=s),
        'policy.yaml: profile "p": MigrationController: nodeSelector: '),
}

_KEY_RULE = ("name part must consist of alphanumeric characters, '-', '_' or '.', and must "
             "start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or "
             "'123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?"
             "[A-Za-z0-9]')")
_VALUE_RULE = ("a valid label must be an empty string or consist of alphanumeric characters, "
               "'-', '_' or '.', and must start and end with an alphanumeric character (e.g. "
               "'MyValue',  or 'my_value',  or '12345', regex used for validation is "
               "'(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')")
_OPERATORS = "in, notin, =, ==, !=, gt, lt"


@pytest.mark.parametrize(("text", "message"), [
    # apimachinery's own invalid cases (TestSelectorParse, TestSetSelectorParser)
    ("x=a||y=b", f'unable to parse requirement: values[0][x]: Invalid value: "a||y": '
                 f"{_VALUE_RULE}"),
    ("x==a==b", "found '==', expected: ',' or 'end of string'"),
    ("!x=a", "found '=', expected: ',' or 'end of string'"),
    ("x<a", "unable to parse requirement: values[0]: Invalid value: \"a\": for 'Gt', 'Lt' "
            "operators, the value must be an integer"),
    ("x,,y", "found ',', expected: identifier after ','"),
    (",x,y", "found ',', expected: !, identifier, or 'end of string'"),
    ("x nott in (y)", f"unable to parse requirement: found 'nott', expected: {_OPERATORS}"),
    ("a in (xyz),", "found '', expected: identifier after ','"),
    ("a in (xyz)b notin ()", "found 'b', expected: ',' or 'end of string'"),
    ("a in (xyz abc)", "unable to parse requirement: found 'abc', expected: ',' or ')'"),
    ("a notin(", "unable to parse requirement: found '', expected: ',', ')' or identifier"),
    ("a (", f"unable to parse requirement: found '(', expected: {_OPERATORS}"),
    ("(", "found '(', expected: !, identifier, or 'end of string'"),
    # and what desched's readers meet
    ("a in b", "unable to parse requirement: found 'b' expected: '('"),
    ("a b=c", f"unable to parse requirement: found 'b', expected: {_OPERATORS}"),
    ("Bad_=x", f'unable to parse requirement: <nil>: Invalid value: "Bad_": {_KEY_RULE}'),
    ("a=b/c", f'unable to parse requirement: values[0][a]: Invalid value: "b/c": {_VALUE_RULE}'),
    ("a in (b/c,d)", "unable to parse requirement: values[0][a]: Invalid value: \"b/c\": "
                     f"{_VALUE_RULE}"),
    ("a=" + "v" * 64, f'unable to parse requirement: values[0][a]: Invalid value: "{"v" * 64}": '
                      "must be no more than 63 bytes"),
])
@pytest.mark.parametrize("field", SELECTORS)
def test_every_selector_string_refuses_what_labels_parse_refuses(
        tmp_path: Path, field: str, text: str, message: str) -> None:
    build, prefix = SELECTORS[field]
    assert refused(tmp_path, build(text)).endswith(prefix + message)


@pytest.mark.parametrize("text", [
    "", "x=a,y=b,z=c", "x!=a,y=b", "x=", "x= ", "x=,z= ", "!x", "x>1", "x>1,z<5", "x in (abc,)",
    "x in (a,,)", "x,y in (a)", "a in (x,y,notin, z,in)", "x notin (, a)", "a ",
    "this-is-a-dns.domain.com/key-with-dash", "0.1.2.domain/99 notin (10.10.100.1, tick.tack)",
    "foo  in\t (abc)", "x notin\n (abc)",
])
@pytest.mark.parametrize("field", SELECTORS)
def test_every_selector_string_accepts_what_labels_parse_accepts(tmp_path: Path, field: str,
                                                                 text: str) -> None:
    assert accepted(tmp_path, SELECTORS[field][0](text)) == []


@pytest.mark.parametrize(("text", "meant"), [
    ("app in ()", 'labels.Parse reads "app in ()" as "app in ("")", a set holding the empty '
                  'value; list the values meant, e.g. "app in (a,b)"'),
    ("x,zone notin ( )", 'labels.Parse reads "zone notin ()" as "zone notin ("")", a set '
                         'holding the empty value; list the values meant, e.g. "zone notin '
                         '(a,b)"'),
])
@pytest.mark.parametrize("field", SELECTORS)
def test_an_empty_value_set_is_upstreams_empty_value_and_warned(tmp_path: Path, field: str,
                                                                text: str, meant: str) -> None:
    """apimachinery's TestSetSelectorParser: `x in ()` parses as `x in ("")` (valid)."""
    warnings = accepted(tmp_path, SELECTORS[field][0](text))
    assert len(warnings) == 1 and warnings[0].startswith("warning: ")
    assert warnings[0].endswith(f'nodeSelector "{text}": {meant}')


# -- typed fields -------------------------------------------------------------------------------


@pytest.mark.parametrize(("value", "kind"), [(5, "number"), (1.5, "number"), (True, "bool"),
                                             (["x"], "array"), ({"a": 1}, "object")])
@pytest.mark.parametrize("key", ["apiVersion", "kind"])
@pytest.mark.parametrize(("build", "place"), [
    (lambda meta: upstream({"deschedule": ["PodLifeTime"]},
                           {"name": "PodLifeTime", "args": {**meta, "maxPodLifeTimeSeconds": 1}}),
     "profiles[0].pluginConfig[0].args"),
    (lambda meta: _lnl(**meta), "profiles[0].pluginConfig[0].args"),
    (lambda meta: _mc(**meta), "profiles[0].pluginConfig[1].args"),
], ids=["upstream-PodLifeTime", "koord-LowNodeLoad", "koord-MigrationController"])
def test_args_type_meta_must_be_strings(tmp_path: Path, build: Callable[[dict[str, Any]],
                                                                        dict[str, Any]],
                                        place: str, key: str, value: Any, kind: str) -> None:
    assert refused(tmp_path, build({key: value})).endswith(
        f"couldn't get version/kind; json parse error: json: cannot unmarshal {kind} into Go "
        f"struct field .{key} of type string - at `$.{place}`")


def test_args_type_meta_as_strings_is_accepted(tmp_path: Path) -> None:
    accepted(tmp_path, _lnl(apiVersion="descheduler/v1alpha2", kind="LowNodeLoadArgs"))


@pytest.mark.parametrize("doc", [{**UPSTREAM, "kind": 5}, {**KOORD, "apiVersion": True}],
                         ids=["upstream-kind", "koord-apiVersion"])
def test_policy_type_meta_must_be_strings(tmp_path: Path, doc: dict[str, Any]) -> None:
    assert "couldn't get version/kind; json parse error: json: cannot unmarshal" in refused(
        tmp_path, doc)


@pytest.mark.parametrize(("strategy", "params", "place"), [
    ("HighNodeUtilization", {"nodeResourceUtilizationThresholds": {
        "thresholds": {"cpu": 20}, "useDeviationThresholds": "yes"}},
     "nodeResourceUtilizationThresholds.useDeviationThresholds"),
    ("RemoveDuplicates", {"failedPods": {"reasons": 5}}, "failedPods.reasons"),
    ("RemoveDuplicates", {"labelSelector": {"matchLabels": 5}}, "labelSelector.matchLabels"),
    ("PodLifeTime", {"podLifeTime": {"maxPodLifeTimeSeconds": 60},
                     "podsHavingTooManyRestarts": {"podRestartThreshold": "3"}},
     "podsHavingTooManyRestarts.podRestartThreshold"),
], ids=["unread-bool", "unread-list", "unread-selector", "unread-int32"])
def test_v1alpha1_params_are_typed_even_where_conversion_does_not_read_them(
        tmp_path: Path, strategy: str, params: dict[str, Any], place: str) -> None:
    doc = {**V1ALPHA1, "strategies": {strategy: {"enabled": True, "params": params}}}
    assert f"- at `$.strategies.{strategy}.params.{place}`" in refused(tmp_path, doc)


# -- simulate and run read the policy the same way ----------------------------------------------


ISSUE_INPUTS = {
    "duration": (_lnl(detectorCacheTimeout="--5m"), 'time: invalid duration "--5m"'),
    "kind": (_lnl(kind=5), "cannot unmarshal number into Go struct field .kind of type string"),
    "selector": (upstream({"deschedule": ["PodLifeTime"]}, PLT,
                          {"name": "DefaultEvictor", "args": {"nodeSelector": "app in (a b)"}}),
                 "DefaultEvictor nodeSelector: unable to parse requirement: found 'b', "
                 "expected: ',' or ')'"),
}


@pytest.mark.process
@pytest.mark.parametrize("command", [["simulate", "--snapshot", CLUSTER],
                                     ["run", "--once", "--kubeconfig", "/nonexistent"]],
                         ids=["simulate", "run"])
@pytest.mark.parametrize("case", ISSUE_INPUTS)
def test_simulate_and_run_refuse_alike(tmp_path: Path, command: list[str], case: str) -> None:
    doc, message = ISSUE_INPUTS[case]
    path = tmp_path / "policy.yaml"
    path.write_text(yaml.safe_dump(doc), encoding="utf-8")
    proc = subprocess.run([sys.executable, "-m", "desched", command[0], "--policy",
                           str(path), *command[1:]], capture_output=True, text=True,
                          timeout=120, check=False)
    assert (proc.returncode, proc.stdout) == (2, ""), proc.stderr
    lines = proc.stderr.splitlines()
    assert len(lines) == 1 and message in lines[0], proc.stderr
    assert lines[0] == refused(tmp_path, doc)
