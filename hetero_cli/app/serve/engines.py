"""The serving engines ``hetero serve --engine`` picks, by name: each is a class made from ServeOptions
(claiming what it needs before anything is compiled: the local engine binds its port) with

    hint: str                                  the PERFORMANCE_HINT its compiled model should have
    serve(compiled, announce) -> None          serve until SIGTERM / Ctrl-C, then return (exit 0)
    close() -> None                            give back what it claimed, where the command fails first

``local`` is one process under uvicorn (app/serve/local.py); ``ray`` deploys one Ray Serve deployment per
subgraph (app/serve/ray_engine.py). Each is imported only when asked for, so a missing optional
dependency (ray) concerns only its engine.
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Callable
from typing import Protocol

from ...errors import ServeError
from ...runtime import CompiledModel
from .options import ServeOptions


class Engine(Protocol):
    """What ``hetero serve`` drives: made from ServeOptions, then ``serve`` or, on a failure before it,
    ``close``."""

    hint: str

    def serve(self, compiled: CompiledModel, announce: Callable[[str], None]) -> str | None:
        """Serve until SIGTERM or Ctrl-C; the line that says how the stop went (None: "Stopped")."""

    def close(self) -> None: ...


#: engine name -> "module:class" under hetero_cli.app.serve
ENGINES: dict[str, str] = {
    "local": "local:LocalEngine",
    "ray": "ray_engine:RayEngine",
}
#: the extra that installs each engine's dependencies
EXTRAS: dict[str, str] = {"local": "serve", "ray": "serve"}
#: Ray Serve's high-throughput mode (Ray 2.56+: its request path without the extra threads and event loops,
#: gRPC between deployments); Serve reads it when imported, in this process and in the cluster's
THROUGHPUT_MODE = "RAY_SERVE_THROUGHPUT_OPTIMIZED"
#: environment variables each engine's module wants before it is imported, where the user set none:
#: without Serve's throughput mode its own request path took more CPU than the stages' work, and 4 clients
#: got 1.27x one client's throughput on a 2-core machine; with it, 1.62x (bench/serve_ray.py; docs/serving.md)
ENVIRONMENT: dict[str, dict[str, str]] = {"ray": {THROUGHPUT_MODE: "1"}}


def open_engine(name: str, options: ServeOptions) -> Engine:
    """The engine ``name`` made from ``options``. ServeError for an unknown engine, one whose module is not
    in this install, or whose dependencies are missing (naming the extra that installs them)."""
    if name not in ENGINES:
        raise ServeError(f"unknown engine {name!r}: give one of {', '.join(ENGINES)}")
    module_name, class_name = ENGINES[name].split(":")
    for variable, value in ENVIRONMENT.get(name, {}).items():
        os.environ.setdefault(variable, value)
    try:
        module = importlib.import_module(f"{__package__}.{module_name}")
    except ModuleNotFoundError as exc:
        if exc.name and exc.name.startswith(f"{__package__}.{module_name}"):
            raise ServeError(
                f"--engine {name} is not part of this hetero-cli version: use --engine local"
            ) from None
        raise ServeError(
            f"--engine {name} needs {exc.name}, which is not installed: run `make install` in hetero-cli's "
            f"source tree (or pip install -e '.[{EXTRAS[name]}]' there)"
        ) from None
    return getattr(module, class_name)(options)
