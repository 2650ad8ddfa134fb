"""`--vary` read against the policy's plugins, default knobs from the snapshot's spread, and
candidates set where each policy format keeps a value."""

from __future__ import annotations

import pytest
import yaml
from tune_policies import (
    CLUSTER,
    HNU,
    HOTSPOT,
    LNU,
    POOLS,
    ROOT,
    V1ALPHA1,
    configmap,
    lnu_args,
    load,
    spread,
)

from desched.errors import InputError
from desched.plugins.catalog import PLUGINS
from desched.policy_files.errors import PolicyError
from desched.policy_files.loader import policy_from_document
from desched.tune.knobs import (
    MAX_DEFAULT_KNOBS,
    Knob,
    apply,
    candidate,
    current,
    default_knobs,
    parse_varies,
    parse_vary,
)

# -- parse_vary ------------------------------------------------------------------------------


def test_a_threshold_knob_steps_by_five_percent_with_both_ends() -> None:
    _, policy = load(LNU.read_text())
    knob = parse_vary("LowNodeUtilization.targetThresholds.cpu=42:60", policy)
    assert (knob.plugin, knob.path) == ("LowNodeUtilization", ("targetThresholds", "cpu"))
    assert knob.integer and knob.text == "LowNodeUtilization.targetThresholds.cpu"
    assert knob.values() == [42, 47, 52, 57, 60]
    assert all(isinstance(v, int) for v in knob.values())


def test_a_fractional_step_makes_float_values() -> None:
    _, policy = load(LNU.read_text())
    knob = parse_vary("LowNodeUtilization.thresholds.memory=10:11:0.1", policy)
    assert not knob.integer
    assert knob.values() == [10.0, 10.1, 10.2, 10.3, 10.4, 10.5, 10.6, 10.7, 10.8, 10.9, 11.0]


def test_limits_booleans_and_plain_numbers() -> None:
    _, policy = load(LNU.read_text())
    limit = parse_vary("maxNoOfPodsToEvictPerNode=1:10:3", policy)
    assert (limit.plugin, limit.path, limit.values()) == ("", ("maxNoOfPodsToEvictPerNode",),
                                                          [1, 4, 7, 10])
    flag = parse_vary("LowNodeUtilization.useDeviationThresholds=false:true", policy)
    assert flag.boolean and flag.values() == [False, True]
    nodes = parse_vary("LowNodeUtilization.numberOfNodes=0:3", policy)
    assert nodes.values() == [0, 1, 2, 3]  # not a percentage: step 1


def test_pools_by_name_and_resources_with_dots() -> None:
    _, policy = load(POOLS)
    knob = parse_vary("LowNodeLoad.nodePools.gpu.pool.highThresholds.cpu=60:90", policy)
    assert knob.path == ("nodePools", "gpu.pool", "highThresholds", "cpu")
    assert current(policy, knob) == 70
    inherited = parse_vary("LowNodeLoad.nodePools.batch.highThresholds.memory=50:80", policy)
    assert current(policy, inherited) == 60
    _, gpu = load(LNU.read_text().replace("pods: 20}", "nvidia.com/gpu: 20}")
                  .replace("pods: 50}", "nvidia.com/gpu: 50}"))
    knob = parse_vary("LowNodeUtilization.thresholds.nvidia.com/gpu=10:30", gpu)
    assert knob.path == ("thresholds", "nvidia.com/gpu") and current(gpu, knob) == 20


@pytest.mark.parametrize(("text", "message"), [
    ("LowNodeUtilization.targetThresholds.cpu", "expected PLUGIN.ARG=LOW:HIGH[:STEP]"),
    ("LowNodeUtilization.targetThresholds.cpu=40", "expected PLUGIN.ARG=LOW:HIGH[:STEP]"),
    ("LowNodeUtilization.targetThresholds.cpu=40:50:5:1", "expected PLUGIN.ARG"),
    ("maxNoOfPods=1:2", "LIMIT one of maxNoOfPodsToEvictPerNode"),
    ("RemoveDuplicates.x=1:2", 'enables no plugin "RemoveDuplicates" (it enables '
                               "LowNodeUtilization, DefaultEvictor)"),
    ("LowNodeUtilization.bogus=1:2", 'LowNodeUtilization has no "bogus" (it has '
                                     "useDeviationThresholds, thresholds"),
    ("LowNodeUtilization.thresholds.gpu=1:2", 'LowNodeUtilization.thresholds sets no "gpu" '
                                              "(it sets cpu, memory, pods)"),
    ("LowNodeUtilization.evictableNamespaces=1:2", "is not a number or a boolean"),
    ("LowNodeUtilization.thresholds=1:2", "is not a number or a boolean"),
    ("LowNodeUtilization.targetThresholds.cpu=60:40", "LOW 60 is above HIGH 40"),
    ("LowNodeUtilization.targetThresholds.cpu=40:60:0", "STEP must be above 0"),
    ("LowNodeUtilization.targetThresholds.cpu=40:60:-5", "STEP must be above 0"),
    ("LowNodeUtilization.targetThresholds.cpu=40:120", "120 is outside what "
                                                       "LowNodeUtilization.targetThresholds.cpu "
                                                       "takes ([0, 100])"),
    ("LowNodeUtilization.targetThresholds.cpu=forty:60", '"forty" is not a number'),
    ("LowNodeUtilization.targetThresholds.cpu=nan:60", '"nan" is not a number'),
    ("LowNodeUtilization.numberOfNodes=0.5:2", "takes whole numbers only"),
    ("maxNoOfPodsToEvictTotal=-1:2", "-1 is outside what maxNoOfPodsToEvictTotal takes (>= 0)"),
    ("LowNodeUtilization.useDeviationThresholds=true:false", "LOW true is above HIGH false"),
    ("LowNodeUtilization.useDeviationThresholds=0:1", 'varies as false:true, not "0"'),
    ("LowNodeUtilization.useDeviationThresholds=false:true:1", "a boolean takes no STEP"),
])
def test_bad_vary_is_one_line_naming_what_is_wrong(text: str, message: str) -> None:
    _, policy = load(LNU.read_text())
    with pytest.raises(InputError) as err:
        parse_vary(text, policy)
    assert err.value.source == "--vary"
    assert message in err.value.message, err.value.message
    assert "\n" not in str(err.value)


def test_v1alpha1_varies_only_what_its_params_hold() -> None:
    _, policy = load(V1ALPHA1)
    assert parse_vary("PodLifeTime.maxPodLifeTimeSeconds=60:600:60", policy).values()[:2] == \
        [60, 120]
    with pytest.raises(InputError, match="a v1alpha1 policy has no maxNoOfPodsToEvictTotal"):
        parse_vary("maxNoOfPodsToEvictTotal=1:2", policy)
    with pytest.raises(InputError, match="of LowNodeUtilization they hold thresholds, "
                                         "targetThresholds, useDeviationThresholds, "
                                         "numberOfNodes"):
        parse_vary("LowNodeUtilization.evictionLimits.node=1:3", policy)


def test_a_missing_pool_and_a_setting_varied_twice() -> None:
    _, policy = load(POOLS)
    with pytest.raises(InputError, match=r"nodePools has no item named as the path says "
                                         r"\(its names: gpu.pool, batch\)"):
        parse_vary("LowNodeLoad.nodePools.cpu.highThresholds.cpu=1:2", policy)
    with pytest.raises(InputError, match=r"LowNodeLoad\.lowThresholds\.cpu is varied twice"):
        parse_varies(["LowNodeLoad.lowThresholds.cpu=1:2",
                      "LowNodeLoad.lowThresholds.cpu=5:9"], policy)


# -- apply and candidate, per format ---------------------------------------------------------


def test_v1alpha2_values_and_missing_keys() -> None:
    doc, policy = load(LNU.read_text())
    target = parse_vary("LowNodeUtilization.targetThresholds.cpu=40:80", policy)
    nodes = parse_vary("LowNodeUtilization.numberOfNodes=0:3", policy)
    limit = parse_vary("maxNoOfPodsToEvictPerNode=1:10", policy)
    before = yaml.safe_load(LNU.read_text())
    out = apply(doc, policy, {target: 65, nodes: 2, limit: 4})
    assert doc == before  # the input document is left as it was
    args = out["profiles"][0]["pluginConfig"][1]["args"]
    assert args["targetThresholds"] == {"cpu": 65, "memory": 50, "pods": 50}
    assert args["numberOfNodes"] == 2 and out["maxNoOfPodsToEvictPerNode"] == 4
    made = candidate("policy.yaml", doc, policy, {target: 65, nodes: 2, limit: 4})
    assert lnu_args(made).target_thresholds["cpu"] == 65
    assert lnu_args(made).number_of_nodes == 2 and made.limits.per_node == 4


def test_high_node_utilization() -> None:
    doc, policy = load(HNU.read_text())
    knob = parse_vary("HighNodeUtilization.thresholds.memory=10:40", policy)
    made = candidate("policy.yaml", doc, policy, {knob: 35})
    assert made.profiles[0].args["HighNodeUtilization"].thresholds == {"cpu": 20, "memory": 35}


def test_koordinator_low_node_load() -> None:
    doc, policy = load(HOTSPOT.read_text())
    high = parse_vary("LowNodeLoad.highThresholds.cpu=40:80", policy)
    dev = parse_vary("LowNodeLoad.useDeviationThresholds=false:true", policy)
    made = candidate("policy.yaml", doc, policy, {high: 70, dev: True})
    args = made.profiles[0].args["LowNodeLoad"]
    assert args.high_thresholds == {"cpu": 70, "memory": 60} and args.use_deviation_thresholds
    assert made.format == "koordinator"


def test_a_pool_setting_an_inherited_map_keeps_its_other_resources() -> None:
    doc, policy = load(POOLS)
    knob = parse_vary("LowNodeLoad.nodePools.batch.highThresholds.memory=50:80", policy)
    out = apply(doc, policy, {knob: 75})
    pool = out["profiles"][0]["pluginConfig"][0]["args"]["nodePools"][1]
    assert pool["highThresholds"] == {"cpu": 50, "memory": 75}
    made = candidate("policy.yaml", doc, policy, {knob: 75})
    pools = made.profiles[0].args["LowNodeLoad"].node_pools
    assert pools[1].high_thresholds == {"cpu": 50, "memory": 75}
    assert pools[0].high_thresholds == {"cpu": 70, "memory": 60}  # the other pool untouched


def test_koordinator_plugin_without_config_gets_an_entry() -> None:
    doc, policy = load(POOLS.split("  pluginConfig:")[0])
    knob = parse_vary("LowNodeLoad.numberOfNodes=0:3", policy)
    out = apply(doc, policy, {knob: 2})
    assert out["profiles"][0]["pluginConfig"] == [{"name": "LowNodeLoad",
                                                   "args": {"numberOfNodes": 2}}]
    assert candidate("p", doc, policy, {knob: 2}).profiles[0].args[
        "LowNodeLoad"].number_of_nodes == 2


def test_v1alpha1_strategy_params() -> None:
    doc, policy = load(V1ALPHA1)
    target = parse_vary("LowNodeUtilization.targetThresholds.memory=40:80", policy)
    dev = parse_vary("LowNodeUtilization.useDeviationThresholds=false:true", policy)
    life = parse_vary("PodLifeTime.maxPodLifeTimeSeconds=60:600:60", policy)
    limit = parse_vary("maxNoOfPodsToEvictPerNamespace=1:5", policy)
    out = apply(doc, policy, {target: 70, dev: True, life: 120, limit: 3})
    params = out["strategies"]["LowNodeUtilization"]["params"]
    assert params["nodeResourceUtilizationThresholds"]["targetThresholds"]["memory"] == 70
    assert params["nodeResourceUtilizationThresholds"]["useDeviationThresholds"] is True
    assert out["strategies"]["PodLifeTime"]["params"]["podLifeTime"] == {
        "states": ["Pending"], "maxPodLifeTimeSeconds": 120}
    made = candidate("p", doc, policy, {target: 70, dev: True, life: 120, limit: 3})
    assert made.format == "v1alpha1" and made.limits.per_namespace == 3
    assert lnu_args(made).target_thresholds == {"cpu": 50, "memory": 70}
    assert lnu_args(made).use_deviation_thresholds
    plt = next(p.args["PodLifeTime"] for p in made.profiles if "PodLifeTime" in p.args)
    assert plt.max_pod_life_time_seconds == 120


def test_configmap_wrapped_policy() -> None:
    doc, policy = load(configmap(LNU.read_text()))
    knob = parse_vary("LowNodeUtilization.thresholds.pods=10:40", policy)
    out = apply(doc, policy, {knob: 30})
    assert out["kind"] == "ConfigMap" and out["metadata"] == {"name": "descheduler"}
    inner = yaml.safe_load(out["data"]["policy.yaml"])
    assert inner["profiles"][0]["pluginConfig"][1]["args"]["thresholds"]["pods"] == 30
    assert lnu_args(candidate("p", doc, policy, {knob: 30})).thresholds["pods"] == 30


def test_every_profile_with_the_plugin_is_set() -> None:
    doc = yaml.safe_load(LNU.read_text())
    doc["profiles"].append({**doc["profiles"][0], "name": "second"})
    policy = policy_from_document("p", doc, PLUGINS)
    knob = parse_vary("LowNodeUtilization.thresholds.cpu=10:40", policy)
    made = candidate("p", doc, policy, {knob: 15})
    assert [p.args["LowNodeUtilization"].thresholds["cpu"] for p in made.profiles] == [15, 15]


def test_an_invalid_candidate_raises_as_a_policy_would() -> None:
    doc, policy = load(LNU.read_text())
    knob = parse_vary("LowNodeUtilization.thresholds.cpu=10:80", policy)
    with pytest.raises(PolicyError, match="thresholds' cpu percentage is greater than "
                                          "targetThresholds'"):
        candidate("p", doc, policy, {knob: 60})


# -- default knobs ---------------------------------------------------------------------------


def test_defaults_range_lows_to_the_median_and_highs_to_the_hottest() -> None:
    _, policy = load(LNU.read_text())
    knobs = {k.text: k for k in default_knobs(policy, CLUSTER)}
    assert list(knobs) == [f"LowNodeUtilization.{m}.{r}" for r in ("cpu", "memory", "pods")
                           for m in ("thresholds", "targetThresholds")]
    low, high = (knobs["LowNodeUtilization.thresholds.cpu"],
                 knobs["LowNodeUtilization.targetThresholds.cpu"])
    # cpu: 10th percentile 5, median 44, hottest 93 (outward to steps of 5).
    assert (low.low, low.high, low.step) == (5, 45, 5)
    assert (high.low, high.high) == (40, 95)
    for knob in knobs.values():
        own = current(policy, knob)
        assert own in knob.values()  # the user's policy is a candidate
        assert 0 <= knob.low < knob.high <= 100 and knob.integer


def test_defaults_hold_the_policy_value_outside_the_spread() -> None:
    _, policy = load(LNU.read_text())
    knobs = {k.text: k for k in default_knobs(policy, CLUSTER)}
    memory = knobs["LowNodeUtilization.targetThresholds.memory"]  # nodes 40..49, policy 50
    assert (memory.low, memory.high) == (40, 50)  # median 44, outward to 40
    pods = knobs["LowNodeUtilization.targetThresholds.pods"]  # every node at 10, policy 50
    assert pods.low == 10 and pods.high == 50 and 50 in pods.values()


def test_defaults_follow_usage_pools_and_prod_thresholds_of_low_node_load() -> None:
    _, policy = load(POOLS)
    frame = spread(cpu_usage=[10, 30, 50, 70, 90], memory_usage=[50, 55, 60, 65, 70],
                   cpu_requests=[1, 1, 1, 1, 1])
    knobs = {k.text: k for k in default_knobs(policy, frame)}
    assert set(knobs) == {"LowNodeLoad.lowThresholds.cpu", "LowNodeLoad.highThresholds.cpu",
                          "LowNodeLoad.prodHighThresholds.cpu",
                          "LowNodeLoad.nodePools.gpu.pool.highThresholds.cpu",
                          "LowNodeLoad.lowThresholds.memory",
                          "LowNodeLoad.highThresholds.memory"}  # at most six: cpu first
    assert len(knobs) == MAX_DEFAULT_KNOBS
    high = knobs["LowNodeLoad.highThresholds.cpu"]
    assert (high.low, high.high) == (50, 90)  # usage, not the flat requests
    assert "LowNodeLoad.nodePools.batch.highThresholds.cpu" not in knobs  # inherited


def test_defaults_in_deviation_mode_and_without_a_series() -> None:
    text = LNU.read_text().replace("thresholds: {cpu: 20", "useDeviationThresholds: true\n"
                                   "      thresholds: {cpu: 20")
    _, policy = load(text.replace("memory: 20, pods: 20}", "ephemeral-storage: 20}")
                     .replace("memory: 50, pods: 50}", "ephemeral-storage: 50}"))
    knobs = {k.text: k for k in default_knobs(policy, CLUSTER)}
    cpu = knobs["LowNodeUtilization.targetThresholds.cpu"]
    # A deviation: up to the farthest node from the mean (49.6 - 5 = 44.6), and the policy's 50.
    assert (cpu.low, cpu.high) == (0, 50)
    storage = knobs["LowNodeUtilization.thresholds.ephemeral-storage"]
    assert (storage.low, storage.high) == (0, 40)  # no figure: 20 +- 20


def test_only_balance_plugins_get_defaults() -> None:
    _, policy = load(V1ALPHA1)
    assert {k.plugin for k in default_knobs(policy, CLUSTER)} == {"LowNodeUtilization"}
    _, koord = load((ROOT / "examples/koordinator-policy.yaml").read_text())
    assert default_knobs(koord, CLUSTER) == []


def test_knobs_are_hashable_keys() -> None:
    knob = Knob("", ("maxNoOfPodsToEvictTotal",), 1, 3, 1, True, "maxNoOfPodsToEvictTotal")
    assert {knob: 2}[Knob("", ("maxNoOfPodsToEvictTotal",), 1, 3, 1, True,
                          "maxNoOfPodsToEvictTotal")] == 2


def test_current_is_the_loaded_policys_value() -> None:
    _, policy = load(POOLS)
    knobs = [parse_vary(t, policy) for t in (
        "LowNodeLoad.nodePools.batch.lowThresholds.cpu=10:30", "LowNodeLoad.numberOfNodes=0:3",
        "maxNoOfPodsToEvictPerNode=1:3", "LowNodeLoad.useDeviationThresholds=false:true")]
    assert [current(policy, k) for k in knobs] == [20, None, None, None]  # inherited, unset
    _, lnu = load(LNU.read_text())
    assert current(lnu, parse_vary("LowNodeUtilization.numberOfNodes=0:3", lnu)) == 0
    flag = parse_vary("LowNodeUtilization.useDeviationThresholds=false:true", lnu)
    assert current(lnu, flag) is False
    # Written as the knob writes its own values: 50, not the 50.0 the args hold.
    high = current(lnu, parse_vary("LowNodeUtilization.targetThresholds.cpu=50:80:5", lnu))
    assert high == 50 and isinstance(high, int)
