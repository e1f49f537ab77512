"""``hetero serve --engine ray`` on a real two-node Ray cluster on this machine (no mocks): the head declares
OPENVINO and no CPU, the other node CPUs only; a chain split OPENVINO -> CPU is deployed once per module.
Its OPENVINO stage must run on the head and its CPU stage on the other node; tritonclient's answers equal
the whole model's with several clients in flight; a stage replica killed mid-load is restarted by Ray while
no answer is wrong and the server keeps serving. The CLI: SIGTERM ends a local-Ray server with exit 0 and
nothing left running; an unreachable --address is one line, exit 2."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
import tritonclient.http as httpclient
from support.helpers import ROOT, needs_openvino
from support.ray_cluster import Cluster, free_port, two_node_cluster
from support.serving import chain_model, client, infer, reference, wait_until

from hetero_cli import Core
from hetero_cli.app.serve.engines import THROUGHPUT_MODE, open_engine
from hetero_cli.app.serve.options import ServeOptions
from hetero_cli.app.serve.ray_engine import StageReplica
from hetero_cli.app.serve.ray_stages import actor_options, replica_config, replica_device, stages_of
from hetero_cli.ort.session import SUBGRAPH, SessionRequest, observe_sessions
from hetero_cli.placement.config import NUM_THREADS
from hetero_cli.placement.config import split as split_config

NAME = "chain"
TOLERANCE = {"rtol": 1e-4, "atol": 1e-5}


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
    from hetero_cli.errors import ServeError

    with pytest.raises(ServeError, match="is no host:port"):
        RayEngine(ServeOptions(NAME, address="head-node"))


@pytest.fixture(scope="module")
def cluster() -> Iterator[Cluster]:
    with two_node_cluster() as running:
        yield running


@pytest.fixture(scope="module")
def served(cluster: Cluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    from hetero_cli.app.serve.ray_engine import ray_serving

    path = chain_model(tmp_path_factory.mktemp("ray") / f"{NAME}.onnx", width=64, layers=2)
    core = Core()
    model = core.read_model(path)
    plan = core.plan(model, "HETERO:OPENVINO,CPU")
    options = ServeOptions(name=NAME, port=free_port(), address=cluster.address)
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
    """The Ray node id and process id of ``stage``'s replica (StageReplica.where), asked in ``loop``."""
    from ray import serve

    async def ask() -> dict[str, object]:
        return await serve.get_deployment_handle(stage, app_name=NAME).where.remote()

    return asyncio.run_coroutine_threadsafe(ask(), loop).result(120)


def _node_resources() -> dict[str, dict[str, float]]:
    import ray

    return {n["NodeID"]: n["Resources"] for n in ray.nodes() if n["Alive"]}


@needs_openvino
def test_stages_run_on_the_nodes_that_declare_their_device(
    served: tuple[str, Path], handles_loop: asyncio.AbstractEventLoop
) -> None:
    nodes = _node_resources()
    openvino, cpu = _where(handles_loop, "subgraph1"), _where(handles_loop, "subgraph2")
    assert "OPENVINO" in nodes[openvino["node_id"]]
    assert "OPENVINO" not in nodes[cpu["node_id"]]
    assert openvino["node_id"] != cpu["node_id"]


@needs_openvino
def test_answers_equal_the_whole_models_with_clients_in_flight(served: tuple[str, Path]) -> None:
    url, path = served
    meta = client(url).get_model_metadata(NAME)
    assert [(t["name"], t["datatype"], t["shape"]) for t in meta["inputs"]] == [("x", "FP32", [-1, 64])]
    failures: list[BaseException] = []

    def run(seed: int) -> None:
        own = client(url)
        try:
            for i in range(4):
                x = np.random.default_rng(seed * 10 + i).standard_normal((1 + i, 64)).astype(np.float32)
                np.testing.assert_allclose(infer(own, NAME, x), reference(path, x), **TOLERANCE)
        except BaseException as exc:
            failures.append(exc)

    threads = [threading.Thread(target=run, args=(seed,)) for seed in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(300)
    assert not failures, failures[0]


@needs_openvino
def test_a_stage_replica_killed_mid_load_is_restarted_and_no_answer_is_wrong(
    served: tuple[str, Path], handles_loop: asyncio.AbstractEventLoop
) -> None:
    url, path = served
    x = np.random.default_rng(7).standard_normal((2, 64)).astype(np.float32)
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
                assert exc.status() in ("500", "503") and "subgraph2" in exc.message(), exc
                outcomes.append("failed")
                continue
            np.testing.assert_allclose(got, want, **TOLERANCE)
            outcomes.append("answered")

    threads = [threading.Thread(target=load) for _ in range(3)]
    for thread in threads:
        thread.start()
    try:
        assert wait_until(lambda: len(outcomes) >= 3, 120)
        os.kill(victim, signal.SIGKILL)
        killed_at = len(outcomes)
        restarted = lambda: _where(handles_loop, "subgraph2")["pid"] != victim  # noqa: E731
        assert wait_until(restarted, 120), "Ray did not restart the killed replica"
        assert wait_until(lambda: outcomes[killed_at:].count("answered") >= 5, 120)
    finally:
        stop.set()
        for thread in threads:
            thread.join(300)
    assert all(not t.is_alive() for t in threads)
    np.testing.assert_allclose(infer(url, NAME, x), want, **TOLERANCE)  # and it keeps serving


def _command(*args: object) -> list[str]:
    return [sys.executable, "-c", "from hetero_cli.cli import hetero; hetero()", *map(str, args)]


def _hetero(*args: object) -> list[str]:
    return _command("serve", *args)


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(ROOT), "RAY_USAGE_STATS_ENABLED": "0"}


def _session_processes(session: int) -> list[int]:
    """The processes of the session ``session`` (a process started with start_new_session leads one)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[3]) == session and fields[0] != "Z":
                found.append(int(entry.name))
    return found


@needs_openvino
def test_unreachable_address_is_one_line_and_exit_2(tmp_path: Path) -> None:
    path = chain_model(tmp_path / f"{NAME}.onnx", width=8, layers=2)
    address = f"127.0.0.1:{free_port()}"
    run = subprocess.run(
        _hetero("-m", path, "-d", "HETERO:OPENVINO,CPU", "--engine", "ray", "--address", address),
        capture_output=True,
        text=True,
        env=_env(),
        timeout=300,
        start_new_session=True,
    )
    assert run.returncode == 2, run.stderr
    assert run.stderr.count("\n") == 1 and f"cannot reach the Ray cluster at {address}" in run.stderr
    assert "Traceback" not in run.stdout + run.stderr


def test_address_without_the_ray_engine_is_a_usage_error(tmp_path: Path) -> None:
    path = chain_model(tmp_path / f"{NAME}.onnx", width=8, layers=2)
    run = subprocess.run(
        _hetero("-m", path, "-d", "CPU", "--address", "127.0.0.1:1"),
        capture_output=True,
        text=True,
        env=_env(),
    )
    assert run.returncode == 2 and "--engine ray" in run.stderr and "Traceback" not in run.stderr


@needs_openvino
@pytest.mark.parametrize("given", ["onnx", "export"])
def test_sigterm_stops_a_local_ray_server_with_exit_0_and_nothing_left(tmp_path: Path, given: str) -> None:
    path = chain_model(tmp_path / f"{NAME}.onnx", width=8, layers=2)
    served = path
    if given == "export":  # a hetero compile file serves as its .onnx does, under the same stem
        served = tmp_path / "out" / f"{NAME}.hetero"
        served.parent.mkdir()
        compiled = subprocess.run(
            _command("compile", "-m", path, "-d", "HETERO:OPENVINO,CPU", "-o", served),
            capture_output=True,
            text=True,
            env=_env(),
        )
        assert compiled.returncode == 0, compiled.stderr
    port = free_port()
    home = tmp_path / "home"  # ray.init writes an auth token into ~/.ray unless told otherwise
    home.mkdir()
    server = subprocess.Popen(
        _hetero("-m", served, "-d", "HETERO:OPENVINO,CPU", "--engine", "ray", "--port", port),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**_env(), "HOME": str(home)},
        start_new_session=True,
    )
    try:
        assert server.stdout is not None
        announced = next(
            (line for line in server.stdout if "Serving 'chain' (KServe v2) on Ray" in line), None
        )
        assert announced is not None, server.communicate()
        x = np.ones((1, 8), np.float32)
        np.testing.assert_allclose(
            infer(f"http://127.0.0.1:{port}", NAME, x), reference(path, x), **TOLERANCE
        )
        server.send_signal(signal.SIGTERM)
        out, err = server.communicate(timeout=120)
        assert server.returncode == 0, err
        assert "Stopped" in out
        assert wait_until(lambda: not _session_processes(server.pid), 30), _session_processes(server.pid)
        assert not list(home.iterdir())
    finally:
        if server.poll() is None:
            os.killpg(server.pid, signal.SIGKILL)
            server.wait()
