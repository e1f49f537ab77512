"""``hetero serve --engine ray`` on a real two-node Ray cluster on this machine (no mocks): the head declares
one OPENVINO and no CPU, the other node two CPUs. A sandwich split OPENVINO -> CPU -> OPENVINO is deployed
once per module: both OPENVINO stages share the head's one unit and run there, the CPU stage on the other
node; tritonclient's answers equal the whole model's with several clients in flight; the server is ready
while every stage runs, and says which does not; a stage replica killed mid-load is restarted by Ray while
no answer is wrong; a request whose stage cannot run ends at the deadline with 504, its stage calls
cancelled; a zero-sized batch leaves the next answers right. A cluster that declares too little, or whose
resources other work holds, is a start-up error naming the resource. The CLI, on a local Ray instance:
SIGTERM at any moment of the start-up or while serving exits 0 and leaves no process; an unreachable
--address is one line, exit 2."""

from __future__ import annotations

import asyncio
import contextlib
import http.client
import logging
import os
import queue
import re
import signal
import subprocess
import sys
import threading
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from urllib.parse import urlparse

import numpy as np
import onnx
import pytest
import tritonclient.http as httpclient
from onnx import TensorProto, numpy_helper
from onnx import helper as h
from support.helpers import ROOT, make_model, needs_openvino
from support.ray_cluster import Cluster, free_port, two_node_cluster
from support.serving import chain_model, client, infer, json_request, post, reference, wait_until

from hetero_cli import Core
from hetero_cli.app.serve.engines import THROUGHPUT_MODE, open_engine
from hetero_cli.app.serve.options import ServeOptions
from hetero_cli.app.serve.ray_app import StageReplica
from hetero_cli.app.serve.ray_stages import (
    actor_options,
    check_capacity,
    plan_options,
    replica_config,
    replica_device,
    stages_of,
)
from hetero_cli.errors import ServeError
from hetero_cli.ort.session import SUBGRAPH, SessionRequest, observe_sessions
from hetero_cli.placement.config import NUM_THREADS
from hetero_cli.placement.config import split as split_config

NAME = "sandwich"
TOLERANCE = {"rtol": 1e-4, "atol": 1e-5}
#: the served sandwich's deadline per request, in seconds: a request whose stage cannot run waits this long
DEADLINE_S = 8.0
#: how long anything here may take before it counts as a hang, in seconds
GUARD_S = 300
#: Serve's controller reports replicas it cannot place after this long on the test cluster (30 s by default)
SLOW_START_S = "5"
#: the environment variable that marks the processes one CLI run started
MARK = "HETERO_TEST_RUN"


def sandwich_model(path: Path) -> Path:
    """x [n, 1, 8, 8] -> Conv, MaxPool (OPENVINO) -> Tanh (CPU) -> Flatten, Gemm (OPENVINO) -> y [n, 10]:
    three subgraphs by rt_info affinities, the OpenVINO EP's MaxPool one that a zero batch once left
    failing every later run. Saved to ``path``, which is returned."""
    rng = np.random.default_rng(0)
    weights = [
        numpy_helper.from_array(rng.standard_normal((4, 1, 3, 3)).astype(np.float32), "w"),
        numpy_helper.from_array(rng.standard_normal((36, 10)).astype(np.float32), "g"),
    ]
    nodes = [
        h.make_node("Conv", ["x", "w"], ["c"], name="conv"),
        h.make_node("MaxPool", ["c"], ["p"], name="pool", kernel_shape=[2, 2], strides=[2, 2]),
        h.make_node("Tanh", ["p"], ["t"], name="tanh"),
        h.make_node("Flatten", ["t"], ["f"], name="flatten"),
        h.make_node("Gemm", ["f", "g"], ["y"], name="fc"),
    ]
    for node, device in zip(nodes, ["OPENVINO", "OPENVINO", "CPU", "OPENVINO", "OPENVINO"], strict=True):
        entry = node.metadata_props.add()
        entry.key, entry.value = "affinity", device
    model = make_model(
        nodes,
        [h.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 1, 8, 8])],
        [h.make_tensor_value_info("y", TensorProto.FLOAT, ["n", 10])],
        weights,
    )
    onnx.save(model, path)
    return path


def _images(batch: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal((batch, 1, 8, 8)).astype(np.float32)


def test_each_device_asks_ray_for_what_it_needs() -> None:
    cluster = {"CPU": 4.0, "OPENVINO": 1.0}
    assert actor_options("GPU.1", cluster) == {"num_cpus": 0, "num_gpus": 1.0}
    assert actor_options("TENSORRT", cluster, replicas=2) == {"num_cpus": 0, "num_gpus": 0.5}
    assert actor_options("OPENVINO.GPU", cluster, replicas=4) == {
        "num_cpus": 0,
        "resources": {"OPENVINO": 0.25},
    }
    assert actor_options("OPENVINO", {"CPU": 4.0}) == {"num_cpus": 1.0}  # the cluster declares no OPENVINO
    assert actor_options("CPU", cluster) == {"num_cpus": 1.0}
    assert (replica_device("GPU.1"), replica_device("OPENVINO.GPU")) == ("GPU", "OPENVINO.GPU")
    with pytest.raises(ValueError, match="replicas"):
        actor_options("CPU", cluster, replicas=0)


def test_the_stages_on_one_device_share_its_unit() -> None:
    cluster = {"CPU": 2.0, "OPENVINO": 1.0, "GPU": 2.0}
    asks = plan_options(["OPENVINO", "CPU", "OPENVINO.GPU", "CPU"], cluster, replicas=2)
    assert asks == [
        {"num_cpus": 0, "resources": {"OPENVINO": 0.25}},
        {"num_cpus": 1.0},  # a CPU stage's replica has its CPU
        {"num_cpus": 0, "resources": {"OPENVINO": 0.25}},
        {"num_cpus": 1.0},
    ]
    gpus = plan_options(["GPU.0", "TENSORRT", "GPU.1"], cluster)  # GPU.0 and TENSORRT.0: one GPU
    assert [a["num_gpus"] for a in gpus] == [0.5, 0.5, 1.0]


def test_a_cluster_that_declares_too_little_is_refused_naming_the_resource() -> None:
    devices = ["OPENVINO", "CPU", "OPENVINO"]

    def stages(replicas: int) -> list[tuple[str, dict[str, object]]]:
        asks = plan_options(devices, {"OPENVINO": 1.0}, replicas)
        return [(f"subgraph{i} ({d})", a) for i, (d, a) in enumerate(zip(devices, asks, strict=True), 1)]

    nodes = [{"OPENVINO": 1.0}, {"CPU": 2.0}]
    check_capacity(stages(2), 2, nodes)  # OPENVINO 4 x 0.25, CPU 2 x 1: it fits
    with pytest.raises(ServeError, match=r"too little CPU .* CPU 3 in all \(subgraph2 \(CPU\) 3 x 1\), .* 2"):
        check_capacity(stages(3), 3, nodes)
    with pytest.raises(
        ServeError, match=r"subgraph1 \(OPENVINO\) asks Ray for OPENVINO 0.5 per replica.*the most: 0.25"
    ):
        check_capacity(stages(1), 1, [{"OPENVINO": 0.25}, {"OPENVINO": 0.25}, {"CPU": 2.0}])


def test_a_cpu_stage_replica_runs_as_many_threads_as_the_cpus_it_asks_ray_for() -> None:
    assert replica_config("CPU") == {"CPU": {NUM_THREADS: int(actor_options("CPU", {})["num_cpus"])}}
    assert replica_config("OPENVINO") == {}  # its device's defaults
    assert replica_config("GPU") == {}


def test_a_replica_compiles_with_what_the_config_sets_for_its_device() -> None:
    config = split_config(
        {
            "PERF_COUNT": "YES",
            "CPU": {NUM_THREADS: 2},
            "OPENVINO": {"precision": "FP32"},
            "GPU.1": {"gpu_mem_limit": 1 << 30},
            "MULTI_DEVICE_PRIORITIES": "OPENVINO,CPU",
        }
    )
    assert replica_config("CPU", config) == {
        "CPU": {NUM_THREADS: 2, "PERF_COUNT": "YES"}
    }  # the user's threads
    assert replica_config("OPENVINO", config) == {"OPENVINO": {"precision": "FP32", "PERF_COUNT": "YES"}}
    assert replica_config("GPU.1", config) == {"GPU": {"gpu_mem_limit": 1 << 30, "PERF_COUNT": "YES"}}
    assert replica_config("CPU", split_config({"OPENVINO": {"precision": "FP32"}})) == replica_config("CPU")


@needs_openvino  # the chain is split OPENVINO / CPU by hand
def test_each_stage_replica_compiles_its_subgraph_with_its_devices_config(tmp_path: Path) -> None:
    core = Core()
    model = core.read_model(chain_model(tmp_path / "chain.onnx", width=8, layers=3))
    config = {"CPU": {NUM_THREADS: 2}, "OPENVINO": {"precision": "FP32"}}
    compiled = core.compile_model(model, "HETERO:OPENVINO,CPU", {**config, "PERFORMANCE_HINT": "THROUGHPUT"})
    wiring = stages_of(model, compiled.plan, compiled.config)
    for stage in wiring.stages:
        seen: list[SessionRequest] = []
        with observe_sessions(seen.append):
            replica = StageReplica(stage)
        assert replica.compiled.config.devices == {stage.device: config[stage.device]}
        (request,) = [r for r in seen if r.purpose == SUBGRAPH]  # what ONNX Runtime was asked for
        if stage.device == "CPU":
            assert request.options.intra_op_num_threads == 2
        else:
            assert dict(request.providers[0][1])["precision"] == "FP32"


@pytest.mark.parametrize("given", [None, "0"])
def test_the_ray_engine_turns_serves_throughput_mode_on_unless_the_user_set_it(
    monkeypatch: pytest.MonkeyPatch, given: str | None
) -> None:
    if given is None:
        monkeypatch.delenv(THROUGHPUT_MODE, raising=False)
    else:
        monkeypatch.setenv(THROUGHPUT_MODE, given)
    engine = open_engine("ray", ServeOptions(name=NAME, port=free_port()))
    engine.close()
    assert os.environ[THROUGHPUT_MODE] == (given or "1")


@needs_openvino  # the chain is split OPENVINO / CPU by hand
def test_stages_are_wired_as_the_plans_links_run(tmp_path: Path) -> None:
    core = Core()
    model = core.read_model(chain_model(tmp_path / "chain.onnx", width=8, layers=3))
    wiring = stages_of(model, core.plan(model, "HETERO:OPENVINO,CPU"))
    assert [(s.name, s.device, s.feeds, s.upstream) for s in wiring.stages] == [
        ("subgraph1", "OPENVINO", ("x",), ()),
        ("subgraph2", "CPU", (), (0,)),
        ("subgraph3", "OPENVINO", (), (1,)),
    ]
    assert wiring.sinks == (2,) and dict(wiring.outputs) == {"y": 2}


def test_the_url_names_the_head_where_the_proxy_listens_on_every_address() -> None:
    from hetero_cli.app.serve.ray_engine import _url_host

    assert _url_host("0.0.0.0", "10.1.2.3:6379") == "10.1.2.3"
    assert _url_host("0.0.0.0", None) == "127.0.0.1"
    assert _url_host("192.168.0.5", "10.1.2.3:6379") == "192.168.0.5"


def test_an_address_that_is_no_host_and_port_is_refused_before_ray_starts() -> None:
    from hetero_cli.app.serve.ray_engine import RayEngine

    with pytest.raises(ServeError, match="is no host:port"):
        RayEngine(ServeOptions(NAME, address="head-node"))


@pytest.fixture(scope="module")
def cluster() -> Iterator[Cluster]:
    slow_start = {
        "RAY_SERVE_SLOW_STARTUP_WARNING_S": SLOW_START_S,
        "RAY_SERVE_SLOW_STARTUP_WARNING_PERIOD_S": SLOW_START_S,
    }
    with two_node_cluster(env=slow_start) as running:
        try:
            yield running
        finally:
            # this process, connected as a driver, must leave before the cluster goes: Ray ends a driver
            # whose cluster is gone (a test running then in this worker crashed with it)
            import ray

            if ray.is_initialized():
                ray.shutdown()


def _plan(path: Path) -> tuple[object, object]:
    core = Core()
    model = core.read_model(path)
    return model, core.plan(model, "HETERO:OPENVINO,CPU")


@pytest.fixture(scope="module")
def served(cluster: Cluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    from hetero_cli.app.serve.ray_engine import ray_serving

    path = sandwich_model(tmp_path_factory.mktemp("ray") / f"{NAME}.onnx")
    model, plan = _plan(path)
    options = ServeOptions(name=NAME, port=free_port(), address=cluster.address, request_timeout_s=DEADLINE_S)
    with ray_serving(model, plan, options) as url:
        yield url, path


@pytest.fixture(scope="module")
def handles_loop() -> Iterator[asyncio.AbstractEventLoop]:
    """One event loop, running in a thread of its own, that this module's DeploymentHandle calls are made
    in: in Serve's throughput mode (which hetero serve --engine ray turns on, and which holds in this
    process once anything here opened that engine before ray.serve was imported) a handle answers only
    inside a running loop, and stays bound to the first loop it ran in."""
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    yield loop
    loop.call_soon_threadsafe(loop.stop)
    thread.join(30)


def _where(loop: asyncio.AbstractEventLoop, stage: str) -> dict[str, object]:
    """The Ray node id, process id and runs of ``stage``'s replica (StageReplica.where), asked in ``loop``."""
    from ray import serve

    async def ask() -> dict[str, object]:
        return await serve.get_deployment_handle(stage, app_name=NAME).where.remote()

    return asyncio.run_coroutine_threadsafe(ask(), loop).result(GUARD_S)


def _node_resources() -> dict[str, dict[str, float]]:
    import ray

    return {n["NodeID"]: n["Resources"] for n in ray.nodes() if n["Alive"]}


def _get(url: str, path: str) -> tuple[int, str]:
    connection = http.client.HTTPConnection(urlparse(url).netloc, timeout=GUARD_S)
    try:
        connection.request("GET", path)
        response = connection.getresponse()
        return response.status, response.read().decode()
    finally:
        connection.close()


def _within(seconds: float, work: Callable[[], object]) -> BaseException | None:
    """What ``work``, run on a thread of its own, raised (None: it returned); the test fails where it has not
    ended within ``seconds`` (a start-up that waits without end)."""
    outcome: queue.SimpleQueue[BaseException | None] = queue.SimpleQueue()
    threading.Thread(target=lambda: outcome.put(_outcome(work)), daemon=True).start()
    try:
        return outcome.get(timeout=seconds)
    except queue.Empty:
        pytest.fail(f"still waiting after {seconds} s")


def _outcome(work: Callable[[], object]) -> BaseException | None:
    try:
        work()
    except BaseException as exc:  # handed to the test, which asserts on it
        return exc
    return None


@needs_openvino
def test_a_stage_whose_resource_other_work_holds_is_a_start_up_error_naming_it(
    cluster: Cluster, tmp_path: Path
) -> None:
    """Before the sandwich is served (this runs first): other work holds the one OPENVINO the cluster
    declares, so no OPENVINO stage can be placed, and the deploy says so instead of waiting."""
    import ray
    from ray import serve

    from hetero_cli.app.serve.ray_engine import ray_serving

    if not ray.is_initialized():
        ray.init(address=cluster.address, logging_level=logging.WARNING, log_to_driver=False)

    class Holder:  # other work on the cluster, holding what it was made with (a local class: pickled whole)
        def ready(self) -> bool:
            return True

    holder = ray.remote(num_cpus=0, resources={"OPENVINO": 1})(Holder).remote()
    try:
        ray.get(holder.ready.remote(), timeout=GUARD_S)
        model, plan = _plan(sandwich_model(tmp_path / "held.onnx"))
        options = ServeOptions(name="held", port=free_port(), address=cluster.address)

        def deploy() -> None:
            with ray_serving(model, plan, options):
                pass

        failure = _within(GUARD_S, deploy)
    finally:
        ray.kill(holder)
    assert isinstance(failure, ServeError), failure
    assert re.search(
        r"Ray cannot place subgraph[13] \(OPENVINO\), asking for OPENVINO 0.5 a replica", str(failure)
    )
    assert "held" not in serve.status().applications


@needs_openvino
def test_a_cluster_that_declares_too_little_is_a_start_up_error_naming_the_resource(
    cluster: Cluster, tmp_path: Path
) -> None:
    """Before the sandwich is served: three replicas of its CPU stage ask for three CPUs, the cluster
    declares two."""
    from ray import serve

    from hetero_cli.app.serve.ray_engine import ray_serving

    model, plan = _plan(sandwich_model(tmp_path / "many.onnx"))
    options = ServeOptions(name="too-many", port=free_port(), address=cluster.address, replicas=3)

    def deploy() -> None:
        with ray_serving(model, plan, options):
            pass

    failure = _within(GUARD_S, deploy)
    assert isinstance(failure, ServeError), failure
    assert "too little CPU for this split: its stages ask for CPU 3 in all" in str(failure), failure
    assert "too-many" not in serve.status().applications


@needs_openvino
def test_both_openvino_stages_share_the_heads_one_unit_and_the_cpu_stage_runs_elsewhere(
    served: tuple[str, Path], handles_loop: asyncio.AbstractEventLoop
) -> None:
    nodes = _node_resources()
    first, cpu, last = (_where(handles_loop, f"subgraph{i}") for i in (1, 2, 3))
    assert nodes[first["node_id"]].get("OPENVINO") == 1.0 and nodes[last["node_id"]].get("OPENVINO") == 1.0
    assert "OPENVINO" not in nodes[cpu["node_id"]]
    assert cpu["node_id"] != first["node_id"]


@needs_openvino
def test_ready_while_every_stage_runs(served: tuple[str, Path]) -> None:
    url, _ = served
    assert wait_until(lambda: _get(url, "/v2/health/ready")[0] == 200, GUARD_S)  # as soon as Serve says so
    assert _get(url, f"/v2/models/{NAME}/ready")[0] == 200


@needs_openvino
def test_answers_equal_the_whole_models_with_clients_in_flight(served: tuple[str, Path]) -> None:
    url, path = served
    meta = client(url).get_model_metadata(NAME)
    assert [(t["name"], t["datatype"], t["shape"]) for t in meta["inputs"]] == [("x", "FP32", [-1, 1, 8, 8])]
    failures: list[BaseException] = []

    def run(seed: int) -> None:
        own = client(url)
        try:
            for i in range(4):
                x = _images(1 + i, seed * 10 + i)
                np.testing.assert_allclose(infer(own, NAME, x), reference(path, x), **TOLERANCE)
        except BaseException as exc:
            failures.append(exc)

    threads = [threading.Thread(target=run, args=(seed,)) for seed in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(GUARD_S)
    assert not failures, failures[0]


@needs_openvino
def test_a_zero_sized_batch_leaves_the_next_answers_right(served: tuple[str, Path]) -> None:
    url, path = served
    x = _images(1)
    np.testing.assert_allclose(infer(url, NAME, x), reference(path, x), **TOLERANCE)  # the last good shape
    status, answer = post(url, f"/v2/models/{NAME}/infer", json_request(np.zeros((0, 1, 8, 8), np.float32)))
    assert status == 400, answer
    for batch in (1, 1, 2):  # the OpenVINO EP once kept the zero batch's shape: every batch 1 failed
        x = _images(batch, batch)
        np.testing.assert_allclose(infer(url, NAME, x), reference(path, x), **TOLERANCE)


@needs_openvino
def test_a_stage_replica_killed_mid_load_is_restarted_and_no_answer_is_wrong(
    served: tuple[str, Path], handles_loop: asyncio.AbstractEventLoop
) -> None:
    url, path = served
    x = _images(2, 7)
    want = reference(path, x)
    victim = _where(handles_loop, "subgraph2")["pid"]
    outcomes: list[str] = []
    stop = threading.Event()

    def load() -> None:
        own = client(url)
        while not stop.is_set():
            try:
                got = infer(own, NAME, x)
            except httpclient.InferenceServerException as exc:  # a failed one: a clear KServe error
                stopped = exc.status() in ("500", "503") and "subgraph2" in exc.message()
                assert stopped or (exc.status() == "504" and "deadline" in exc.message()), exc
                outcomes.append("failed")
                continue
            np.testing.assert_allclose(got, want, **TOLERANCE)
            outcomes.append("answered")

    threads = [threading.Thread(target=load) for _ in range(3)]
    for thread in threads:
        thread.start()
    try:
        assert wait_until(lambda: len(outcomes) >= 3, GUARD_S)
        os.kill(victim, signal.SIGKILL)
        killed_at = len(outcomes)
        restarted = lambda: _where(handles_loop, "subgraph2")["pid"] != victim  # noqa: E731
        assert wait_until(restarted, GUARD_S), "Ray did not restart the killed replica"
        assert wait_until(lambda: outcomes[killed_at:].count("answered") >= 5, GUARD_S)
    finally:
        stop.set()
        for thread in threads:
            thread.join(GUARD_S)
    assert all(not t.is_alive() for t in threads)
    np.testing.assert_allclose(infer(url, NAME, x), want, **TOLERANCE)  # and it keeps serving


@needs_openvino
def test_a_stage_that_cannot_run_makes_the_server_unready_and_its_requests_end_at_the_deadline(
    served: tuple[str, Path], handles_loop: asyncio.AbstractEventLoop
) -> None:
    """subgraph1's replica killed while other work waits for its share of OPENVINO: Ray cannot place the
    replica again, so readiness says so, and a request ends with 504 at the deadline, every stage call it
    made cancelled: once the replica runs again, each stage runs the next request only."""
    import ray

    class Holder:  # other work on the cluster, holding what it was made with (a local class: pickled whole)
        def ready(self) -> bool:
            return True

    url, path = served
    runs = {stage: _where(handles_loop, stage)["runs"] for stage in ("subgraph2", "subgraph3")}
    holder = ray.remote(num_cpus=0, resources={"OPENVINO": 0.5})(Holder).remote()  # waits: all in use
    try:
        os.kill(_where(handles_loop, "subgraph1")["pid"], signal.SIGKILL)
        ray.get(holder.ready.remote(), timeout=GUARD_S)  # it holds the share the dead replica had
        unready = lambda: _get(url, "/v2/health/ready")  # noqa: E731
        assert wait_until(lambda: unready()[0] == 503, GUARD_S)
        assert "subgraph1 (OPENVINO)" in unready()[1], unready()
        assert _get(url, f"/v2/models/{NAME}/ready")[0] == 503

        def late() -> httpclient.InferenceServerException:
            with pytest.raises(httpclient.InferenceServerException) as failed:
                infer(url, NAME, _images(1))
            return failed.value

        failure = late()
        while failure.status() == "503":  # the ingress had not yet heard the replica died: it says so
            failure = late()
        assert failure.status() == "504" and f"deadline of {DEADLINE_S:g} s" in failure.message(), failure
    finally:
        ray.kill(holder)
    assert wait_until(lambda: _get(url, "/v2/health/ready")[0] == 200, GUARD_S)
    x = _images(3, 3)
    np.testing.assert_allclose(infer(url, NAME, x), reference(path, x), **TOLERANCE)
    runs["subgraph1"] = 0  # a new replica
    assert {stage: _where(handles_loop, stage)["runs"] - n for stage, n in runs.items()} == dict.fromkeys(
        runs, 1
    )  # the late request's calls were cancelled: none ran it once the first stage could


def _command(*args: object) -> list[str]:
    return [sys.executable, "-c", "from hetero_cli.cli import hetero; hetero()", *map(str, args)]


def _hetero(*args: object) -> list[str]:
    return _command("serve", *args)


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(ROOT), "RAY_USAGE_STATS_ENABLED": "0"}


def _marked(mark: str) -> list[tuple[int, int, str]]:
    """(pid, parent pid, command line) of every live process whose environment holds MARK=``mark``: the
    processes one CLI run started, Ray's included (they inherit its environment, and keep it under their
    ray:: names)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if f"{MARK}={mark}".encode() not in (entry / "environ").read_bytes().split(b"\0"):
                continue
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            command = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:  # gone meanwhile
            continue
        if fields[0] != "Z":
            found.append((int(entry.name), int(fields[1]), command.strip()))
    return found


class _Run:
    """``hetero serve`` on a local Ray instance, in a session of its own, its processes marked (MARK); its
    stdout lines collected as they come."""

    def __init__(self, tmp_path: Path, model: Path, *args: object) -> None:
        self.mark = uuid.uuid4().hex
        self.port = free_port()
        self.home = tmp_path / "home"  # ray.init writes an auth token into ~/.ray unless told otherwise
        self.home.mkdir()
        env = {**_env(), "HOME": str(self.home), MARK: self.mark}
        command = _hetero(
            "-m", model, "-d", "HETERO:OPENVINO,CPU", "--engine", "ray", "--port", self.port, *args
        )
        self.process = subprocess.Popen(
            command,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
            start_new_session=True,
        )
        self.lines: list[str] = []
        self.errors: list[str] = []
        threading.Thread(target=self._read, args=(self.process.stdout, self.lines), daemon=True).start()
        threading.Thread(target=self._read, args=(self.process.stderr, self.errors), daemon=True).start()

    @staticmethod
    def _read(stream: object, into: list[str]) -> None:
        for line in stream:  # type: ignore[attr-defined]
            into.append(line)

    def said(self, text: str) -> bool:
        return any(text in line for line in self.lines)

    def started(self, text: str) -> bool:
        """Whether a process of this run has ``text`` in its command line (its ray:: name, for Ray's)."""
        return any(text in command for pid, _, command in _marked(self.mark) if pid != self.process.pid)

    def stop(self) -> int:
        """SIGTERM, then its exit status once it has ended."""
        self.process.send_signal(signal.SIGTERM)
        return self.process.wait(GUARD_S)

    def left(self) -> list[tuple[int, int, str]]:
        return _marked(self.mark)

    def kill(self) -> None:
        """What a failed test leaves: the session, and every marked process."""
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()
        for pid, _, _ in self.left():
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


@needs_openvino
def test_unreachable_address_is_one_line_and_exit_2(tmp_path: Path) -> None:
    path = chain_model(tmp_path / "chain.onnx", width=8, layers=2)
    address = f"127.0.0.1:{free_port()}"
    run = subprocess.run(
        _hetero("-m", path, "-d", "HETERO:OPENVINO,CPU", "--engine", "ray", "--address", address),
        capture_output=True,
        text=True,
        env=_env(),
        timeout=GUARD_S,
        start_new_session=True,
    )
    assert run.returncode == 2, run.stderr
    assert run.stderr.count("\n") == 1 and f"cannot reach the Ray cluster at {address}" in run.stderr
    assert "Traceback" not in run.stdout + run.stderr


def test_address_without_the_ray_engine_is_a_usage_error(tmp_path: Path) -> None:
    path = chain_model(tmp_path / "chain.onnx", width=8, layers=2)
    run = subprocess.run(
        _hetero("-m", path, "-d", "CPU", "--address", "127.0.0.1:1"),
        capture_output=True,
        text=True,
        env=_env(),
    )
    assert run.returncode == 2 and "--engine ray" in run.stderr and "Traceback" not in run.stderr


@needs_openvino
@pytest.mark.parametrize("given", ["onnx", "export"])
def test_a_local_ray_server_of_a_sandwich_serves_and_sigterm_leaves_nothing(
    tmp_path: Path, given: str
) -> None:
    """The chain OPENVINO -> CPU -> OPENVINO on a local instance, which declares one OPENVINO: both of its
    stages run, the server is ready and answers right; SIGTERM ends it with exit 0 and no process left."""
    path = chain_model(tmp_path / "chain.onnx", width=8, layers=3)
    served = path
    if given == "export":  # a hetero compile file serves as its .onnx does, under the same stem
        served = tmp_path / "out" / "chain.hetero"
        served.parent.mkdir()
        compiled = subprocess.run(
            _command("compile", "-m", path, "-d", "HETERO:OPENVINO,CPU", "-o", served),
            capture_output=True,
            text=True,
            env=_env(),
        )
        assert compiled.returncode == 0, compiled.stderr
    run = _Run(tmp_path, served)
    try:
        assert wait_until(
            lambda: run.said("Serving 'chain' (KServe v2) on Ray") or run.process.poll() is not None, GUARD_S
        )
        assert run.said("Serving 'chain'"), (run.lines, run.errors)
        url = f"http://127.0.0.1:{run.port}"
        assert wait_until(lambda: _get(url, "/v2/health/ready")[0] == 200, GUARD_S)
        x = np.ones((2, 8), np.float32)
        np.testing.assert_allclose(infer(url, "chain", x), reference(path, x), **TOLERANCE)
        answers: queue.SimpleQueue[object] = queue.SimpleQueue()
        clients = [threading.Thread(target=_answer, args=(url, x, answers)) for _ in range(30)]
        for thread in clients:  # more than Serve lets a replica take by default (5): queued in its proxy
            thread.start()
        assert run.stop() == 0, run.errors
        for thread in clients:
            thread.join(GUARD_S)
        got = [answers.get_nowait() for _ in clients]
        assert all(isinstance(status, int) for status in got), (
            got
        )  # an answer each, never a closed connection
        assert run.said("Stopped")
        assert wait_until(lambda: not run.left(), 60), run.left()
        assert not list(run.home.iterdir())
    finally:
        run.kill()


def _answer(url: str, x: np.ndarray, answers: queue.SimpleQueue[object]) -> None:
    """POST one infer request of ``x`` to the chain; its HTTP status, or the exception that ended it."""
    connection = http.client.HTTPConnection(urlparse(url).netloc, timeout=GUARD_S)
    try:
        connection.request("POST", "/v2/models/chain/infer", body=json_request(x))
        response = connection.getresponse()
        response.read()
        answers.put(response.status)
    except (OSError, http.client.HTTPException) as exc:  # a connection closed without an answer
        answers.put(exc)
    finally:
        connection.close()


#: moments of the start-up a SIGTERM is sent at: what the run has printed, or a process it has started
MOMENTS = {
    "compiling": lambda run: run.said("PERFORMANCE_HINT=THROUGHPUT"),
    "ray-starting": lambda run: run.started("gcs_server"),
    "agents-starting": lambda run: run.started("agent"),
    "serve-starting": lambda run: run.started("ServeController"),
    "deploying": lambda run: run.started("ServeReplica:chain:subgraph3"),
}


@needs_openvino
@pytest.mark.parametrize("moment", list(MOMENTS))
def test_sigterm_at_any_moment_of_the_start_up_exits_0_and_leaves_no_process(
    tmp_path: Path, moment: str
) -> None:
    path = chain_model(tmp_path / "chain.onnx", width=8, layers=3)
    run = _Run(tmp_path, path)
    try:
        reached = wait_until(lambda: MOMENTS[moment](run) or run.process.poll() is not None, GUARD_S)
        assert reached and run.process.poll() is None, (moment, run.lines, run.errors)
        assert run.stop() == 0, run.errors
        assert "Traceback" not in "".join(run.lines + run.errors)
        assert wait_until(lambda: not run.left(), 60), [
            f"{pid} (parent {parent}): {command[:80]}" for pid, parent, command in run.left()
        ]
    finally:
        run.kill()


def test_a_stop_that_cpython_wrapped_in_a_system_error_is_still_a_stop() -> None:
    """A SIGTERM's _Stopped raised while the main thread was inside a C function (a __new__ of Ray's
    start-up) reaches the engine as a SystemError caused by it: a stop, exit 0, not an internal error."""
    from hetero_cli.app.serve.ray_engine import _Stopped, _stopped_within

    try:
        try:
            raise _Stopped
        except _Stopped as stop:
            raise SystemError("<built-in method __new__> returned a result with an exception set") from stop
    except SystemError as wrapped:
        assert _stopped_within(wrapped)
    assert not _stopped_within(SystemError("a C function's own failure"))
