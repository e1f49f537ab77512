"""Performance counters: the documented -pc format, real ORT profiler data, and profiling only on demand."""

from __future__ import annotations

import gc
import tempfile
from pathlib import Path

import numpy as np
from support.counters import parse_counters
from support.helpers import guarded_chain_model, needs_openvino

import hetero_cli as hc
from hetero_cli.runtime.profiling import (
    EXECUTED,
    NOT_RUN,
    OPTIMIZED_OUT,
    NodeEvent,
    ProfilingInfo,
    Run,
    format_counters,
    subgraph_counters,
)

# OpenVINO's HETERO documentation's example, as it prints it
DOC = """\
subgraph1: 1. input preprocessing (mean data/HDDL):EXECUTED layerType:          realTime: 129   cpu: 129  execType:
subgraph1: 2. input transfer to DDR:EXECUTED                layerType:          realTime: 201   cpu: 0    execType:
subgraph1: 3. HDDL execute time:EXECUTED                    layerType:          realTime: 3808  cpu: 0    execType:
subgraph1: 4. output transfer from DDR:EXECUTED             layerType:          realTime: 55    cpu: 0    execType:
subgraph1: 5. HDDL output postprocessing:EXECUTED           layerType:          realTime: 7     cpu: 7    execType:
subgraph1: 6. copy to IE blob:EXECUTED                      layerType:          realTime: 2     cpu: 2    execType:
subgraph2: out_prob:          NOT_RUN                       layerType: Output   realTime: 0     cpu: 0    execType: unknown
subgraph2: prob:              EXECUTED                      layerType: SoftMax  realTime: 10    cpu: 10   execType: ref
Total time: 4212 microseconds"""
# the same counters as format_counters prints them: the same fields, every column as wide as its values
ALIGNED = """\
subgraph1: 1. input preprocessing (mean data/HDDL):EXECUTED      layerType:          realTime: 129   cpu: 129  execType:
subgraph1: 2. input transfer to DDR:               EXECUTED      layerType:          realTime: 201   cpu: 0    execType:
subgraph1: 3. HDDL execute time:                   EXECUTED      layerType:          realTime: 3808  cpu: 0    execType:
subgraph1: 4. output transfer from DDR:            EXECUTED      layerType:          realTime: 55    cpu: 0    execType:
subgraph1: 5. HDDL output postprocessing:          EXECUTED      layerType:          realTime: 7     cpu: 7    execType:
subgraph1: 6. copy to IE blob:                     EXECUTED      layerType:          realTime: 2     cpu: 2    execType:
subgraph2: out_prob:                               NOT_RUN       layerType: Output   realTime: 0     cpu: 0    execType: unknown
subgraph2: prob:                                   EXECUTED      layerType: SoftMax  realTime: 10    cpu: 10   execType: ref
Total time: 4212 microseconds"""


def test_format_reproduces_the_documented_example_aligned() -> None:
    infos, total = parse_counters(DOC)
    assert total == 4212 and len(infos) == 8
    assert format_counters(infos) == ALIGNED
    assert parse_counters(ALIGNED) == (infos, total)


def test_parse_round_trip_and_total_is_sum_of_real_time() -> None:
    infos = [
        ProfilingInfo("conv1", "Conv", "CPUExecutionProvider", EXECUTED, 1234567, 1234567, 1),
        ProfilingInfo("a very long node name that overflows", "LayerNormalization", "x", EXECUTED, 5, 4, 12),
        ProfilingInfo("out_y", "Output", "unknown", NOT_RUN, 0, 0, 12),
    ]
    text = format_counters(infos)
    back, total = parse_counters(text)
    assert back == infos
    assert total == 1234572


def test_fused_ep_parts_and_the_kernels_between_them_follow_the_run() -> None:
    """A fused EP's subgraph that ORT ran in two parts with a CPU kernel before, between and after them:
    one line each in the run's order, every microsecond counted once (the run took 100)."""
    ov, cpu = "OpenVINOExecutionProvider", "CPUExecutionProvider"
    run = Run(
        1,
        1000.0,
        1100.0,
        (
            NodeEvent("OpenVINO-EP-subgraph_2_0", "", ov, 1050.0, 20),
            NodeEvent("cast", "Cast", cpu, 1002.0, 3),
            NodeEvent("OpenVINO-EP-subgraph_1_0", "", ov, 1010.0, 25),
            NodeEvent("isinf", "IsInf", cpu, 1040.0, 5),
            NodeEvent("tail", "Identity", cpu, 1090.0, 4),
        ),
    )
    infos = subgraph_counters(2, "OPENVINO", ov, True, {"a": "Relu", "b": "Neg"}, run, ["y"])
    assert [i.node_name for i in infos] == [
        "cast",
        "1. input transfer to OPENVINO",
        "2. OPENVINO execute time (part 1 of 2)",
        "isinf",
        "3. OPENVINO execute time (part 2 of 2)",
        "4. output transfer from OPENVINO",
        "tail",
        "out_y",
    ]
    assert [i.real_time_us for i in infos] == [3, 7, 25, 5, 20, 26, 4, 0]
    assert sum(i.real_time_us for i in infos) <= 100
    alone = Run(1, 1000.0, 1100.0, (NodeEvent("OpenVINO-EP-subgraph_1_0", "", ov, 1010.0, 80),))
    assert [
        (i.node_name, i.real_time_us) for i in subgraph_counters(1, "OPENVINO", ov, True, {}, alone, [])
    ] == [
        ("1. input transfer to OPENVINO", 10),
        ("2. OPENVINO execute time", 80),
        ("3. output transfer from OPENVINO", 10),
    ]


def _run(device: str, config: dict | None = None) -> tuple[hc.CompiledModel, list[ProfilingInfo]]:
    compiled = hc.Core().compile_model(guarded_chain_model(), device, config)
    request = compiled.create_infer_request()
    request.infer({"x": np.random.default_rng(0).standard_normal((4, 8)).astype(np.float32)})
    return compiled, request.get_profiling_info()


def _check_numbering(compiled: hc.CompiledModel, infos: list[ProfilingInfo]) -> None:
    text = format_counters(infos)
    back, total = parse_counters(text)
    assert back == infos
    assert total == sum(i.real_time_us for i in infos)
    numbers = [i.subgraph for i in infos]
    assert numbers == sorted(numbers)
    assert set(numbers) <= {s.index + 1 for s in compiled.subgraphs}
    producer = {o: s.index + 1 for s in compiled.subgraphs for o in s.outputs}
    outputs = [i for i in infos if i.node_type == "Output"]
    assert {(i.node_name, i.subgraph) for i in outputs} == {
        ("out_y", producer["y"]),
        ("out_c", producer["c"]),
    }
    assert all(i.status == NOT_RUN and i.real_time_us == 0 for i in outputs)


def test_a_node_orts_optimizations_removed_is_optimized_out_with_its_op_type() -> None:
    cpu = "CPUExecutionProvider"
    run = Run(1, 0.0, 50.0, (NodeEvent("relu", "Relu", cpu, 10.0, 30),))
    infos = subgraph_counters(1, "CPU", cpu, True, {"relu": "Relu", "copy": "Identity"}, run, [])
    assert [(i.node_name, i.node_type, i.status) for i in infos] == [
        ("relu", "Relu", EXECUTED),
        ("copy", "Identity", OPTIMIZED_OUT),
    ]


def test_cpu_alone_gives_one_line_per_node() -> None:
    compiled, infos = _run("CPU", {"PERF_COUNT": "YES"})
    _check_numbering(compiled, infos)
    executed = {i.node_name: i for i in infos if i.status == EXECUTED}
    assert {"relu", "isinf", "where", "sigmoid", "hardmax"} <= set(executed)
    assert executed["hardmax"].node_type == "Hardmax"
    assert executed["hardmax"].exec_type == "CPUExecutionProvider"
    assert all(i.real_time_us == i.cpu_time_us for i in executed.values())
    assert sum(i.real_time_us for i in infos) > 0


@needs_openvino
def test_automatic_split_gives_stage_lines_for_openvino() -> None:
    compiled, infos = _run("HETERO:OPENVINO,CPU", {"PERF_COUNT": "YES"})
    assert len(compiled.subgraphs) >= 2
    _check_numbering(compiled, infos)
    for s in compiled.subgraphs:
        mine = [i for i in infos if i.subgraph == s.index + 1 and i.status == EXECUTED]
        assert mine, f"no counters for {s.name}"
        if s.device == "OPENVINO" and not s.fallback_nodes:
            names = [i.node_name for i in mine]
            assert names == [
                "1. input transfer to OPENVINO",
                "2. OPENVINO execute time",
                "3. output transfer from OPENVINO",
            ]
            assert mine[1].real_time_us > 0


@needs_openvino
def test_profiling_one_device_counts_only_its_subgraphs() -> None:
    compiled, infos = _run("HETERO:OPENVINO,CPU", {"CPU": {"PERF_COUNT": "YES"}})
    cpu = {s.index + 1 for s in compiled.subgraphs if s.device == "CPU"}
    assert infos and {i.subgraph for i in infos} <= cpu
    assert all(s.profiler is None for s in compiled.subgraphs if s.device != "CPU")


@needs_openvino
def test_forced_split_and_repeated_inference() -> None:
    model = hc.Core().read_model(guarded_chain_model())
    for k, node in enumerate(model.get_ops()):
        node.get_rt_info()["affinity"] = (
            "CPU" if node.get_type_name() in ("IsInf", "Hardmax") or k == 3 else "OPENVINO"
        )
    compiled = hc.Core().compile_model(model, "HETERO:OPENVINO,CPU", {"PERF_COUNT": True})
    request = compiled.create_infer_request()
    x = np.ones((4, 8), np.float32)
    for _ in range(3):
        request.infer({"x": x})
    history = request.get_profiling_history()
    assert len(history) == 3
    for infos in history:
        _check_numbering(compiled, infos)
    assert request.get_profiling_info() == history[-1]


def test_a_read_of_the_counters_makes_the_profiled_sessions_again_for_the_next_inferences():
    """ONNX Runtime profiles a session until its trace is ended, and cannot start again: a read ends the
    traces it reads, and the compiled model's next revision has the sessions made again with fresh ones,
    so every inference has counters (as OpenVINO's requests have); the history keeps each inference's."""
    compiled = hc.Core().compile_model(guarded_chain_model(), "HETERO:CPU", {"PERF_COUNT": True})
    request = compiled.create_infer_request()
    x = np.ones((4, 8), np.float32)
    before = compiled.current()
    request.infer({"x": x})
    first = request.get_profiling_info()
    after = compiled.current()
    assert first and after.number == before.number + 1
    assert all(a.session is not b.session for a, b in zip(before.runs, after.runs, strict=True))
    request.infer({"x": x})
    second = request.get_profiling_info()
    assert [i.node_name for i in second] == [i.node_name for i in first]
    history = request.get_profiling_history()
    assert len(history) == 2 and history[0] == first and history[1] == second


def test_no_profiler_without_perf_count() -> None:
    compiled, infos = _run("HETERO:CPU")
    assert infos == []
    assert all(s.profiler is None for s in compiled.subgraphs)


def test_profiling_leaves_no_files(own_places: Path) -> None:
    """The profiler's folder is made in the temporary folder (the test's own: tests/conftest.py) and goes
    with the compiled model; nothing lands in the current directory."""
    temp = Path(tempfile.gettempdir())
    assert temp == own_places / "temp"
    compiled, infos = _run("CPU", {"PERF_COUNT": "YES"})
    assert infos
    assert compiled.profile_dir is not None and compiled.profile_dir.parent == temp
    del compiled
    gc.collect()
    assert list(temp.iterdir()) == []
    assert list(Path.cwd().iterdir()) == []
