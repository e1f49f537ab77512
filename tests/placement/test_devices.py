"""Device registry and device strings: names, availability, HETERO priorities, malformed strings."""

from __future__ import annotations

import logging

import onnxruntime as ort
import pytest
from support.helpers import HAS_OPENVINO, chain_model, needs_openvino

import hetero_cli as hc
from hetero_cli.placement import devices as registry

PROVIDERS = ort.get_available_providers()
NO_CUDA = "CUDAExecutionProvider" not in PROVIDERS
KNOWN = ["CPU", "GPU", "OPENVINO", "OPENVINO.GPU", "OPENVINO.NPU", "TENSORRT"]


def device_names(compiled: hc.CompiledModel) -> list[str]:
    return [s.device for s in compiled.subgraphs]


# --- registry ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("spelled", "canonical", "ep", "options"),
    [
        ("cpu", "CPU", "CPUExecutionProvider", {}),
        ("CPU", "CPU", "CPUExecutionProvider", {}),
        ("Cpu", "CPU", "CPUExecutionProvider", {}),
        ("gpu", "GPU", "CUDAExecutionProvider", {"device_id": "0"}),
        ("GPU.0", "GPU", "CUDAExecutionProvider", {"device_id": "0"}),
        ("gpu.1", "GPU.1", "CUDAExecutionProvider", {"device_id": "1"}),
        ("openvino", "OPENVINO", "OpenVINOExecutionProvider", {"device_type": "CPU"}),
        ("openvino.cpu", "OPENVINO", "OpenVINOExecutionProvider", {"device_type": "CPU"}),
        ("OPENVINO.GPU", "OPENVINO.GPU", "OpenVINOExecutionProvider", {"device_type": "GPU"}),
        ("OpenVINO.npu", "OPENVINO.NPU", "OpenVINOExecutionProvider", {"device_type": "NPU"}),
        ("tensorrt", "TENSORRT", "TensorrtExecutionProvider", {"device_id": "0"}),
        ("TENSORRT.2", "TENSORRT.2", "TensorrtExecutionProvider", {"device_id": "2"}),
        (" cpu ", "CPU", "CPUExecutionProvider", {}),
    ],
)
def test_names_are_case_insensitive_with_canonical_output(spelled, canonical, ep, options):
    device = registry.lookup(spelled)
    assert device.name == canonical
    assert device.ep == ep
    for key, value in options.items():
        assert device.provider_options[key] == value


def test_gpu_index_is_the_cuda_device_id():
    assert registry.lookup("gpu.1").provider_options["device_id"] == "1"
    assert registry.lookup("GPU.0") == registry.lookup("GPU")


@pytest.mark.parametrize("name", ["FOO", "CPU.1", "GPU.x", "OPENVINO.TPU", "", "HETERO"])
def test_unknown_name_lists_known_devices(name):
    with pytest.raises(hc.DeviceError) as err:
        registry.lookup(name)
    for known in KNOWN:
        assert known in str(err.value)


def test_available_devices_on_this_machine():
    devices = hc.Core().available_devices
    assert devices[0] == "CPU"
    assert all(d == d.upper() for d in devices)
    if HAS_OPENVINO:
        assert "OPENVINO" in devices
    else:
        assert "OPENVINO" not in devices
    if NO_CUDA:
        assert not any(d.startswith(("GPU", "TENSORRT")) for d in devices)


@needs_openvino
def test_available_devices_openvino_flavour_exactly():
    if not NO_CUDA or "TensorrtExecutionProvider" in PROVIDERS:
        pytest.skip("another flavour of onnxruntime")
    devices = hc.Core().available_devices
    assert devices[:2] == ["CPU", "OPENVINO"]
    assert all(d.startswith("OPENVINO.") for d in devices[2:])  # OpenVINO's own GPU/NPU, if any
    try:
        openvino_sees = ort.capi._pybind_state.get_available_openvino_device_ids()
    except AttributeError:
        return
    if list(openvino_sees) == ["CPU"]:  # a machine like the CI one: no Intel GPU/NPU
        assert devices == ["CPU", "OPENVINO"]


@needs_openvino
def test_openvinos_cpu_is_available_without_loading_its_other_plugins(monkeypatch):
    """Enumerating OpenVINO's devices loads its GPU and NPU plugins (memory every compile would keep)."""
    from hetero_cli.placement import devices as registry

    def enumerate_devices():
        raise AssertionError("OpenVINO's devices were enumerated for its CPU")

    monkeypatch.setattr(registry, "_openvino_device_ids", enumerate_devices)
    assert registry.is_available(registry.lookup("OPENVINO"))


# --- device strings ------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def chain():
    return chain_model()


@pytest.mark.parametrize(
    "text", ["HETERO:CPU", "hetero:cpu", "HETERO: CPU ", " HETERO:CPU", "HETERO:CPU, OPENVINO"]
)
def test_hetero_strings_parse(chain, text):
    if "OPENVINO" in text and not HAS_OPENVINO:
        pytest.skip("needs OpenVINO")
    compiled = hc.Core().compile_model(chain, text)
    assert set(device_names(compiled)) <= {"CPU", "OPENVINO"}
    assert compiled.create_infer_request() is not None


@needs_openvino
def test_spaces_around_names_tolerated(chain):
    core = hc.Core()
    spaced = core.query_model(chain, "HETERO: OPENVINO , CPU")
    tight = core.query_model(chain, "HETERO:OPENVINO,CPU")
    assert spaced == tight
    assert set(spaced.values()) == {"OPENVINO"}


@needs_openvino
def test_priority_order_is_respected(chain):
    core = hc.Core()
    assert set(core.query_model(chain, "HETERO:CPU,OPENVINO").values()) == {"CPU"}
    assert set(core.query_model(chain, "HETERO:OPENVINO,CPU").values()) == {"OPENVINO"}


def test_hetero_alone_takes_priorities_from_config(chain):
    core = hc.Core()
    compiled = core.compile_model(chain, "HETERO", {"MULTI_DEVICE_PRIORITIES": "CPU"})
    assert device_names(compiled) == ["CPU"]


def test_hetero_alone_takes_priorities_from_device_priorities_key(chain):
    import hetero_cli.device as device

    compiled = hc.Core().compile_model(chain, "HETERO", config={device.priorities: "CPU"})
    assert device_names(compiled) == ["CPU"]


def test_hetero_alone_takes_priorities_from_set_property(chain):
    core = hc.Core()
    core.set_property("HETERO", {"MULTI_DEVICE_PRIORITIES": "CPU"})
    assert device_names(core.compile_model(chain, "HETERO")) == ["CPU"]
    assert core.query_model(chain, "HETERO") == {f"n{i}": "CPU" for i in range(4)}


@needs_openvino
def test_compile_config_priorities_win_over_set_property(chain):
    core = hc.Core()
    core.set_property("HETERO", {"MULTI_DEVICE_PRIORITIES": "CPU"})
    compiled = core.compile_model(chain, "HETERO", {"MULTI_DEVICE_PRIORITIES": "OPENVINO,CPU"})
    assert device_names(compiled) == ["OPENVINO"]


def test_hetero_alone_without_priorities_is_refused(chain):
    with pytest.raises(hc.DeviceError) as err:
        hc.Core().compile_model(chain, "HETERO")
    assert "MULTI_DEVICE_PRIORITIES" in str(err.value)


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("HETERO:", "empty"),
        ("HETERO:,CPU", "empty"),
        ("HETERO:CPU,", "empty"),
        ("HETERO: , ", "empty"),
        ("HETERO:FOO,CPU", "FOO"),
        ("HETERO:CPU,cpu", "twice"),
        ("HETERO:GPU,GPU.0", "twice"),
        ("HETERO:OPENVINO,OPENVINO.CPU", "twice"),
        ("HETERO:HETERO:CPU", "HETERO"),
        ("HETERO:CPU,HETERO", "HETERO"),
        ("GPU,CPU", "HETERO:"),
        ("CPU,OPENVINO", "HETERO:"),
        ("FOO", "FOO"),
        ("  ", "empty"),
    ],
)
def test_malformed_strings_refused_listing_known_devices(chain, text, why):
    with pytest.raises(hc.DeviceError) as err:
        hc.Core().compile_model(chain, text)
    message = str(err.value)
    assert why in message
    for known in KNOWN:
        assert known in message
    with pytest.raises(hc.DeviceError):
        hc.Core().query_model(chain, text)


def test_empty_device_string_refused_by_compile_as_by_query(chain):
    # compile_model(model) with no device may default; an explicitly empty string is malformed.
    with pytest.raises(hc.DeviceError):
        hc.Core().query_model(chain, "")
    with pytest.raises(hc.DeviceError):
        hc.Core().compile_model(chain, "")


@pytest.mark.parametrize("text", [5, ["CPU"], ("HETERO", "CPU"), b"CPU", 1.5])
def test_device_strings_of_the_wrong_type_refused_saying_what_one_is(chain, text):
    # they were reported as "bad device string '5': it is empty"
    for call in (hc.Core().compile_model, hc.Core().query_model, hc.Core().plan):
        with pytest.raises(hc.DeviceError) as err:
            call(chain, text)
        message = str(err.value)
        assert "must be a string" in message and '"CPU"' in message and '"HETERO:OPENVINO,CPU"' in message
        assert type(text).__name__ in message
        assert "empty" not in message


@pytest.mark.parametrize("name", [5, None, ["CPU"], b"CPU"])
def test_device_names_of_the_wrong_type_refused_by_the_registry(name):
    with pytest.raises(hc.DeviceError) as err:
        registry.lookup(name)
    assert "must be a string" in str(err.value) and '"CPU"' in str(err.value)
    with pytest.raises(hc.DeviceError, match="must be a string"):
        registry.check_name(name)
    assert registry.check_name(" cpu ") == "cpu"


@pytest.mark.parametrize("name", [5, None, ["CPU"]])
def test_get_property_of_a_device_name_of_the_wrong_type_refused(name):
    with pytest.raises(hc.DeviceError, match="must be a string"):
        hc.Core().get_property(name, "FULL_DEVICE_NAME")


def test_malformed_priorities_in_config_refused(chain):
    with pytest.raises(hc.DeviceError) as err:
        hc.Core().compile_model(chain, "HETERO", {"MULTI_DEVICE_PRIORITIES": "CPU,CPU"})
    assert "twice" in str(err.value)


# --- unavailable devices -------------------------------------------------------------------------------


@pytest.mark.skipif(not NO_CUDA, reason="this machine has CUDA")
def test_unavailable_device_skipped_with_one_line_warning(chain, caplog):
    caplog.set_level(logging.WARNING, logger="hetero_cli")
    compiled = hc.Core().compile_model(chain, "HETERO:GPU,CPU")
    assert device_names(compiled) == ["CPU"]
    warnings = [r for r in caplog.records if r.name == "hetero_cli" and "GPU" in r.getMessage()]
    assert len(warnings) == 1
    message = warnings[0].getMessage()
    assert "\n" not in message
    assert "skip" in message
    assert "make FLAVOUR=gpu install" in message  # what would make it available
    assert warnings[0].levelno == logging.WARNING


@pytest.mark.skipif(not NO_CUDA, reason="this machine has CUDA")
def test_query_skips_unavailable_device_too(chain, caplog):
    caplog.set_level(logging.WARNING, logger="hetero_cli")
    assert set(hc.Core().query_model(chain, "HETERO:GPU,CPU").values()) == {"CPU"}
    assert any("GPU" in r.getMessage() for r in caplog.records)


@pytest.mark.skipif(not NO_CUDA, reason="this machine has CUDA")
@pytest.mark.parametrize("text", ["HETERO:GPU,TENSORRT", "HETERO:GPU.1", "GPU", "TENSORRT"])
def test_no_available_device_is_an_error(chain, text):
    with pytest.raises(hc.DeviceError) as err:
        hc.Core().compile_model(chain, text)
    message = str(err.value)
    assert "available" in message
    assert "make FLAVOUR=gpu install" in message
    assert "CPU" in message  # what is available here


@pytest.mark.skipif(HAS_OPENVINO, reason="the OpenVINO EP is installed")
def test_openvino_missing_names_the_openvino_extra(chain, caplog):
    caplog.set_level(logging.WARNING, logger="hetero_cli")
    compiled = hc.Core().compile_model(chain, "HETERO:OPENVINO,CPU")
    assert device_names(compiled) == ["CPU"]
    assert any("make FLAVOUR=openvino install" in r.getMessage() for r in caplog.records)


def test_plain_device_runs_whole_model(chain):
    compiled = hc.Core().compile_model(chain, "cpu")
    assert device_names(compiled) == ["CPU"]
    assert compiled.subgraphs[0].nodes == ("n0", "n1", "n2", "n3")


@needs_openvino
def test_plain_openvino_runs_whole_model(chain):
    compiled = hc.Core().compile_model(chain, "openvino.cpu")
    assert device_names(compiled) == ["OPENVINO"]
    assert compiled.subgraphs[0].fallback_nodes == []


def test_a_device_probe_that_onnx_runtime_could_not_answer_is_asked_again_next_time(caplog):
    """One transient failure of ORT while a device is probed (a device busy, out of memory) answers
    "unavailable" that time only: it is not kept for the process, as a real answer is."""
    from hetero_cli.ort.session import CHECK, observe_sessions

    failures = [ort.capi.onnxruntime_pybind11_state.Fail("the device is busy")]
    asked = []

    def busy_once(request):
        if request.purpose == CHECK:
            asked.append(request.subject)
            if failures:
                raise failures.pop()

    options = (("hetero_cli_test", "transient"),)  # a probe no other test asked for
    with observe_sessions(busy_once), caplog.at_level(logging.DEBUG, logger="hetero_cli"):
        assert registry._session_runs_on("CPUExecutionProvider", options) is False
        assert registry._session_runs_on("CPUExecutionProvider", options) is True
        assert registry._session_runs_on("CPUExecutionProvider", options) is True
    assert len(asked) == 2, "the answer after the failure is kept; the failure was not"
    assert "the device is busy" in caplog.text


def test_a_bug_in_a_device_probe_is_raised_not_taken_for_an_unavailable_device():
    """Only ONNX Runtime's errors mean a device did not answer: anything else a probe raises (hetero-cli's
    own bug) is raised, never reported as a missing device."""
    from hetero_cli.ort.session import CHECK, observe_sessions

    def broken(request):
        if request.purpose == CHECK:
            raise KeyError("a bug")

    with observe_sessions(broken), pytest.raises(KeyError):
        registry._session_runs_on("CPUExecutionProvider", (("hetero_cli_test", "bug"),))
