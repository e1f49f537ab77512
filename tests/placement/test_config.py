"""Per-device configuration (the doc's ov::device::properties): named keys, provider options, refusals."""

from __future__ import annotations

import json
from pathlib import Path

import onnxruntime as ort
import pytest
from support.helpers import HAS_OPENVINO, OPENVINO_ONLY, chain_model, hardmax_model, needs_openvino
from support.robust import invoke, one_error_line

import hetero_cli as hc
import hetero_cli.device as device
import hetero_cli.hint as hints
import hetero_cli.properties as properties
from hetero_cli import cli
from hetero_cli.ort.session import SessionRequest, observe_sessions
from hetero_cli.placement import config
from hetero_cli.placement import devices as registry
from hetero_cli.runtime import CompiledSubgraph

ROOT = Path(__file__).resolve().parents[2]
DIGITS = ROOT / "models" / "digits.onnx"
DIGIT_3 = ROOT / "samples" / "images" / "digit_3.png"


_ASKED: list[SessionRequest] = []  # the sessions the engine asked for while ``spy`` is on


@pytest.fixture
def spy():
    """Remember the providers each session was asked for."""
    _ASKED.clear()
    with observe_sessions(_ASKED.append):
        yield
    _ASKED.clear()


def asked_providers(session) -> list:
    """The providers the engine asked ORT to create ``session`` with."""
    return next(list(r.providers) for r in _ASKED if r.session is session)


def provider_options(sub: CompiledSubgraph, ep: str) -> dict[str, str]:
    """The options the engine asked ORT to create ``ep`` with for this subgraph."""
    for entry in asked_providers(sub.session):
        if isinstance(entry, tuple) and entry[0] == ep:
            return dict(entry[1])
        if entry == ep:
            return {}
    raise AssertionError(f"{ep} not among {asked_providers(sub.session)}")


def by_device(compiled: hc.CompiledModel, name: str) -> list[CompiledSubgraph]:
    subs = [s for s in compiled.subgraphs if s.device == name]
    assert subs, f"no {name} subgraph in {[s.device for s in compiled.subgraphs]}"
    return subs


@pytest.fixture(scope="module")
def chain():
    return chain_model()


@pytest.fixture(scope="module")
def split_model():
    return hardmax_model()


# --- named keys -----------------------------------------------------------------------------------------


def test_threads_on_cpu_set_the_session_threads(chain):
    compiled = hc.Core().compile_model(chain, "HETERO:CPU", {"CPU": {"INFERENCE_NUM_THREADS": 2}})
    assert compiled.subgraphs[0].session.get_session_options().intra_op_num_threads == 2


def test_threads_with_the_properties_key(chain):
    compiled = hc.Core().compile_model(chain, "HETERO:CPU", {"CPU": {properties.inference_num_threads: 1}})
    assert compiled.subgraphs[0].session.get_session_options().intra_op_num_threads == 1


@pytest.mark.parametrize("value", ["YES", "yes", True, "true", 1])
def test_perf_count_switches_profiling_on(chain, value):
    compiled = hc.Core().compile_model(chain, "HETERO:CPU", {"CPU": {"PERF_COUNT": value}})
    assert compiled.subgraphs[0].session.get_session_options().enable_profiling


@pytest.mark.parametrize("value", ["NO", False, "false", 0])
def test_perf_count_off(chain, value):
    compiled = hc.Core().compile_model(chain, "HETERO:CPU", {"CPU": {"PERF_COUNT": value}})
    assert not compiled.subgraphs[0].session.get_session_options().enable_profiling


def test_hetero_level_perf_count_applies_to_every_device(chain):
    compiled = hc.Core().compile_model(chain, "HETERO:CPU", {"PERF_COUNT": "YES"})
    assert compiled.subgraphs[0].session.get_session_options().enable_profiling


def test_perf_count_only_for_the_device_it_is_given_to(chain):
    compiled = hc.Core().compile_model(chain, "HETERO:CPU", {"OPENVINO": {"PERF_COUNT": "YES"}})
    assert not compiled.subgraphs[0].session.get_session_options().enable_profiling


@pytest.mark.parametrize("value", [hc.Type.f32, "f32", "FP32", "float32"])
def test_f32_precision_accepted_on_cpu(chain, value):
    compiled = hc.Core().compile_model(chain, "HETERO:CPU", {"CPU": {hints.inference_precision: value}})
    assert [s.device for s in compiled.subgraphs] == ["CPU"]


@pytest.mark.parametrize("value", [hc.Type.f16, "bf16"])
def test_lower_precision_refused_on_cpu_ep(chain, value):
    with pytest.raises(hc.ConfigError) as err:
        hc.Core().compile_model(chain, "HETERO:CPU", {"CPU": {"INFERENCE_PRECISION_HINT": value}})
    assert "CPU" in str(err.value)
    assert "INFERENCE_PRECISION_HINT" in str(err.value)


@needs_openvino
@pytest.mark.parametrize(
    "config",
    [{"OPENVINO": {"INFERENCE_PRECISION_HINT": "f16"}}, {"OPENVINO": {"precision": "FP16"}}],
    ids=["named", "provider_option"],
)
def test_f16_on_openvinos_cpu_device_is_refused_when_configured(chain, config):
    """ORT's OpenVINO EP computes in FP32 (or ACCURACY) only on OpenVINO's CPU device: it would drop the EP."""
    with pytest.raises(hc.ConfigError, match=r"takes precision FP32 or ACCURACY on OpenVINO's CPU device"):
        hc.Core().set_property("OPENVINO", config["OPENVINO"])


def test_the_openvino_precision_check_follows_a_configured_device_type():
    core = hc.Core()
    core.set_property("OPENVINO", {"device_type": "GPU", "INFERENCE_PRECISION_HINT": "f16"})  # fine on a GPU
    with pytest.raises(hc.ConfigError, match="on OpenVINO's CPU device"):
        hc.Core().set_property("OPENVINO.GPU", {"device_type": "CPU", "INFERENCE_PRECISION_HINT": "f16"})


def test_the_precision_check_reads_the_device_type_set_in_an_earlier_call():
    """Each set_property update was checked alone: f16 after device_type=GPU (set before) was refused; and
    a later device_type=CPU under f16 must be refused, leaving the settings as they were."""
    core = hc.Core()
    core.set_property("OPENVINO", {"device_type": "GPU"})
    core.set_property("OPENVINO", {"INFERENCE_PRECISION_HINT": "f16"})
    with pytest.raises(hc.ConfigError, match="on OpenVINO's CPU device"):
        core.set_property("OPENVINO", {"device_type": "CPU"})
    assert core.get_property("OPENVINO", "device_type") == "GPU"
    with pytest.raises(hc.ConfigError, match="on OpenVINO's CPU device"):
        core.set_property({"OPENVINO": {"device_type": "CPU"}})


def test_deeply_nested_device_properties_json_is_a_config_error():
    with pytest.raises(hc.ConfigError, match="not valid JSON"):
        config.split({"DEVICE_PROPERTIES": '{"a":' + "[" * 200000})


@needs_openvino
def test_openvino_named_keys_map_to_provider_options(split_model, spy):
    config = {"OPENVINO": {"INFERENCE_NUM_THREADS": 2, "INFERENCE_PRECISION_HINT": hc.Type.f32}}
    compiled = hc.Core().compile_model(split_model, "HETERO:OPENVINO,CPU", config)
    for sub in by_device(compiled, "OPENVINO"):
        options = provider_options(sub, "OpenVINOExecutionProvider")
        assert options["num_of_threads"] == "2"
        assert options["precision"] == "FP32"
        assert options["device_type"] == "CPU"
        assert sub.fallback_nodes == []
    for sub in by_device(compiled, "CPU"):  # the CPU subgraph is not touched by OPENVINO's config
        assert sub.session.get_session_options().intra_op_num_threads != 2


@needs_openvino
def test_provider_options_pass_through(split_model, spy, tmp_path):
    config = {"OPENVINO": {"num_streams": "1", "cache_dir": str(tmp_path)}}
    compiled = hc.Core().compile_model(split_model, "HETERO:OPENVINO,CPU", config)
    for sub in by_device(compiled, "OPENVINO"):
        options = provider_options(sub, "OpenVINOExecutionProvider")
        assert options["num_streams"] == "1"
        assert options["cache_dir"] == str(tmp_path)
        assert sub.fallback_nodes == []


@needs_openvino
def test_openvino_perf_count(split_model):
    compiled = hc.Core().compile_model(split_model, "HETERO:OPENVINO,CPU", {"OPENVINO": {"PERF_COUNT": True}})
    for sub in compiled.subgraphs:
        assert sub.session.get_session_options().enable_profiling == (sub.device == "OPENVINO")


# --- refusals ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("config", "named"),
    [
        (
            {"CPU": {"FOO": 1}},
            ["CPU", "FOO", "PERF_COUNT", "INFERENCE_NUM_THREADS", "INFERENCE_PRECISION_HINT"],
        ),
        ({"CPU": {"num_of_threads": 1}}, ["CPU", "num_of_threads", "INFERENCE_NUM_THREADS"]),
        ({"OPENVINO": {"bogus_option": 1}}, ["OPENVINO", "bogus_option", "num_of_threads", "PERF_COUNT"]),
        ({"GPU": {"FOO": 1}}, ["GPU", "FOO", "device_id"]),
    ],
)
def test_unknown_device_key_refused_naming_device_and_known_keys(chain, config, named):
    with pytest.raises(hc.ConfigError) as err:
        hc.Core().compile_model(chain, "HETERO:CPU", config)
    for text in named:
        assert text in str(err.value)


def test_unknown_hetero_key_refused(chain):
    with pytest.raises(hc.ConfigError) as err:
        hc.Core().compile_model(chain, "HETERO:CPU", {"NOT_A_KEY": 1})
    assert "NOT_A_KEY" in str(err.value)
    assert "MULTI_DEVICE_PRIORITIES" in str(err.value)


def test_config_for_unknown_device_refused(chain):
    with pytest.raises(hc.ConfigError) as err:
        hc.Core().compile_model(chain, "HETERO:CPU", {"FPGA": {"PERF_COUNT": True}})
    assert "FPGA" in str(err.value)
    assert "OPENVINO" in str(err.value)


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("INFERENCE_NUM_THREADS", "abc"),
        ("INFERENCE_NUM_THREADS", -1),
        ("INFERENCE_NUM_THREADS", 1.5),
        ("PERF_COUNT", "maybe"),
        ("INFERENCE_PRECISION_HINT", "int3"),
    ],
)
def test_bad_values_refused(chain, key, value):
    with pytest.raises(hc.ConfigError) as err:
        hc.Core().compile_model(chain, "HETERO:CPU", {"CPU": {key: value}})
    assert key in str(err.value)


@pytest.mark.parametrize(
    "options",
    [
        pytest.param({"num_streams": "abc"}, id="num_streams-not-a-number"),
        pytest.param({"INFERENCE_PRECISION_HINT": "f16"}, id="f16-on-openvino-cpu"),
    ],
)
@needs_openvino
def test_openvino_value_its_ep_rejects_is_refused_not_silently_run_on_cpu(split_model, options):
    # ORT drops an EP whose options it cannot parse and runs everything on the CPU EP. A config value
    # that makes the device unusable is a bad value: it must be refused, not turned into a CPU run.
    with pytest.raises(hc.HeteroError) as err:
        hc.Core().compile_model(split_model, "HETERO:OPENVINO,CPU", {"OPENVINO": options})
    assert "OPENVINO" in str(err.value)


def test_bad_key_refused_by_set_property():
    core = hc.Core()
    with pytest.raises(hc.ConfigError):
        core.set_property("CPU", {"FOO": 1})
    with pytest.raises(hc.ConfigError):
        core.set_property("CPU", {"INFERENCE_NUM_THREADS": "many"})
    with pytest.raises(hc.DeviceError):
        core.set_property("FPGA", {"PERF_COUNT": True})


def test_config_for_a_device_not_in_the_list_is_still_checked(chain):
    with pytest.raises(hc.ConfigError):
        hc.Core().compile_model(chain, "HETERO:CPU", {"OPENVINO": {"FOO": 1}})


def test_config_for_an_unavailable_device_is_accepted(chain):
    core = hc.Core()
    core.set_property("GPU", {properties.enable_profiling: True})
    compiled = core.compile_model(chain, "HETERO:CPU", {"GPU": {"device_id": "0"}})
    assert [s.device for s in compiled.subgraphs] == ["CPU"]


# --- DEVICE_PROPERTIES and plain devices -------------------------------------------------------------------


def test_device_properties_nesting(chain):
    config = {device.properties: {"cpu": {"INFERENCE_NUM_THREADS": 3, "PERF_COUNT": "YES"}}}
    compiled = hc.Core().compile_model(chain, "HETERO:CPU", config)
    so = compiled.subgraphs[0].session.get_session_options()
    assert so.intra_op_num_threads == 3
    assert so.enable_profiling
    assert compiled.get_property("DEVICE_PROPERTIES")["CPU"]["INFERENCE_NUM_THREADS"] == 3


def test_device_properties_as_json_text_from_the_command_line(chain):
    """--config DEVICE_PROPERTIES='{...}' hands the value over as text: its JSON is read."""
    text = 'DEVICE_PROPERTIES={"CPU": {"PERF_COUNT": "YES"}}'
    result = invoke(cli.query, "-m", DIGITS, "-d", "HETERO:CPU", "--config", text)
    assert result.exit_code == 0, result.stderr
    config = {"DEVICE_PROPERTIES": '{"CPU": {"INFERENCE_NUM_THREADS": 3}}'}
    compiled = hc.Core().compile_model(chain, "HETERO:CPU", config)
    assert compiled.subgraphs[0].session.get_session_options().intra_op_num_threads == 3


@pytest.mark.parametrize(
    "value",
    [
        "CPU",
        '{"CPU":',
        {"CPU": 3},
        {"FPGA": {"PERF_COUNT": True}},
        {"CPU": {"FOO": 1}},
    ],
)
def test_device_properties_malformed_refused(chain, value):
    with pytest.raises(hc.ConfigError):
        hc.Core().compile_model(chain, "HETERO:CPU", {"DEVICE_PROPERTIES": value})


def test_config_on_a_plain_device(chain):
    compiled = hc.Core().compile_model(chain, "CPU", {"INFERENCE_NUM_THREADS": 2, "PERF_COUNT": "YES"})
    so = compiled.subgraphs[0].session.get_session_options()
    assert so.intra_op_num_threads == 2
    assert so.enable_profiling


def test_nested_config_on_a_plain_device(chain):
    compiled = hc.Core().compile_model(chain, "CPU", {"CPU": {"INFERENCE_NUM_THREADS": 2}})
    assert compiled.subgraphs[0].session.get_session_options().intra_op_num_threads == 2


def test_plain_device_refuses_another_devices_key(chain):
    with pytest.raises(hc.ConfigError) as err:
        hc.Core().compile_model(chain, "CPU", {"num_streams": "1"})
    assert "CPU" in str(err.value)
    assert "num_streams" in str(err.value)


@needs_openvino
def test_config_on_plain_openvino(chain, spy):
    compiled = hc.Core().compile_model(chain, "OPENVINO", {"INFERENCE_NUM_THREADS": 1, "num_streams": "1"})
    options = provider_options(compiled.subgraphs[0], "OpenVINOExecutionProvider")
    assert options["num_of_threads"] == "1"
    assert options["num_streams"] == "1"


def test_set_property_per_device_reaches_the_session(chain):
    core = hc.Core()
    core.set_property("cpu", {properties.inference_num_threads: 2})
    assert core.get_property("CPU", "INFERENCE_NUM_THREADS") == 2
    compiled = core.compile_model(chain, "HETERO:CPU")
    assert compiled.subgraphs[0].session.get_session_options().intra_op_num_threads == 2


def test_compile_config_wins_over_set_property(chain):
    core = hc.Core()
    core.set_property("CPU", {"INFERENCE_NUM_THREADS": 2})
    compiled = core.compile_model(chain, "HETERO:CPU", {"CPU": {"INFERENCE_NUM_THREADS": 1}})
    assert compiled.subgraphs[0].session.get_session_options().intra_op_num_threads == 1


@pytest.mark.parametrize("flavour", [pytest.param("openvino", marks=OPENVINO_ONLY)])
def test_doc_snippet_per_device_configuration(split_model, flavour):
    core = hc.Core()
    core.set_property("HETERO", {device.priorities: "GPU,OPENVINO,CPU"})
    core.set_property("GPU", {properties.enable_profiling: True})
    core.set_property("CPU", {hints.inference_precision: hc.Type.f32})
    compiled = core.compile_model(model=split_model, device_name="HETERO")
    assert [s.device for s in compiled.subgraphs] == ["OPENVINO", "CPU", "OPENVINO"]
    assert HAS_OPENVINO


def test_priorities_given_one_by_one_as_in_openvinos_cpp_api(chain):
    """``device.priorities("OPENVINO", "CPU")`` (ov::device::priorities's form) is the comma-joined list."""
    assert device.priorities("GPU", "CPU") == ("MULTI_DEVICE_PRIORITIES", "GPU,CPU")
    core = hc.Core()
    core.set_property("HETERO", dict([device.priorities("GPU", "CPU")]))
    compiled = core.compile_model(chain, "HETERO")
    assert compiled.get_property("MULTI_DEVICE_PRIORITIES") == "GPU,CPU"
    supported = compiled.get_property(properties.supported_properties)
    assert {"SUPPORTED_PROPERTIES", "EXECUTION_DEVICES", "PERFORMANCE_HINT"} <= set(supported)
    for name in supported:
        compiled.get_property(name)  # every property it lists answers


# --- values of the wrong size or type ---------------------------------------------------------------------


def classify_with(*args):
    """``hetero classify`` of the default model and a sample image on CPU, with extra arguments."""
    return invoke(cli.classify, "-m", DIGITS, "-i", DIGIT_3, "-d", "CPU", *args)


def classify_with_config_file(tmp_path, doc, device="CPU"):
    path = tmp_path / "config.json"
    path.write_text(json.dumps(doc))
    return invoke(cli.classify, "-m", DIGITS, "-i", DIGIT_3, "-d", device, "-load_config", path)


@pytest.mark.parametrize(
    "value", [2**31, 2**40, "2147483648", config.MAX_THREADS + 1, "99999999999999999999"]
)
@pytest.mark.parametrize("name", ["CPU", "OPENVINO"])
def test_threads_beyond_what_ort_takes_refused(chain, name, value):
    # intra_op_num_threads is a C int: ORT raised a raw TypeError for 2**31 and more
    with pytest.raises(hc.ConfigError) as err:
        hc.Core().compile_model(chain, "CPU", {name: {"INFERENCE_NUM_THREADS": value}})
    assert "INFERENCE_NUM_THREADS" in str(err.value)
    assert f"0 to {config.MAX_THREADS}" in str(err.value)
    with pytest.raises(hc.ConfigError):
        hc.Core().set_property(name, {"INFERENCE_NUM_THREADS": value})


def test_threads_beyond_what_ort_takes_refused_by_the_api_on_a_plain_device(chain):
    with pytest.raises(hc.ConfigError, match="INFERENCE_NUM_THREADS"):
        hc.Core().compile_model(chain, "CPU", {"INFERENCE_NUM_THREADS": 2**40})


@pytest.mark.parametrize(
    "option", ["CPU:INFERENCE_NUM_THREADS=2147483648", "INFERENCE_NUM_THREADS=2147483648"]
)
def test_threads_beyond_what_ort_takes_refused_by_the_cli(option):
    result = classify_with("--config", option)
    assert result.exit_code == 2
    line = one_error_line(result)
    assert "INFERENCE_NUM_THREADS" in line and "2147483648" in line and "whole number" in line


def test_threads_up_to_the_limit_accepted():
    cpu = config.device_settings(registry.lookup("CPU"), {"INFERENCE_NUM_THREADS": config.MAX_THREADS})
    assert cpu.intra_op_num_threads == config.MAX_THREADS


def test_zero_threads_on_openvino_leaves_the_eps_default():
    # the OpenVINO EP reads num_of_threads=0 as one thread (with a warning); 0 means "the default"
    settings = config.device_settings(registry.lookup("OPENVINO"), {"INFERENCE_NUM_THREADS": 0})
    assert "num_of_threads" not in settings.provider_options
    assert settings.intra_op_num_threads == 0
    settings = config.device_settings(registry.lookup("OPENVINO"), {"INFERENCE_NUM_THREADS": 3})
    assert settings.provider_options["num_of_threads"] == "3"


BAD_PRIORITIES = [5, [1, None], ["CPU", 2], {"a": 1}, None, 1.5]


@pytest.mark.parametrize("value", BAD_PRIORITIES)
def test_priorities_of_the_wrong_type_refused(chain, value):
    with pytest.raises(hc.ConfigError) as err:
        hc.Core().compile_model(chain, "HETERO", {"MULTI_DEVICE_PRIORITIES": value})
    message = str(err.value)
    assert "MULTI_DEVICE_PRIORITIES" in message and '"OPENVINO,CPU"' in message and "list" in message
    with pytest.raises(hc.ConfigError, match="MULTI_DEVICE_PRIORITIES"):
        hc.Core().set_property("HETERO", {"MULTI_DEVICE_PRIORITIES": value})
    with pytest.raises(hc.ConfigError, match="MULTI_DEVICE_PRIORITIES"):
        hc.Core().set_property({"MULTI_DEVICE_PRIORITIES": value})


def test_priorities_as_a_list_accepted(chain):
    compiled = hc.Core().compile_model(chain, "HETERO", {"MULTI_DEVICE_PRIORITIES": ["CPU"]})
    assert [s.device for s in compiled.subgraphs] == ["CPU"]


@pytest.mark.parametrize("value", BAD_PRIORITIES)
def test_priorities_of_the_wrong_type_refused_by_the_cli(tmp_path, value):
    result = classify_with_config_file(tmp_path, {"HETERO": {"MULTI_DEVICE_PRIORITIES": value}}, "HETERO")
    assert result.exit_code == 2
    line = one_error_line(result)
    assert "MULTI_DEVICE_PRIORITIES" in line and "list" in line
    assert "unknown device" not in line


@pytest.mark.parametrize(
    ("key", "value", "words"),
    [
        ("cache_dir", {"a": 1}, ["path", "string"]),
        ("cache_dir", 5, ["path", "string"]),
        ("cache_dir", None, ["path", "string"]),
        ("cache_dir", ["x"], ["path", "string"]),
        ("num_streams", [1], ["string", "number", "list"]),
        ("num_streams", None, ["string", "number", "NoneType"]),
        ("num_streams", {"a": 1}, ["string", "number", "dict"]),
        ("num_streams", float("nan"), ["string", "number"]),
        ("num_streams", 2**31, ["whole number from 1"]),
        ("num_streams", 0, ["whole number from 1"]),
        ("num_of_threads", "2147483648", ["whole number from 1"]),
        ("num_of_threads", True, ["whole number from 1"]),
        ("device_type", {"a": 1}, ["string", "number"]),
    ],
)
def test_provider_option_values_that_are_not_scalars_refused(chain, tmp_path, monkeypatch, key, value, words):
    # they became paths: {"cache_dir": {"a": 1}} made a folder named "{'a': 1}" in the current directory
    monkeypatch.chdir(tmp_path)
    for call in (
        lambda: hc.Core().compile_model(chain, "CPU", {"OPENVINO": {key: value}}),
        lambda: hc.Core().compile_model(chain, "OPENVINO", {key: value}),
        lambda: hc.Core().set_property("OPENVINO", {key: value}),
    ):
        with pytest.raises(hc.ConfigError) as err:
            call()
        message = str(err.value)
        assert f"OPENVINO's {key}" in message, message
        for word in words:
            assert word in message, message
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("value", [{"a": 1}, 5, [1]])
def test_provider_option_values_that_are_not_scalars_refused_by_the_cli(tmp_path, monkeypatch, value):
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    result = classify_with_config_file(tmp_path, {"OPENVINO": {"cache_dir": value}})
    assert result.exit_code == 2
    line = one_error_line(result)
    assert "OPENVINO's cache_dir" in line and "string" in line
    assert list(work.iterdir()) == []


def test_provider_option_scalars_become_the_text_ort_takes(tmp_path):
    openvino = registry.lookup("OPENVINO")
    values = {
        "num_streams": 2,
        "num_of_threads": " 3",
        "enable_qdq_optimizer": True,
        "disable_dynamic_shapes": "false",
        "cache_dir": tmp_path,
        "model_priority": 4.0,
    }
    options = config.device_settings(openvino, values).provider_options
    assert options["num_streams"] == "2"
    assert options["num_of_threads"] == "3"
    assert options["enable_qdq_optimizer"] == "True"
    assert options["disable_dynamic_shapes"] == "false"
    assert options["cache_dir"] == str(tmp_path)
    assert options["model_priority"] == "4"
    assert all(isinstance(v, str) for v in options.values())


@pytest.mark.parametrize("value", [{"PERF_COUNT": "YES"}, 5])
def test_a_hetero_key_in_a_compile_config_says_where_heteros_keys_go(value):
    with pytest.raises(hc.ConfigError, match=r"top level of this config .*not under a 'HETERO' key"):
        hc.Core().compile_model(chain_model(), "HETERO:CPU", {"HETERO": value})


# --- get_property as OpenVINO answers it ------------------------------------------------------------------


def test_a_key_set_in_two_spellings_has_one_value_the_last():
    core = hc.Core()
    core.set_property("CPU", {"PERF_COUNT": False})
    core.set_property("CPU", {"perf_count": True})
    core.set_property("CPU", {"PERF_COUNT": False})  # stored apart from perf_count, this lost to it
    assert core.get_property("CPU", "PERF_COUNT") is False
    compiled = core.compile_model(chain_model(), "CPU")
    assert all(s.profiler is None for s in compiled.subgraphs)


def test_named_properties_are_typed_and_hetero_perf_count_reaches_devices():
    core = hc.Core()
    assert core.get_property("CPU", "PERF_COUNT") is False  # 'NO' would read as true in an if
    assert core.get_property("CPU", "INFERENCE_NUM_THREADS") == 0
    core.set_property("CPU", {"INFERENCE_NUM_THREADS": "3", "PERF_COUNT": "yes"})
    assert core.get_property("CPU", "INFERENCE_NUM_THREADS") == 3
    assert core.get_property("CPU", "PERF_COUNT") is True
    other = hc.Core()
    other.set_property({"PERF_COUNT": True})
    assert other.get_property("CPU", "PERF_COUNT") is True
    assert other.get_property("HETERO", "PERF_COUNT") is True


def test_hetero_properties_answer_their_defaults_and_refuse_unknown_keys():
    core = hc.Core()
    assert core.get_property("HETERO", "MULTI_DEVICE_PRIORITIES") == ""
    assert core.get_property("HETERO", "PERFORMANCE_HINT") == "LATENCY"
    assert core.get_property("HETERO", "PERF_COUNT") is False
    assert core.get_property("HETERO", "FULL_DEVICE_NAME") == "HETERO"
    for key in core.get_property("HETERO", "SUPPORTED_PROPERTIES"):
        core.get_property("HETERO", key)  # every key it lists answers
    core.set_property("HETERO", {"DEVICE_PROPERTIES": {"CPU": {"INFERENCE_NUM_THREADS": 2}}})
    assert core.get_property("HETERO", "DEVICE_PROPERTIES") == {"CPU": {"INFERENCE_NUM_THREADS": 2}}
    with pytest.raises(hc.ConfigError, match="unknown HETERO property 'NO_SUCH_KEY'"):
        core.get_property("HETERO", "NO_SUCH_KEY")
    assert core.configured("HETERO", "PERFORMANCE_HINT") is None
    assert core.get_available_devices() == core.available_devices


def test_device_properties_answer_each_value_as_get_property_types_it():
    core = hc.Core()
    core.set_property("CPU", {hints.inference_precision: hc.Type.f32, "INFERENCE_NUM_THREADS": "2"})
    assert core.get_property("CPU", "INFERENCE_PRECISION_HINT") == "f32"
    typed = {"CPU": {"INFERENCE_PRECISION_HINT": "f32", "INFERENCE_NUM_THREADS": 2}}
    assert core.get_property("HETERO", "DEVICE_PROPERTIES") == typed
    assert core.compile_model(chain_model(), "HETERO:CPU").get_property("DEVICE_PROPERTIES") == typed


def test_get_versions_names_what_runs_each_device():
    core = hc.Core()
    versions = core.get_versions("HETERO:CPU")
    assert list(versions) == ["HETERO", "CPU"]
    assert versions["HETERO"] == hc.core.Version("hetero-cli", hc.__version__)
    assert versions["CPU"].description == "CPUExecutionProvider"
    assert versions["CPU"].build_number.startswith(ort.__version__)
    assert list(core.get_versions("cpu")) == ["CPU"]
    with pytest.raises(hc.DeviceError, match="unknown device"):
        core.get_versions("XPU")


def test_plain_device_compile_reports_its_own_device_and_properties():
    core = hc.Core()
    core.set_property("HETERO", {"MULTI_DEVICE_PRIORITIES": "OPENVINO,CPU"})
    core.set_property("OPENVINO", {"INFERENCE_NUM_THREADS": 1})
    compiled = core.compile_model(chain_model(), "CPU")
    assert compiled.get_property("MULTI_DEVICE_PRIORITIES") == "CPU"
    assert compiled.get_property("DEVICE_PROPERTIES") == {}
    assert (
        core.compile_model(chain_model(), "HETERO").get_property("MULTI_DEVICE_PRIORITIES") == "OPENVINO,CPU"
    )


def test_bad_multi_device_priorities_is_blamed_not_the_device_string():
    for value, why in (("XPU,CPU", "unknown device 'XPU'"), (" ", "the device list is empty")):
        with pytest.raises(hc.DeviceError) as err:
            hc.Core().compile_model(chain_model(), "HETERO", {"MULTI_DEVICE_PRIORITIES": value})
        assert str(err.value).startswith(f"bad MULTI_DEVICE_PRIORITIES {value!r}") and why in str(err.value)


@pytest.mark.parametrize(
    ("value", "why"),
    [("FOO,CPU", "unknown device 'FOO'"), ("CPU,CPU", "listed twice"), ("HETERO:CPU", "inside HETERO")],
)
def test_set_property_checks_priorities_when_set(value, why):
    """As its docstring says (values checked now): they were stored and refused only by a compile, or
    ignored where the device string named its own list."""
    with pytest.raises(hc.DeviceError, match=why):
        hc.Core().set_property("HETERO", {"MULTI_DEVICE_PRIORITIES": value})
    with pytest.raises(hc.DeviceError, match=why):
        hc.Core().compile_model(chain_model(), "HETERO:CPU", {"MULTI_DEVICE_PRIORITIES": value})


@pytest.mark.parametrize("value", ["XPU", "", "cpu", 5, "GPU.x"])
def test_an_openvino_device_type_the_ep_knows_no_device_by_is_refused(value):
    """The OpenVINO EP takes any device_type and then claims no node: the OpenVINO device silently ran
    nothing."""
    with pytest.raises(hc.ConfigError, match="bad device_type"):
        hc.Core().set_property("OPENVINO", {"device_type": value})
    for good in ("CPU", "GPU.1", "AUTO:GPU,CPU"):
        hc.Core().set_property("OPENVINO", {"device_type": good})


def test_a_hetero_key_under_a_device_says_where_it_goes():
    """benchmark_app's -dump_config writes PERFORMANCE_HINT under the device; here it is HETERO's."""
    for target in ("CPU", "HETERO:CPU"):
        with pytest.raises(hc.ConfigError, match="PERFORMANCE_HINT is HETERO's: give it at the config's top"):
            hc.Core().compile_model(chain_model(), target, {"CPU": {"PERFORMANCE_HINT": "LATENCY"}})
    with pytest.raises(hc.ConfigError) as caught:
        hc.Core().compile_model(chain_model(), "CPU", {"CPU": {"NUM_STREAMS": "1"}})
    assert "HETERO's" not in str(caught.value)


def test_plain_device_config_names_a_misplaced_key_and_takes_dot_keys(tmp_path):
    with pytest.raises(hc.ConfigError, match="unknown config key 'load_config' for CPU"):
        hc.Core().compile_model(chain_model(), "CPU", {"load_config": {"CPU": {"NUM_STREAMS": "1"}}})
    compiled = hc.Core().compile_model(
        chain_model(), "CPU", {"HETERO_DUMP_GRAPH_DOT": "YES", "HETERO_DOT_DIR": str(tmp_path)}
    )
    assert len(compiled.dot_files) == 2 and all(p.parent == tmp_path for p in compiled.dot_files)


def test_a_profiled_compile_that_fails_late_leaves_no_folder(tmp_path, monkeypatch):
    import tempfile

    from onnx import TensorProto
    from onnx import helper as h

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    nodes = [
        h.make_node("Relu", ["x"], ["y"], name="relu"),
        h.make_node("Constant", [], ["c"], value=h.make_tensor("v", TensorProto.BFLOAT16, [2], [1.0, 2.0])),
    ]
    graph = h.make_graph(
        nodes,
        "g",
        [h.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
        [
            h.make_tensor_value_info("y", TensorProto.FLOAT, [2]),
            h.make_tensor_value_info("c", TensorProto.BFLOAT16, [2]),
        ],
    )
    model = h.make_model(graph, ir_version=10, opset_imports=[h.make_opsetid("", 17)])
    with pytest.raises(hc.CompileError, match="cannot be handed over"):
        hc.Core().compile_model(model, "CPU", {"PERF_COUNT": "YES"})
    assert list(tmp_path.iterdir()) == []


@needs_openvino
def test_execution_devices_name_the_cpu_where_ort_ran_part_of_a_subgraph():
    compiled = hc.Core().compile_model(hardmax_model(), "OPENVINO")
    assert compiled.subgraphs[0].fallback_nodes
    assert compiled.execution_devices == ["OPENVINO", "CPU"]
    assert compiled.get_property("EXECUTION_DEVICES") == ["OPENVINO", "CPU"]
