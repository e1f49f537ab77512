"""MODEL_DISTRIBUTION_POLICY=PIPELINE_PARALLEL: the split by device memory (placement/memory_split.py), the
memories it plans with (placement/device_memory.py) and the config keys that set them.

Plans are checked without sessions on generated chains whose weights are known, and on hypothesis graphs;
Core's path (query, plan, compile, outputs) on the CPU EP and, where installed, the OpenVINO EP.
"""

from __future__ import annotations

import itertools
import json
import sys
import types

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from onnx import helper
from support.graphs import Case, cases, check_plan
from support.helpers import const, make_model, needs_openvino, reference, seeded, vi

import hetero_cli
from hetero_cli.errors import ConfigError
from hetero_cli.graph.model import Model
from hetero_cli.placement import config as cfg
from hetero_cli.placement import devices as registry
from hetero_cli.placement import memory_split
from hetero_cli.placement.device_memory import device_memories, device_memory
from hetero_cli.placement.partition import partition

POLICY = {cfg.DISTRIBUTION_POLICY: cfg.PIPELINE_PARALLEL}
MEMORY = "AVAILABLE_DEVICE_MEM_SIZE=24730"  # reduce_chain's cut after ReduceSum


def _everything(model: Model):
    names = frozenset(n.friendly_name for n in model.get_ops() if not n.is_constant)
    return lambda device: names


def reduce_chain():
    """x[1,64] -MatMul W1[64,64]-> [1,64] -MatMul W2[64,16]-> [1,16] -ReduceSum-> [1,1] -MatMul W3[1,64]->
    [1,64] -MatMul W4[64,256]-> y[1,256]: weights 16384, 4096, 0, 256, 65536 bytes (86272 in all)."""
    shapes = {"W1": (64, 64), "W2": (64, 16), "W3": (1, 64), "W4": (64, 256)}
    inits = [const(name, seeded(shape, seed=i)) for i, (name, shape) in enumerate(shapes.items())]
    nodes = [
        helper.make_node("MatMul", ["x", "W1"], ["t1"], name="mm1"),
        helper.make_node("MatMul", ["t1", "W2"], ["t2"], name="mm2"),
        helper.make_node("ReduceSum", ["t2"], ["t3"], name="sum", keepdims=1),
        helper.make_node("MatMul", ["t3", "W3"], ["t4"], name="mm3"),
        helper.make_node("MatMul", ["t4", "W4"], ["y"], name="mm4"),
    ]
    return make_model(nodes, [vi("x", (1, 64))], [vi("y", (1, 256))], inits)


def even_chain(layers: int = 4, width: int = 16):
    """x -> ``layers`` MatMuls by [width, width] weights, each with a Relu after it."""
    nodes, inits, last = [], [], "x"
    for i in range(layers):
        inits.append(const(f"W{i}", seeded((width, width), seed=i) / width))
        nodes.append(helper.make_node("MatMul", [last, f"W{i}"], [f"m{i}"], name=f"mm{i}"))
        nodes.append(helper.make_node("Relu", [f"m{i}"], [f"r{i}"], name=f"relu{i}"))
        last = f"r{i}"
    nodes[-1].output[0] = "y"
    return make_model(nodes, [vi("x", (2, width))], [vi("y", (2, width))], inits)


def test_weight_bytes_count_each_weight_once_at_its_first_reader():
    model = Model(reduce_chain())
    assert memory_split.weight_bytes(model) == {"mm1": 16384, "mm2": 4096, "sum": 0, "mm3": 256, "mm4": 65536}


def test_cut_lands_in_the_band_where_the_fewest_elements_cross():
    """OPENVINO holds 24730 bytes: its share is 24730 / 1.2 = 20608 weight bytes; the band 0.95-1.05 holds
    the cuts after mm2 (16 elements cross), after sum (1) and after mm3 (64): the cut goes after sum."""
    model = Model(reduce_chain())
    devices = [registry.lookup("OPENVINO"), registry.lookup("CPU")]
    got = memory_split.pipeline_affinities(model, devices, _everything(model), [24730, None])
    assert got == {"mm1": "OPENVINO", "mm2": "OPENVINO", "sum": "OPENVINO", "mm3": "CPU", "mm4": "CPU"}


def test_without_a_position_in_the_band_the_device_stops_below_its_share():
    model = Model(reduce_chain())
    devices = [registry.lookup("OPENVINO"), registry.lookup("CPU")]
    # 18000 / 1.2 = 15000 weight bytes: mm1 alone (16384) is over 1.05 x; nothing lies in the band
    got = memory_split.pipeline_affinities(model, devices, _everything(model), [18000, None])
    assert set(got.values()) == {"CPU"}


def test_a_device_that_holds_everything_still_shares_when_asked():
    """OpenVINO gives a first device that holds the whole need everything (openvino#38250); here the
    devices split the weights evenly where their memories allow it."""
    model = Model(even_chain(layers=4))
    devices = [registry.lookup("OPENVINO"), registry.lookup("CPU")]
    got = memory_split.pipeline_affinities(model, devices, _everything(model), [10**12, None])
    assert [got[f"mm{i}"] for i in range(4)] == ["OPENVINO", "OPENVINO", "CPU", "CPU"]
    assert memory_split.shares([10**12, None], 1000) == [0.5, 0.5]


@pytest.mark.parametrize(
    ("memories", "want"),
    [
        ([None, None, None], [1 / 3, 1 / 3, 1 / 3]),
        ([120, None], [0.1, 0.9]),  # 120 bytes hold 100 weight bytes of 1000
        ([None, 120, 240], [0.7, 0.1, 0.2]),
        ([600, 600], [0.5, 0.5]),  # together they hold less than the need: by memory
        ([300, 900], [0.25, 0.75]),
    ],
)
def test_shares_are_as_even_as_the_memories_allow(memories, want):
    assert memory_split.shares(memories, 1000) == pytest.approx(want)


def test_a_node_the_next_devices_lack_goes_back_to_the_first_that_supports_it():
    model = Model(even_chain(layers=4))
    devices = [registry.lookup("OPENVINO"), registry.lookup("CPU")]
    every = _everything(model)(None)

    def supports(device):
        return every if device.name == "OPENVINO" else every - {"mm3"}

    got = memory_split.pipeline_affinities(model, devices, supports, [None, None])
    assert got["mm3"] == "OPENVINO" and got["mm2"] == "CPU"
    check_plan(model, partition(model, got), got)


@needs_openvino
def test_a_node_fixed_by_hand_keeps_its_device():
    """Query-then-fix, as OpenVINO's users do: the split is query_model's answer, a node set by hand keeps
    its device (manual mode), the rest keep the split's."""
    proto = reduce_chain()
    config = {**POLICY, "OPENVINO": {cfg.DEVICE_MEMORY: 24730}}
    core = hetero_cli.Core()
    model = core.read_model(proto)
    affinities = core.query_model(model, "HETERO:OPENVINO,CPU", config)
    affinities["mm3"] = "OPENVINO"
    model.set_affinities(affinities)
    compiled = core.compile_model(model, "HETERO:OPENVINO,CPU", config)
    assert [(s.device, sorted(s.nodes)) for s in compiled.plan.subgraphs] == [
        ("OPENVINO", ["mm1", "mm2", "mm3", "sum"]),
        ("CPU", ["mm4"]),
    ]


@settings(max_examples=60, deadline=None)
@given(cases(("A",), max_steps=16), st.floats(0.05, 2.0), st.sampled_from([None, 0.3, 5.0]))
def test_generated_graphs_every_node_placed_acyclic_and_in_the_band(case: Case, first_memory, second_memory):
    """Memories as fractions of the need; the first device's weights lie in the band wherever a prefix of
    the topological order lands there, and it takes all where all is within its share."""
    model = Model(case.model)
    devices = [registry.lookup("OPENVINO"), registry.lookup("GPU"), registry.lookup("CPU")]
    sizes = memory_split.weight_bytes(model)
    total = sum(sizes.values())
    need = memory_split.NEED_FACTOR * total
    memories = [
        max(1, int(first_memory * need)),
        None if second_memory is None else int(second_memory * need),
        None,
    ]
    got = memory_split.pipeline_affinities(model, devices, _everything(model), memories)
    assert set(got) == {n.friendly_name for n in model.get_ops()}
    check_plan(model, partition(model, got), got)
    if total:
        share = memory_split.shares(memories, total)[0] * total
        low, high = memory_split.BAND[0] * share, memory_split.BAND[1] * share
        prefixes = list(
            itertools.accumulate(sizes[n.friendly_name] for n in model.get_ops() if not n.is_constant)
        )
        first = sum(s for n, s in sizes.items() if got[n] == "OPENVINO")
        if total <= high:
            assert first == total
        elif any(low <= p <= high for p in [0, *prefixes]):
            assert low <= first <= high
        else:
            assert first <= share


# --- memories ---------------------------------------------------------------------------------------------


def test_memories_set_or_read_from_the_device():
    config = cfg.split({"OPENVINO": {cfg.DEVICE_MEMORY: "4000000"}})
    devices = [registry.lookup("OPENVINO"), registry.lookup("CPU")]
    assert device_memories(devices, config) == [4000000, None]
    assert device_memory(registry.lookup("OPENVINO")) is None  # on OpenVINO's CPU device: the host's


def test_a_gpu_memory_is_read_through_nvml(monkeypatch):
    class Info:
        total = 8 * 2**30

    fake = types.SimpleNamespace(
        nvmlInit=lambda: None,
        nvmlShutdown=lambda: None,
        nvmlDeviceGetHandleByIndex=lambda i: i,
        nvmlDeviceGetMemoryInfo=lambda handle: Info() if handle == 1 else None,
    )
    monkeypatch.setitem(sys.modules, "pynvml", fake)
    assert device_memory(registry.lookup("GPU.1")) == 8 * 2**30


def test_a_memory_nobody_can_read_asks_for_the_key(monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", None)  # import fails
    for name in ("GPU", "OPENVINO.GPU"):
        with pytest.raises(ConfigError, match=f'"{name}": {{"AVAILABLE_DEVICE_MEM_SIZE"'):
            device_memory(registry.lookup(name))


@pytest.mark.parametrize("value", [0, -5, "lots", 1.5, True, "", None])
def test_bad_memory_sizes_are_refused(value):
    with pytest.raises(ConfigError, match="AVAILABLE_DEVICE_MEM_SIZE: give the device's memory as a whole"):
        cfg.split({"OPENVINO": {cfg.DEVICE_MEMORY: value}})


@pytest.mark.parametrize("value", ["TENSOR_PARALLEL", "pipeline", 3, ["PIPELINE_PARALLEL", "X"]])
def test_unknown_policies_are_refused(value):
    with pytest.raises(ConfigError, match=r"bad value .* for MODEL_DISTRIBUTION_POLICY: HETERO takes PIPE"):
        cfg.split({cfg.DISTRIBUTION_POLICY: value})


@pytest.mark.parametrize(
    "value",
    [
        "PIPELINE_PARALLEL",
        "pipeline_parallel",
        {"PIPELINE_PARALLEL"},
        [hetero_cli.hint.ModelDistributionPolicy.PIPELINE_PARALLEL],
    ],
)
def test_policy_spellings(value):
    assert cfg.split({cfg.DISTRIBUTION_POLICY: value}).pipeline_parallel


@pytest.mark.parametrize("device", ["HETERO:CPU", "CPU"])
def test_pipeline_parallel_needs_two_devices(device):
    with pytest.raises(ConfigError, match=r"splits a model across devices, and .* has one available"):
        hetero_cli.Core().compile_model(even_chain(), device, POLICY)


# --- through Core -----------------------------------------------------------------------------------------


@needs_openvino
def test_compile_splits_by_memory_and_gives_the_whole_models_outputs():
    proto = reduce_chain()
    config = {**POLICY, "PERFORMANCE_HINT": "THROUGHPUT", "OPENVINO": {cfg.DEVICE_MEMORY: 24730}}
    core = hetero_cli.Core()
    assert core.query_model(proto, "HETERO:OPENVINO,CPU", config) == {
        "mm1": "OPENVINO",
        "mm2": "OPENVINO",
        "sum": "OPENVINO",
        "mm3": "CPU",
        "mm4": "CPU",
    }
    compiled = core.compile_model(proto, "HETERO:OPENVINO,CPU", config)
    assert [(s.device, sorted(s.nodes)) for s in compiled.plan.subgraphs] == [
        ("OPENVINO", ["mm1", "mm2", "sum"]),
        ("CPU", ["mm3", "mm4"]),
    ]
    feeds = {"x": seeded((1, 64))}
    got = compiled.create_infer_request().infer(feeds)
    want = reference(proto, feeds)
    np.testing.assert_allclose(got["y"], want["y"], rtol=1e-4, atol=1e-4)


@needs_openvino
def test_the_compiled_model_answers_the_policy_its_compile_used():
    """As OpenVINO's compiled model answers MODEL_DISTRIBUTION_POLICY: the set of policies the compile used
    (set by the compile's config or on the Core; kept by an export), the empty set where none was."""
    proto = reduce_chain()
    memory = {"OPENVINO": {cfg.DEVICE_MEMORY: 24730}}
    core = hetero_cli.Core()
    plain = core.compile_model(proto, "HETERO:OPENVINO,CPU")
    assert plain.get_property("MODEL_DISTRIBUTION_POLICY") == set()
    assert "MODEL_DISTRIBUTION_POLICY" in plain.get_property("SUPPORTED_PROPERTIES")
    split = core.compile_model(proto, "HETERO:OPENVINO,CPU", {**POLICY, **memory})
    assert split.get_property(hetero_cli.hint.model_distribution_policy) == {"PIPELINE_PARALLEL"}
    imported = hetero_cli.Core().import_model(split.export_model())
    assert imported.get_property("MODEL_DISTRIBUTION_POLICY") == {"PIPELINE_PARALLEL"}
    core.set_property("HETERO", POLICY)
    core.set_property(memory)
    assert core.compile_model(proto, "HETERO:OPENVINO,CPU").get_property("MODEL_DISTRIBUTION_POLICY") == {
        "PIPELINE_PARALLEL"
    }
    assert hetero_cli.Core().compile_model(proto, "CPU").get_property("MODEL_DISTRIBUTION_POLICY") == set()


# --- from the command line --------------------------------------------------------------------------------


def _cli(*args):
    from click.testing import CliRunner

    from hetero_cli import cli

    result = CliRunner().invoke(cli.hetero, [str(a) for a in args])
    assert "Traceback" not in result.stderr, result.stderr
    return result


@needs_openvino
def test_cli_query_and_benchmark_split_by_memory(tmp_path):
    onnx_path = tmp_path / "chain.onnx"
    onnx_path.write_bytes(reduce_chain().SerializeToString())
    config = tmp_path / "config.json"
    config.write_text(
        '{"MODEL_DISTRIBUTION_POLICY": "PIPELINE_PARALLEL", "OPENVINO": {"AVAILABLE_DEVICE_MEM_SIZE": 24730}}'
    )
    query = _cli("query", "-m", onnx_path, "-d", "HETERO:OPENVINO,CPU", "-load_config", config, "--json")
    assert query.exit_code == 0, query.stderr
    assert json.loads(query.stdout)["affinities"] == {
        "mm1": "OPENVINO",
        "mm2": "OPENVINO",
        "sum": "OPENVINO",
        "mm3": "CPU",
        "mm4": "CPU",
    }
    options = "-niter 4 -hint throughput --config MODEL_DISTRIBUTION_POLICY=PIPELINE_PARALLEL"
    bench = _cli(
        "benchmark",
        "-m",
        onnx_path,
        "-d",
        "HETERO:OPENVINO,CPU",
        *options.split(),
        "--config",
        f"OPENVINO:{MEMORY}",
    )
    assert bench.exit_code == 0, bench.stderr
    assert "subgraph1: OPENVINO (OpenVINOExecutionProvider), 3 node(s)" in bench.stdout
    assert "subgraph2: CPU (CPUExecutionProvider), 2 node(s)" in bench.stdout


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ("-d", "HETERO:CPU", "--config", "MODEL_DISTRIBUTION_POLICY=PIPELINE_PARALLEL"),
            "has one available",
        ),
        (
            ("-d", "HETERO:CPU", "--config", "MODEL_DISTRIBUTION_POLICY=TENSOR"),
            "HETERO takes PIPELINE_PARALLEL",
        ),
        (
            ("-d", "HETERO:CPU", "--config", "CPU:AVAILABLE_DEVICE_MEM_SIZE=0"),
            "whole number of bytes above 0",
        ),
    ],
)
def test_cli_bad_input_is_one_line_and_exit_2(tmp_path, monkeypatch, args, message):
    monkeypatch.chdir(tmp_path)
    onnx_path = tmp_path / "chain.onnx"
    onnx_path.write_bytes(even_chain().SerializeToString())
    result = _cli("benchmark", "-m", onnx_path, "-niter", "2", *args)
    assert result.exit_code == 2
    errors = [line for line in result.stderr.splitlines() if line.startswith("[ ERROR ]")]
    assert len(errors) == 1 and message in errors[0]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["chain.onnx"]


def test_set_property_and_get_property_as_openvino_names_them():
    core = hetero_cli.Core()
    assert core.get_property("HETERO", "MODEL_DISTRIBUTION_POLICY") == set()
    assert core.get_property("OPENVINO", "AVAILABLE_DEVICE_MEM_SIZE") is None
    policy = hetero_cli.hint.ModelDistributionPolicy.PIPELINE_PARALLEL
    core.set_property("HETERO", {hetero_cli.hint.model_distribution_policy: {policy}})
    core.set_property("OPENVINO", dict([hetero_cli.properties.available_device_mem_size(24730)]))
    assert core.get_property("HETERO", "MODEL_DISTRIBUTION_POLICY") == {"PIPELINE_PARALLEL"}
    assert core.get_property("OPENVINO", "AVAILABLE_DEVICE_MEM_SIZE") == 24730
    assert "MODEL_DISTRIBUTION_POLICY" in core.get_property("HETERO", "SUPPORTED_PROPERTIES")
    assert "AVAILABLE_DEVICE_MEM_SIZE" in core.get_property("CPU", "SUPPORTED_PROPERTIES")
