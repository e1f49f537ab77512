"""What ``hetero serve --engine ray`` runs in the cluster: the Ray Serve application of a plan.

Each stage deployment's replicas (StageReplica) compile their subgraph's model on its device (hetero_cli's
Core) and ask Ray for what that device needs (ray_stages.plan_options), so Ray places them on nodes that
have it. An ingress deployment mounts the KServe v2 app (http.make_app) through ``@serve.ingress`` and runs
a request by chaining the stages' DeploymentHandles as the plan's links run: a stage's DeploymentResponse
goes straight into the next stage's ``.remote()``, so intermediate tensors pass between the stages'
replicas through Ray's object store, never through the ingress. Only the stages that produce model outputs
answer the ingress. A request that fails or passes its deadline cancels every stage call it made; the
ingress is ready while every deployment of the application runs (AppHealth).

    app = build_app(model, plan, options, config)      # needs a connected Ray
    serve.run(app, name=options.name)
"""

from __future__ import annotations

import asyncio
import collections
import logging
import os
import queue
import threading
import time
from collections.abc import Mapping
from typing import Any

import numpy as np
import ray
from ray import serve
from ray.exceptions import RayError, RayTaskError

from ...core import Core
from ...errors import HeteroError, InferenceError, RequestError
from ...graph import Model
from ...placement.config import SplitConfig
from ...placement.partition import Plan
from .backend import Metrics
from .http import make_app
from .options import ServeOptions, tensor_specs
from .protocol import TensorSpec
from .ray_stages import (
    Stage,
    Wiring,
    check_capacity,
    plan_options,
    replica_device,
    resource_asks,
    stages_of,
)

log = logging.getLogger("hetero_cli")

#: the ingress's name among the application's deployments
INGRESS = "ingress"
#: how often the ingress asks Serve's controller whether every deployment runs, in seconds: while they do,
#: and while one does not
HEALTH_POLL_S = 1.0
UNHEALTHY_POLL_S = 0.2
#: a controller that has not answered for this long makes the ingress not ready, in seconds
HEALTH_STALE_S = 15.0
#: deployment statuses whose replicas all run (Serve's DeploymentStatus)
RUNNING = frozenset({"HEALTHY", "UPSCALING", "DOWNSCALING"})
#: the longest part of Serve's message on a deployment that readiness repeats, in characters
REASON_CHARS = 300
#: Serve's least time an ingress replica keeps taking requests once told to stop (30 s by default, for a
#: load balancer in front of each replica to let go of it: Serve's proxy, which hetero serve's clients
#: reach, learns at once), and the ingress's, in seconds
DRAIN_VARIABLE = "RAY_SERVE_DIRECT_INGRESS_MIN_DRAINING_PERIOD_S"
INGRESS_DRAIN_S = 1.0
#: the requests the ingress replica takes at once (its work is waiting on the stages): with Serve's default,
#: 5, the others queued in Serve's proxy, which a stop closed without an answer (44 of 60 in flight)
INGRESS_ONGOING = 1000
#: how long a stage replica told to stop may take, in seconds: Serve stops the ingress first, once the
#: requests in flight are answered (each within its deadline), so a stage has none left by then; a replica
#: never placed (its resource held) holds a stop up for this long
STAGE_STOP_S = 5.0
#: the runs whose wall-clock spans a stage replica keeps (StageReplica.where)
SPANS_KEPT = 16


class StageReplica:
    """A replica of one stage: its subgraph compiled on its device, run for one request at a time per
    infer request (a request in flight each; ORT sessions run concurrently)."""

    def __init__(self, stage: Stage) -> None:
        core = Core()
        self.stage = stage
        device = replica_device(stage.device)
        self.compiled = core.compile_model(core.read_model(stage.model), device, dict(stage.config))
        self._idle: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self.runs = 0
        self.spans: collections.deque[tuple[float, float]] = collections.deque(maxlen=SPANS_KEPT)

    async def __call__(self, feeds: Mapping[str, np.ndarray], *upstream: Mapping[str, Any]) -> dict[str, Any]:
        """Run the subgraph on ``feeds`` (the model inputs it reads) and the tensors of the ``upstream``
        stages' answers. Returns {"tensors": its outputs, "seconds": {stage: seconds}} for this stage and
        every stage before it. InferenceError where the subgraph refuses its inputs."""
        self.runs += 1
        given = dict(feeds)
        seconds: dict[str, float] = {}
        for answer in upstream:
            given.update(answer["tensors"])
            seconds.update(answer["seconds"])
        inputs = {t: given[t] for t in self.stage.inputs}
        start, began = time.perf_counter(), time.time()
        outputs = await asyncio.to_thread(self._run, inputs)
        seconds[self.stage.name] = time.perf_counter() - start
        self.spans.append((began, began + seconds[self.stage.name]))
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
        """The replica's Ray node id, process id, the requests it has started and the wall-clock (start,
        end) of its last SPANS_KEPT runs, in seconds since the epoch (for checking placement, cancellation
        and that branches overlap, and for tests)."""
        return {
            "node_id": ray.get_runtime_context().get_node_id(),
            "pid": os.getpid(),
            "runs": self.runs,
            "spans": list(self.spans),
        }


class AppHealth:
    """Whether every deployment of the Serve application ``app`` runs, as Serve's controller says, asked on
    a thread of its own every HEALTH_POLL_S seconds (UNHEALTHY_POLL_S while one does not run, so that
    readiness follows a deploy or a restart closely). ``describe`` names a deployment in what is reported
    ({deployment: "subgraph1 (OPENVINO)"}); ``missing()`` lists what does not run."""

    def __init__(self, app: str, describe: Mapping[str, str]) -> None:
        self.app = app
        self.describe = dict(describe)
        self._missing = ["Ray Serve has not been asked yet whether the stages run"]
        self._answered = time.monotonic()
        threading.Thread(target=self._watch, name="hetero-health", daemon=True).start()

    def missing(self) -> list[str]:
        """One line per deployment of the application that does not run now (empty: all run)."""
        silent = time.monotonic() - self._answered
        if silent > HEALTH_STALE_S:
            return [f"Ray Serve's controller has not answered for {silent:.0f} s"]
        return list(self._missing)

    def _watch(self) -> None:
        while True:
            self._missing = self.check()
            self._answered = time.monotonic()
            time.sleep(UNHEALTHY_POLL_S if self._missing else HEALTH_POLL_S)

    def check(self) -> list[str]:
        """Ask Serve now: one line per deployment that does not run (its status and Serve's reason)."""
        try:
            status = serve.status()
        except Exception as exc:  # any failure to ask (controller gone, RPC error) means not ready: said
            log.warning("asking Ray Serve for %r's status: %s: %s", self.app, type(exc).__name__, exc)
            return [f"Ray Serve's controller did not answer: {type(exc).__name__}: {exc}"]
        app = status.applications.get(self.app)
        if app is None:
            return [f"Ray Serve does not run the application {self.app!r}"]
        lines = []
        for name, deployment in app.deployments.items():
            if str(deployment.status.value) not in RUNNING:
                reason = " ".join(deployment.message.split())[:REASON_CHARS]
                what = self.describe.get(name, name)
                lines.append(f"{what}: {deployment.status.value}" + (f" ({reason})" if reason else ""))
        return lines


class RayBackend:
    """The Backend the ingress serves: ``infer`` chains the stages' handles as the plan's links run;
    ``ready`` while every deployment of the application runs (``health``)."""

    def __init__(
        self,
        name: str,
        specs: tuple[tuple[TensorSpec, ...], tuple[TensorSpec, ...]],
        wiring: Wiring,
        handles: Mapping[int, Any],
        metrics: Metrics,
        health: AppHealth,
    ) -> None:
        self.name = name
        self.inputs, self.outputs = specs
        self.wiring = wiring
        self.handles = dict(handles)
        self.metrics = metrics
        self.health = health

    def ready(self) -> bool:
        """True while every deployment of the application (each stage, the ingress) runs."""
        return not self.health.missing()

    def missing(self) -> list[str]:
        """What keeps the model from being ready: one line per stage (deployment) that does not run."""
        return self.health.missing()

    def stage_names(self) -> list[str]:
        """The stages (subgraphs), in execution order."""
        return [s.name for s in self.wiring.stages]

    async def infer(self, feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        """The model's outputs for ``feeds``. InferenceError where a stage refuses its inputs; RequestError
        (503) where a stage's replica died during the request (Ray restarts it: the client may retry).
        Where it fails or is cancelled (the request's deadline), every stage call it made is cancelled."""
        responses: dict[int, Any] = {}
        try:
            for stage in self.wiring.stages:
                own = {t: feeds[t] for t in stage.feeds}
                responses[stage.index] = self.handles[stage.index].remote(
                    own, *(responses[i] for i in stage.upstream)
                )
            answers = {}
            for index in self.wiring.sinks:
                answers[index] = await _answer(responses[index], self.wiring.stages[index])
        except BaseException:  # a failure or the deadline's CancelledError, raised again: no stage call of
            # this request may wait for a replica, or run, once no one awaits its answer
            for response in responses.values():
                response.cancel()
            raise
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
        describe = {s.name: f"{s.name} ({s.device})" for s in wiring.stages}
        health = AppHealth(options.name, describe)
        self.backend = RayBackend(options.name, specs, wiring, by_index, self.metrics, health)
        self.options = options

    def __serve_build_asgi_app__(self) -> Any:
        return make_app(
            self.backend,
            self.metrics,
            self.options.max_body_bytes,
            request_timeout_s=self.options.request_timeout_s,
        )


def build_app(
    model: Model, plan: Plan, options: ServeOptions, config: SplitConfig | None = None
) -> tuple[Any, dict[str, str]]:
    """The Ray Serve application of ``plan``: a deployment per stage, each asking for its device (the
    stages on one device sharing it) and compiling its subgraph with what ``config`` (the compile's) sets
    for that device, and the ingress bound to their handles; with it, each stage deployment described by
    name, device and what it asks Ray for ({"subgraph1": "subgraph1 (OPENVINO), asking for OPENVINO 0.5 a
    replica"}). Needs a connected Ray (its cluster's resources decide the asks). ServeError for an input
    or output KServe cannot describe, or a cluster whose nodes declare too little for the stages' asks
    (naming the resource)."""
    wiring = stages_of(model, plan, config)
    asks = plan_options([s.device for s in wiring.stages], ray.cluster_resources(), options.replicas)
    nodes = [node["Resources"] for node in ray.nodes() if node.get("Alive")]
    check_capacity(
        [(f"{s.name} ({s.device})", a) for s, a in zip(wiring.stages, asks, strict=True)],
        options.replicas,
        nodes,
    )
    bound = []
    for stage, ask in zip(wiring.stages, asks, strict=True):
        deployment = serve.deployment(
            StageReplica,
            name=stage.name,
            num_replicas=options.replicas,
            ray_actor_options=ask,
            graceful_shutdown_timeout_s=STAGE_STOP_S,
        )
        bound.append(deployment.bind(stage))
    specs = (tuple(tensor_specs(model.inputs, options.shapes)), tuple(tensor_specs(model.outputs, {})))
    drain = {"env_vars": {DRAIN_VARIABLE: f"{INGRESS_DRAIN_S:g}"}}
    ingress = serve.deployment(  # told to stop, it answers the requests in flight (each within its deadline)
        Ingress,
        name=INGRESS,
        ray_actor_options={"num_cpus": 0, "runtime_env": drain},
        graceful_shutdown_timeout_s=options.request_timeout_s,
        max_ongoing_requests=INGRESS_ONGOING,
    )
    described = {
        s.name: f"{s.name} ({s.device}), asking for {_asked(a)} a replica"
        for s, a in zip(wiring.stages, asks, strict=True)
    }
    return ingress.bind(options, specs, wiring, *bound), described


def _asked(options: Mapping[str, object]) -> str:
    """What actor ``options`` ask Ray for, as ``OPENVINO 0.5`` (``nothing`` where they ask for none)."""
    return ", ".join(f"{name} {amount:g}" for name, amount in resource_asks(options).items()) or "nothing"
