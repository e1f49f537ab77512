"""``hetero serve``: a split served over HTTP with the KServe v2 protocol (Triton's and OpenVINO Model
Server's), by the engine asked for: ``local`` (one process) or ``ray`` (a Ray Serve cluster). The engines
and the protocol are app.serve's; this reads the options, compiles and hands over."""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Callable, Iterator
from typing import Any

import click

from ...app.benchmark.shapes import parse_shapes
from ...app.serve.engines import ENGINES, open_engine
from ...app.serve.options import (
    DEFAULT_MAX_BODY_BYTES,
    DEFAULT_REQUEST_TIMEOUT_S,
    ServeOptions,
    check_name,
    tensor_specs,
)
from ...errors import ServeError, StopServing
from ...graph import Model
from ...placement import config as cfg
from ..bench_steps import apply_hint
from ..floats import FiniteFloat
from ..options import shared, shared_options
from ..output import info
from ..runner import CONTEXT, Command
from ..setup import compile_setup, prepare

MAX_TIMEOUT_S = 86400.0  # a day: a deadline longer than that is no deadline


@click.command(
    cls=Command,
    context_settings=CONTEXT,
    short_help="Serve a split over HTTP (KServe v2, as Triton speaks it).",
)
@click.option("-m", "model", metavar="MODEL", help="ONNX model (default: models/digits.onnx).")
@click.option("-d", "device", required=True, metavar="DEVICE", help="HETERO:<dev>,<dev>,... or one device.")
@click.option(
    "-shape",
    "--shape",
    "shape",
    metavar="SHAPE",
    help="The inputs' shapes requests must have, as benchmark's -shape: [1,1,32,32] or x[1,3],y[?,4] (? : any).",
)
@click.option(
    "-data_shape", "--data-shape", "data_shape", metavar="SHAPE", help="As -shape (benchmark's name)."
)
@click.option(
    "--host", default="127.0.0.1", show_default=True, help="Address to listen on (0.0.0.0: every one)."
)
@click.option(
    "--port", type=int, default=8000, show_default=True, help="TCP port to listen on (0: any free port)."
)
@click.option("--name", metavar="NAME", help="The model's name in URLs (default: the model file's stem).")
@click.option(
    "--engine",
    type=click.Choice(list(ENGINES)),
    default="local",
    show_default=True,
    help="local: this process; ray: a Ray Serve deployment per subgraph.",
)
@click.option(
    "--address",
    metavar="HOST:PORT",
    help="--engine ray: a running Ray cluster's address (default: start a local Ray instance for the run).",
)
@click.option(
    "--replicas",
    type=click.IntRange(min=1),
    default=1,
    show_default=True,
    help="--engine ray: replicas of each subgraph's deployment.",
)
@click.option(
    "--max-body-size",
    "max_body",
    type=click.IntRange(min=1),
    default=DEFAULT_MAX_BODY_BYTES,
    show_default=True,
    metavar="BYTES",
    help="Largest request body accepted; larger ones get 413.",
)
@click.option(
    "--request-timeout",
    "request_timeout",
    type=FiniteFloat(min=0, min_open=True, max=MAX_TIMEOUT_S),
    default=DEFAULT_REQUEST_TIMEOUT_S,
    show_default=True,
    metavar="SECONDS",
    help="Deadline of each infer request (its body, inference and answer): past it, 408 or 504; a stop "
    "waits no longer for the requests in flight.",
)
@shared_options
def serve(
    model: str | None,
    device: str,
    shape: str | None,
    data_shape: str | None,
    host: str,
    port: int,
    name: str | None,
    engine: str,
    address: str | None,
    replicas: int,
    max_body: int,
    request_timeout: float,
    **options: Any,
) -> None:
    """Serve MODEL split across DEVICE over HTTP, with the KServe v2 protocol: tritonclient, curl or any
    KServe v2 client can call it. Runs until Ctrl-C or SIGTERM, which let the requests in flight finish.

    \b
      hetero serve -m models/digits.onnx -d HETERO:OPENVINO,CPU --affinity softmax=CPU --port 8000
      curl -s localhost:8000/v2/models/digits
    """
    if engine != "ray" and (address is not None or replicas != 1):
        raise ServeError("--address and --replicas are the ray engine's: add --engine ray, or leave them out")
    starting = _StartUp()
    with starting.stopped_by_sigterm():
        setup = prepare(model, device, **shared(options))
        served = ServeOptions(
            name=check_name(name if name is not None else setup.model_path.stem),
            host=host,
            port=port,
            max_body_bytes=max_body,
            request_timeout_s=request_timeout,
            shapes=_shapes(setup.model, shape, data_shape),
            address=address,
            replicas=replicas,
        )
        runner = open_engine(engine, served)  # the port is claimed before the compile: in use, nothing runs
        try:
            if setup.core.configured("HETERO", cfg.PERFORMANCE_HINT) is None:
                # a session per subgraph, so that concurrent requests overlap across the devices' lanes; each
                # device keeps its threads (one client's latency is the split's own; sharing halved it here)
                apply_hint(setup, runner.hint.lower(), nireq=1)
                info(
                    f"{cfg.PERFORMANCE_HINT}={runner.hint}: a session per subgraph, so that concurrent "
                    "requests overlap across the devices"
                )
            compiled = compile_setup(setup)
        except BaseException:
            runner.close()
            raise
        info(runner.serve(compiled, announce=starting.serving(info)) or "Stopped")


class _StartUp:
    """``hetero serve``'s start-up, which SIGTERM stops as it stops a server: exit 0, nothing left."""

    def __init__(self) -> None:
        self.serves = False
        self.signalled = False

    def serving(self, announce: Callable[[str], None]) -> Callable[[str], None]:
        """``announce``, which also marks the start-up over (the engine's own stop takes SIGTERM now)."""

        def announced(line: str) -> None:
            self.serves = True
            announce(line)

        return announced

    def _handle(self, signum: int, frame: Any) -> None:
        if self.serves or self.signalled:  # the engine stops it (or this stop is already under way)
            return
        self.signalled = True
        raise StopServing

    @contextlib.contextmanager
    def stopped_by_sigterm(self) -> Iterator[None]:
        """Within the block, SIGTERM before the engine serves (on the main thread) ends the start-up: what
        started is closed on the way out (the engine's ``close``, the compile's threads left to finish),
        one line says so and the command returns, exit 0. A session ORT creates holding the GIL (1.24)
        takes the signal once it is created."""
        if threading.current_thread() is not threading.main_thread():
            yield
            return
        previous = signal.signal(signal.SIGTERM, self._handle)
        try:
            yield
        except StopServing as exc:
            info(str(exc))
        finally:
            signal.signal(signal.SIGTERM, previous)


def _shapes(model: Model, shape: str | None, data_shape: str | None) -> dict[str, list[int | None]]:
    """-shape's and -data_shape's dimensions per input (-data_shape's where both give one), checked
    against the model's now: ServeError (a usage error) for one that contradicts it."""
    names = [i.name for i in model.inputs]
    shapes: dict[str, list[int | None]] = {}
    for text, option in ((shape, "-shape"), (data_shape, "-data_shape")):
        if text:
            shapes.update(parse_shapes(text, names, option))
    tensor_specs(model.inputs, shapes)
    return shapes
