"""``hetero serve --engine ray``: a split served by Ray Serve, one deployment per subgraph.

Each stage deployment's replicas compile their subgraph's model on its device (hetero_cli's Core) and ask
Ray for what that device needs (ray_stages.actor_options), so Ray places them on nodes that have it. An
ingress deployment mounts the KServe v2 app (http.make_app) through ``@serve.ingress`` and runs a request
by chaining the stages' DeploymentHandles as the plan's links run: a stage's DeploymentResponse goes
straight into the next stage's ``.remote()``, so intermediate tensors pass between the stages' replicas
through Ray's object store, never through the ingress. Only the stages that produce model outputs answer
the ingress.

    with ray_serving(model, plan, ServeOptions(name="digits", address="10.0.0.1:6379")) as url:
        ...                                  # KServe v2 at url; the deployments are removed on leaving

Ray is imported only here (and it comes with the ``serve`` extra).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import queue
import shutil
import signal
import socket
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import numpy as np
import ray
from ray import serve
from ray.exceptions import RayError, RayTaskError

from ...core import Core
from ...errors import CompileError, HeteroError, InferenceError, RequestError, ServeError
from ...graph import Model
from ...placement.config import SplitConfig
from ...placement.partition import Plan
from ...runtime import CompiledModel
from .backend import Metrics
from .http import make_app
from .options import ServeOptions, tensor_specs
from .protocol import TensorSpec
from .ray_stages import (
    GPU_FAMILIES,
    Stage,
    Wiring,
    actor_options,
    replica_device,
    resource_name,
    stages_of,
)

log = logging.getLogger("hetero_cli")

#: how long a TCP connection to --address may take before the cluster counts as unreachable, in seconds
CONNECT_TIMEOUT_S = 5.0
#: the longest temporary folder a local Ray instance is started under (else /tmp): its socket paths grow
#: about 60 bytes longer, and a Unix socket's path is at most 107
SHORT_TEMP_ROOT = 40
#: the environment variable that sets Ray's token authentication
AUTH_MODE = "RAY_AUTH_MODE"
#: the ingress's name among the application's deployments
INGRESS = "ingress"


class StageReplica:
    """A replica of one stage: its subgraph compiled on its device, run for one request at a time per
    infer request (a request in flight each; ORT sessions run concurrently)."""

    def __init__(self, stage: Stage) -> None:
        core = Core()
        self.stage = stage
        device = replica_device(stage.device)
        self.compiled = core.compile_model(core.read_model(stage.model), device, dict(stage.config))
        self._idle: queue.SimpleQueue[Any] = queue.SimpleQueue()

    async def __call__(self, feeds: Mapping[str, np.ndarray], *upstream: Mapping[str, Any]) -> dict[str, Any]:
        """Run the subgraph on ``feeds`` (the model inputs it reads) and the tensors of the ``upstream``
        stages' answers. Returns {"tensors": its outputs, "seconds": {stage: seconds}} for this stage and
        every stage before it. InferenceError where the subgraph refuses its inputs."""
        given = dict(feeds)
        seconds: dict[str, float] = {}
        for answer in upstream:
            given.update(answer["tensors"])
            seconds.update(answer["seconds"])
        inputs = {t: given[t] for t in self.stage.inputs}
        start = time.perf_counter()
        outputs = await asyncio.to_thread(self._run, inputs)
        seconds[self.stage.name] = time.perf_counter() - start
        return {"tensors": outputs, "seconds": seconds}

    def _run(self, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        try:
            request = self._idle.get_nowait()
        except queue.Empty:
            request = self.compiled.create_infer_request()
        try:
            results = request.infer(inputs)
            return {t: np.asarray(results[t]) for t in self.stage.outputs}
        finally:
            self._idle.put(request)

    def where(self) -> dict[str, Any]:
        """The replica's Ray node id and process id (for checking placement, and for tests)."""
        return {"node_id": ray.get_runtime_context().get_node_id(), "pid": os.getpid()}


class RayBackend:
    """The Backend the ingress serves: ``infer`` chains the stages' handles as the plan's links run."""

    def __init__(
        self,
        name: str,
        specs: tuple[tuple[TensorSpec, ...], tuple[TensorSpec, ...]],
        wiring: Wiring,
        handles: Mapping[int, Any],
        metrics: Metrics,
    ) -> None:
        self.name = name
        self.inputs, self.outputs = specs
        self.wiring = wiring
        self.handles = dict(handles)
        self.metrics = metrics

    def ready(self) -> bool:
        """True: Serve routes requests to an ingress only once every deployment of the app is running."""
        return True

    def stage_names(self) -> list[str]:
        """The stages (subgraphs), in execution order."""
        return [s.name for s in self.wiring.stages]

    async def infer(self, feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        """The model's outputs for ``feeds``. InferenceError where a stage refuses its inputs; RequestError
        (503) where a stage's replica died during the request (Ray restarts it: the client may retry)."""
        responses: dict[int, Any] = {}
        for stage in self.wiring.stages:
            own = {t: feeds[t] for t in stage.feeds}
            responses[stage.index] = self.handles[stage.index].remote(
                own, *(responses[i] for i in stage.upstream)
            )
        answers = {}
        for index in self.wiring.sinks:
            answers[index] = await _answer(responses[index], self.wiring.stages[index])
        return self._outputs(feeds, answers)

    def _outputs(self, feeds: Mapping[str, np.ndarray], answers: Mapping[int, Any]) -> dict[str, np.ndarray]:
        seconds: dict[str, float] = {}
        for answer in answers.values():
            seconds.update(answer["seconds"])
        for stage, spent in seconds.items():
            self.metrics.observe_stage(stage, spent)
        results = {}
        for name, source in self.wiring.outputs.items():
            if isinstance(source, int):
                results[name] = answers[source]["tensors"][name]
            elif name in self.wiring.constants:
                results[name] = self.wiring.constants[name]
            else:
                results[name] = feeds[name]
        return results


async def _answer(response: Any, stage: Stage) -> Any:
    """Await one stage's DeploymentResponse, its failures as the errors the HTTP app reports: the model's
    refusal an InferenceError (400); a replica on the way that died or is restarting a RequestError (503:
    the client may send it again); anything else a RequestError (500) naming the stage."""
    try:
        return await response
    except RayTaskError as exc:
        cause = exc.cause
        if isinstance(cause, HeteroError):
            raise InferenceError(str(cause)) from None
        if isinstance(cause, RayError):  # an earlier stage's replica died: its error passed down the chain
            raise _stopped(stage) from None
        raise RequestError(
            f"{stage.name} ({stage.device}) failed: {type(cause).__name__}: {cause}", 500
        ) from None
    except RayError:  # RayActorError, ActorUnavailableError: the replica died or is being restarted
        raise _stopped(stage) from None


def _stopped(stage: Stage) -> RequestError:
    return RequestError(
        f"a stage replica up to {stage.name} ({stage.device}) stopped during the request (Ray restarts it): "
        "send the request again",
        503,
    )


@serve.ingress()
class Ingress:
    """The app's HTTP entry: KServe v2 (http.make_app) over a RayBackend of the stages' handles."""

    def __init__(self, options: ServeOptions, specs: Any, wiring: Wiring, *handles: Any) -> None:
        self.metrics = Metrics(options.name, [s.name for s in wiring.stages])
        by_index = {s.index: h for s, h in zip(wiring.stages, handles, strict=True)}
        self.backend = RayBackend(options.name, specs, wiring, by_index, self.metrics)
        self.max_body_bytes = options.max_body_bytes

    def __serve_build_asgi_app__(self) -> Any:
        return make_app(self.backend, self.metrics, self.max_body_bytes)


def build_app(model: Model, plan: Plan, options: ServeOptions, config: SplitConfig | None = None) -> Any:
    """The Ray Serve application of ``plan``: a deployment per stage, each asking for its device and
    compiling its subgraph with what ``config`` (the compile's) sets for that device, and the ingress bound
    to their handles. Needs a connected Ray (its cluster's resources decide the asks). ServeError for an
    input or output KServe cannot describe."""
    wiring = stages_of(model, plan, config)
    cluster = ray.cluster_resources()
    bound = []
    for stage in wiring.stages:
        deployment = serve.deployment(
            StageReplica,
            name=stage.name,
            num_replicas=options.replicas,
            ray_actor_options=actor_options(stage.device, cluster, options.replicas),
        )
        bound.append(deployment.bind(stage))
    specs = (tuple(tensor_specs(model.inputs, options.shapes)), tuple(tensor_specs(model.outputs, {})))
    ingress = serve.deployment(Ingress, name=INGRESS, ray_actor_options={"num_cpus": 0})
    return ingress.bind(options, specs, wiring, *bound)


@contextlib.contextmanager
def ray_serving(
    model: Model,
    plan: Plan,
    options: ServeOptions,
    connected: Callable[[], None] | None = None,
    config: SplitConfig | None = None,
) -> Iterator[str]:
    """Serve ``plan`` on Ray for the ``with`` block, its stages compiled with what ``config`` (the
    compile's) sets for their devices; yields the server's base URL. Connects to
    ``options.address`` (else starts a local Ray instance, stopped on leaving) and removes on leaving what
    it deployed (Serve itself too where this run started it); ``connected`` is called once Ray is. Raises
    ServeError for an unreachable address or a port in use, CompileError where a stage does not start,
    nothing left running."""
    with _connected(options.address, plan, options.replicas):
        if connected is not None:
            connected()
        started = _start_serve(options)
        try:
            _deploy(build_app(model, plan, options, config), options.name)
            yield f"http://{_url_host(options.host, options.address)}:{options.port}"
        finally:
            _stop_serve(options.name, started)


def _deploy(app: Any, name: str) -> None:
    """serve.run ``app`` as ``name``; CompileError where a deployment fails to start (a stage whose
    subgraph does not compile on its node, say), with Ray's reason in one line."""
    try:
        serve.run(app, name=name, route_prefix="/")
    except RuntimeError as exc:  # Ray Serve's DeploymentFailed / RayServeException are RuntimeErrors
        raise CompileError(f"Ray Serve could not start {name!r}: {_first_line(exc)}") from None


class _Stopped(BaseException):
    """A SIGTERM or Ctrl-C before the server serves: unwinds what the run started (a BaseException, so
    that no ``except Exception`` in Ray's start-up swallows it), and the engine then returns as after one
    while serving."""


class _StopSignals:
    """SIGTERM and Ctrl-C while ``hetero serve --engine ray`` runs: before it serves they raise _Stopped;
    once it serves (``serving``) they set ``stop``. ``install`` again after ray.init, whose native handler
    takes SIGTERM over (and aborts the process)."""

    def __init__(self) -> None:
        self.stop = threading.Event()
        self.serving = False
        self.previous: dict[int, Any] = {}

    def install(self) -> None:
        for sig in (signal.SIGTERM, signal.SIGINT):
            self.previous.setdefault(sig, signal.signal(sig, self._handle))

    def restore(self) -> None:
        for sig, handler in self.previous.items():
            signal.signal(sig, handler)

    def _handle(self, signum: int, frame: Any) -> None:
        first = not self.stop.is_set()
        self.stop.set()
        if first and not self.serving:  # a second signal must not cut short the clean-up the first began
            raise _Stopped


class RayEngine:
    """``hetero serve --engine ray``: checks ``options``' cluster address and port when made (ServeError,
    before anything is compiled), then ``serve`` deploys the compiled model's plan on Ray until SIGTERM
    or Ctrl-C. ``hint``: the compile's PERFORMANCE_HINT (a plan of one session per subgraph)."""

    hint = "THROUGHPUT"

    def __init__(self, options: ServeOptions) -> None:
        if options.replicas < 1:
            raise ServeError(f"--replicas {options.replicas}: give at least 1")
        if options.address is not None:
            _check_reachable(options.address)
        else:
            _check_port(options.host, options.port)
        self.options = options

    def serve(self, compiled: CompiledModel, announce: Callable[[str], None] = log.info) -> None:
        """Serve ``compiled``'s plan until SIGTERM or Ctrl-C (while it deploys, too), then remove what this
        run started and return. ``announce`` gets the line saying where the server listens. Raises as
        ray_serving."""
        signals = _StopSignals()
        signals.install()
        try:
            serving = ray_serving(
                compiled.model, compiled.plan, self.options, connected=signals.install, config=compiled.config
            )
            with serving as url:
                signals.serving = True
                name = self.options.name
                announce(
                    f"Serving {name!r} (KServe v2) on Ray at {url}: POST /v2/models/{name}/infer; "
                    "Ctrl-C or SIGTERM stops it"
                )
                while not signals.stop.wait(0.5):
                    pass
        except _Stopped:  # asked to stop while starting: what was started is stopped by now
            log.debug("stopped while deploying on Ray")
        finally:
            signals.restore()

    def close(self) -> None:
        """Nothing to give back: the engine holds nothing until it serves."""


@contextlib.contextmanager
def _connected(address: str | None, plan: Plan, replicas: int = 1) -> Iterator[None]:
    """Ray connected for the block: to ``address``, else a local instance declaring the plan's devices
    (in a folder of its own, removed afterwards). ServeError where neither can be had."""
    if ray.is_initialized():
        yield
        return
    kwargs: dict[str, Any] = {"logging_level": logging.WARNING, "log_to_driver": False}
    with contextlib.ExitStack() as stack:
        if address is None:
            kwargs.update(_local_instance(plan, replicas))
            stack.callback(shutil.rmtree, kwargs["_temp_dir"], ignore_errors=True)
        else:
            _check_reachable(address)
            kwargs["address"] = address
        try:
            with _environment(_local_environment() if address is None else {}):
                ray.init(**kwargs)
        except (ConnectionError, RuntimeError, ValueError) as exc:
            if address is None:
                raise ServeError(f"cannot start a local Ray instance: {_first_line(exc)}") from None
            raise ServeError(_unreachable(address, exc)) from None
        stack.callback(ray.shutdown)
        logging.getLogger("ray.serve").setLevel(logging.WARNING)  # its INFO lines say what hetero says
        yield


def _local_environment() -> dict[str, str]:
    """What a local instance's processes start with, beyond this process's environment (which holds
    engines.ENVIRONMENT's Serve throughput mode): no token authentication (RAY_AUTH_MODE), since it
    listens on 127.0.0.1 only, and ray.init would otherwise write a token file into ~/.ray, which outlives
    the run and which a later ``ray start`` reads."""
    return {AUTH_MODE: "disabled"}


@contextlib.contextmanager
def _environment(values: Mapping[str, str]) -> Iterator[None]:
    """``values`` in os.environ while the block runs (while Ray starts: its processes inherit them)."""
    before = {name: os.environ.get(name) for name in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for name, value in before.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def _local_instance(plan: Plan, replicas: int) -> dict[str, Any]:
    """ray.init's arguments for a local instance of this run's own: "local" (never one a ``ray start``
    left for ray.init() to find), the plan's non-GPU devices declared as resources, enough CPUs for
    ``replicas`` replicas of every stage, and a temporary folder short enough for Ray's socket paths (at most 107 bytes)."""
    devices = {resource_name(d) for d in plan.devices} - {"CPU", *GPU_FAMILIES}
    root = tempfile.gettempdir()
    folder = tempfile.mkdtemp(prefix="hetero-ray-", dir=root if len(root) <= SHORT_TEMP_ROOT else "/tmp")
    return {
        "address": "local",
        "include_dashboard": False,
        "_node_ip_address": "127.0.0.1",
        "resources": dict.fromkeys(sorted(devices), 1.0),
        "num_cpus": max(os.cpu_count() or 1, replicas * len(plan.subgraphs)),
        "_temp_dir": folder,
    }


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def _check_reachable(address: str) -> None:
    """ServeError unless a TCP connection to ``address`` (host:port) opens within CONNECT_TIMEOUT_S."""
    host, _, port = address.rpartition(":")
    if not host or not port.isdigit():
        raise ServeError(
            f"--address {address!r} is no host:port: give the address `ray start --head` printed"
        )
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=CONNECT_TIMEOUT_S).close()
    except OSError as exc:
        raise ServeError(_unreachable(address, exc)) from None


def _unreachable(address: str, exc: BaseException) -> str:
    reason = getattr(exc, "strerror", None) or _first_line(exc)
    return (
        f"cannot reach the Ray cluster at {address} ({reason}): start one with `ray start --head --port=PORT` "
        "and give its address, or leave --address out to start a local Ray instance"
    )


def _start_serve(options: ServeOptions) -> bool:
    """Start Serve's HTTP proxy on the head node; True where this run started Serve (and must stop it)."""
    running = _serve_running()
    if not running:
        _check_port(options.host, options.port)
    serve.start(http_options={"host": options.host, "port": options.port}, proxy_location="HeadOnly")
    return not running


def _serve_running() -> bool:
    try:
        serve.context._get_global_client()  # raises where no Serve controller runs in this cluster
    except Exception:  # RayServeException, or a connection error: either way none to share
        log.debug("no Ray Serve instance running in this cluster: this run starts one")
        return False
    return True


def _check_port(host: str, port: int) -> None:
    """ServeError where ``host``:``port`` is in use on this machine (the proxy would retry it forever)."""
    with socket.socket() as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError as exc:
            raise ServeError(
                f"cannot listen on {host}:{port} ({exc.strerror}): give another --port or --host"
            ) from None


def _stop_serve(name: str, started: bool) -> None:
    """Remove this run's application, and Serve itself where this run started it."""
    try:
        if started:
            serve.shutdown()
        else:
            serve.delete(name)
    except Exception as exc:  # stopping goes on: the caller disconnects from Ray next either way
        log.warning("stopping Ray Serve: %s", exc)


def _url_host(host: str, address: str | None) -> str:
    """The host of the server's URL: Serve's proxy listens on ``host`` on the head node, so a wildcard
    host is reached at the head's address (``address``'s host; 127.0.0.1 for a local instance)."""
    if host not in ("0.0.0.0", "::", ""):
        return host
    return address.rpartition(":")[0] if address else "127.0.0.1"
