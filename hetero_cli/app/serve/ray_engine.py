"""``hetero serve --engine ray``: a split served by Ray Serve, one deployment per subgraph (ray_app's
application), on a running cluster or a local Ray instance of its own (ray_connect).

    with ray_serving(model, plan, ServeOptions(name="digits", address="10.0.0.1:6379")) as url:
        ...                                  # KServe v2 at url; the deployments are removed on leaving

The deploy waits until every deployment runs: a stage whose subgraph does not compile on its node is a
CompileError, one that Ray cannot place (its resource declared too little, or held by other work) a
ServeError naming the resource. SIGTERM or Ctrl-C at any moment of RayEngine.serve (Ray starting, Serve
starting, the deploy, serving) stops it cleanly: what was started is removed, nothing is left running,
and the command exits 0 (StopSignals).

Ray is imported only here and in the modules beside it (it comes with the ``serve`` extra).
"""

from __future__ import annotations

import contextlib
import logging
import signal
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import ray
from ray import serve
from ray.exceptions import RayTaskError
from ray.serve._private.constants import SERVE_CONTROLLER_NAME, SERVE_NAMESPACE
from ray.serve.exceptions import RayServeException

from ...errors import CompileError, ServeError
from ...graph import Model
from ...placement.config import SplitConfig
from ...placement.partition import Plan
from ...runtime import CompiledModel
from .options import ServeOptions
from .ray_app import build_app
from .ray_connect import check_port, check_reachable, connected, first_line

log = logging.getLogger("hetero_cli")

#: how often the deploy asks Serve whether the application runs yet, in seconds
DEPLOY_POLL_S = 0.5
#: how long a stop waits for Serve's controller to be gone, in seconds
CONTROLLER_GONE_S = 30.0
#: what Serve's controller says of a deployment whose replicas no node has room for (after
#: RAY_SERVE_SLOW_STARTUP_WARNING_S, 30 s by default: ray/serve/_private/deployment_state.py)
UNSCHEDULED = "to be scheduled"
#: what a stop while the engine starts (SIGTERM or Ctrl-C) ends with
STOPPED_STARTING = "Stopped during start-up: what had started on Ray was removed, nothing was served"


@contextlib.contextmanager
def ray_serving(
    model: Model,
    plan: Plan,
    options: ServeOptions,
    signals: StopSignals | None = None,
    config: SplitConfig | None = None,
) -> Iterator[str]:
    """Serve ``plan`` on Ray for the ``with`` block, its stages compiled with what ``config`` (the
    compile's) sets for their devices; yields the server's base URL once every deployment runs. Connects to
    ``options.address`` (else starts a local Ray instance, stopped on leaving) and removes on leaving what
    it deployed (Serve itself too where this run started it). ``signals``: the run's StopSignals, which
    hold a stop back while Ray starts and none while it is stopped. Raises ServeError for an unreachable
    address, a port in use or a stage Ray cannot place (naming the resource), CompileError where a stage
    does not start; nothing is left running."""
    signals = signals if signals is not None else StopSignals()
    with connected(options.address, plan, options.replicas, signals.deferred) as local:
        started = not _serve_running()
        if started:
            check_port(options.host, options.port)
        try:
            serve.start(http_options={"host": options.host, "port": options.port}, proxy_location="HeadOnly")
            app, stages = build_app(model, plan, options, config)
            _deploy(app, options.name, stages)
            yield f"http://{_url_host(options.host, options.address)}:{options.port}"
        finally:
            signals.quiet()  # a signal now must not cut the removal short
            _stop_serve(options.name, started and not local)


def _deploy(app: Any, name: str, stages: Mapping[str, str]) -> None:
    """Deploy ``app`` as ``name`` and wait until every deployment runs. CompileError where a deployment
    fails to start (a stage whose subgraph does not compile on its node, say), with Ray's reason in one
    line; ServeError where Serve refuses the application (another serves at its route, /) or says a
    stage's replicas could not be scheduled (``stages`` describes each stage's deployment, as build_app
    does)."""
    try:
        serve.run_many(
            [serve.RunTarget(target=app, name=name, route_prefix="/")], wait_for_applications_running=False
        )
    except RayServeException as exc:  # refused: another application at "/", say (raised in the controller)
        reason = exc.cause if isinstance(exc, RayTaskError) else exc
        raise ServeError(f"Ray Serve will not deploy {name!r}: {first_line(reason)}") from None
    except RuntimeError as exc:  # Ray Serve's DeploymentFailed is a RuntimeError
        raise CompileError(f"Ray Serve could not start {name!r}: {first_line(exc)}") from None
    while not _running(name, stages):
        time.sleep(DEPLOY_POLL_S)


def _running(name: str, stages: Mapping[str, str]) -> bool:
    """Whether the application ``name`` runs (every deployment); raises as _deploy once Serve says it
    cannot."""
    status = serve.status().applications.get(name)
    if status is None:
        raise CompileError(f"Ray Serve could not start {name!r}: it no longer lists the application")
    if status.status == "RUNNING":
        return True
    if status.status == "DEPLOY_FAILED":
        reason = (status.message.strip().splitlines() or ["no reason given"])[0]
        raise CompileError(f"Ray Serve could not start {name!r}: {reason}")
    for deployment, info in status.deployments.items():
        if UNSCHEDULED in info.message:
            raise ServeError(_unscheduled(stages.get(deployment, deployment), info.message))
    return False


def _unscheduled(deployment: str, message: str) -> str:
    """The start-up error of ``deployment`` (described), whose replicas Serve could not schedule
    (``message``, Serve's)."""
    free = message.partition("total resources available: ")[2].partition(". Use `ray status`")[0]
    return (
        f"Ray cannot place {deployment}: no node of the cluster has that free"
        f"{f' (free: {free})' if free else ''}; other work holds it: free it, start a node that declares "
        "it, or give fewer --replicas"
    )


class _Stopped(BaseException):
    """A SIGTERM or Ctrl-C while the engine starts: unwinds what the run started (a BaseException, so that
    no ``except Exception`` in Ray's start-up swallows it); RayEngine.serve then returns as after a stop
    while serving."""


class StopSignals:
    """SIGTERM and Ctrl-C while ``hetero serve --engine ray`` starts and serves. Each sets ``stop``; a
    first one also raises _Stopped while the start-up may be cut (``raising``), but not within
    ``deferred()`` (while Ray starts: it is raised once the block ends) nor after ``quiet()`` (serving, or
    removing what was started). Handlers are installed on the main thread only."""

    def __init__(self) -> None:
        self.stop = threading.Event()
        self.raising = True
        self.previous: dict[int, Any] = {}

    def install(self, signals: tuple[int, ...] = (signal.SIGTERM, signal.SIGINT)) -> None:
        """Handle ``signals`` (again: Ray's native handler may have taken one over at the OS level)."""
        if threading.current_thread() is not threading.main_thread():
            return
        for sig in signals:
            self.previous.setdefault(sig, signal.signal(sig, self._handle))

    def restore(self) -> None:
        """The handlers from before ``install``."""
        for sig, handler in self.previous.items():
            signal.signal(sig, handler)
        self.previous.clear()

    def quiet(self) -> None:
        """From now on a signal only sets ``stop``."""
        self.raising = False

    @contextlib.contextmanager
    def deferred(self) -> Iterator[None]:
        """A stop asked for within the block is raised (_Stopped) once the block has ended without an
        error; the handlers are installed again then."""
        raising, self.raising = self.raising, False
        yield
        if self.previous:
            self.install(tuple(self.previous))
        self.raising = raising
        if raising and self.stop.is_set():
            raise _Stopped

    def _handle(self, signum: int, frame: Any) -> None:
        first = not self.stop.is_set()
        self.stop.set()
        if first and self.raising:  # a second signal must not cut short the clean-up the first began
            raise _Stopped


class RayEngine:
    """``hetero serve --engine ray``: checks ``options``' cluster address and port when made (ServeError,
    before anything is compiled); ``serve`` deploys the compiled model's plan on Ray until SIGTERM or
    Ctrl-C, either of which, at any moment, removes what it started. ``hint``: the compile's
    PERFORMANCE_HINT (a plan of one session per subgraph)."""

    hint = "THROUGHPUT"

    def __init__(self, options: ServeOptions) -> None:
        if options.replicas < 1:
            raise ServeError(f"--replicas {options.replicas}: give at least 1")
        if options.address is not None:
            check_reachable(options.address)
        else:
            check_port(options.host, options.port)
        self.options = options

    def serve(self, compiled: CompiledModel, announce: Callable[[str], None] = log.info) -> str | None:
        """Serve ``compiled``'s plan until SIGTERM or Ctrl-C (while Ray starts and it deploys, too), then
        remove what this run started and return the line that says how it stopped (None: after serving).
        ``announce`` gets the line saying where the server listens. Raises as ray_serving."""
        signals = StopSignals()
        signals.install()
        try:
            serving = ray_serving(compiled.model, compiled.plan, self.options, signals, compiled.config)
            with serving as url:
                signals.quiet()
                name = self.options.name
                announce(
                    f"Serving {name!r} (KServe v2) on Ray at {url}: POST /v2/models/{name}/infer; "
                    "Ctrl-C or SIGTERM stops it"
                )
                while not signals.stop.wait(0.5):
                    pass
        except _Stopped:  # asked to stop while starting: what was started is stopped by now
            return STOPPED_STARTING
        except SystemError as exc:
            # the stop raised inside a C function (a __new__ Ray's start-up was in): CPython wraps it in a
            # SystemError whose cause is it; anything else is no stop
            if not _stopped_within(exc):
                raise
            log.debug("stopped while starting, inside a C function: %s", exc)
            return STOPPED_STARTING
        finally:
            signals.restore()
        return None

    def close(self) -> None:
        """Nothing to give back: the engine holds nothing until it serves."""


def _stopped_within(exc: BaseException) -> bool:
    """Whether ``exc`` was caused, directly or further down its chain, by a _Stopped."""
    seen = set()
    cause: BaseException | None = exc
    while cause is not None and id(cause) not in seen:
        if isinstance(cause, _Stopped):
            return True
        seen.add(id(cause))
        cause = cause.__cause__ or cause.__context__
    return False


def _serve_running() -> bool:
    try:
        serve.context._get_global_client()  # raises where no Serve controller runs in this cluster
    except Exception:  # RayServeException, or a connection error: either way none to share
        log.debug("no Ray Serve instance running in this cluster: this run starts one")
        return False
    return True


def _stop_serve(name: str, started: bool) -> None:
    """Remove this run's application (its requests in flight answered first), and Serve itself where
    this run started it on a cluster (``started``: a local instance's Serve ends with it)."""
    try:
        if started:
            serve.shutdown()
            _wait_controller_gone()
        else:
            serve.delete(name)
    except Exception as exc:  # stopping goes on: the caller disconnects from Ray next either way
        log.warning("stopping Ray Serve: %s", exc)


def _wait_controller_gone(timeout_s: float = CONTROLLER_GONE_S) -> None:
    """Wait (``timeout_s`` at most) until Serve's controller, which serve.shutdown leaves killing itself,
    is gone from the cluster: a serve.start meanwhile found it by name and deployed to it while it died
    (the next application's ingress then never found the resources its replicas still held)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            ray.get_actor(SERVE_CONTROLLER_NAME, namespace=SERVE_NAMESPACE)
        except ValueError:  # no actor of that name: gone
            return
        time.sleep(DEPLOY_POLL_S / 5)
    log.warning("Ray Serve's controller was still there %.0f s after the shutdown", timeout_s)


def _url_host(host: str, address: str | None) -> str:
    """The host of the server's URL: Serve's proxy listens on ``host`` on the head node, so a wildcard
    host is reached at the head's address (``address``'s host; 127.0.0.1 for a local instance)."""
    if host not in ("0.0.0.0", "::", ""):
        return host
    return address.rpartition(":")[0] if address else "127.0.0.1"
