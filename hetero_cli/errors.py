"""Exception classes of hetero-cli: each message says what is wrong and what would fix it.

try:
    compiled = core.compile_model(model, "HETERO:OPENVINO,CPU")
except hetero_cli.HeteroError as exc:   # any of them; the ValueError ones are bad arguments
    print(exc)
"""

from __future__ import annotations


class HeteroError(Exception):
    """Base class of every error hetero-cli raises on purpose (the CLI turns each into one line and an exit
    status: 2 for a usage error, 1 for a failure at run time)."""


class DeviceError(HeteroError, ValueError):
    """A device string is malformed or names an unknown device (Core's device arguments, affinities'
    devices are AffinityError's), or no listed device is available (DeviceUnavailableError)."""


class DeviceUnavailableError(DeviceError):
    """Every device a request names is known but none can run on this machine (query_model, plan,
    compile_model); the message gives each one's reason and the devices available here."""


class ConfigError(HeteroError, ValueError):
    """A configuration key or value is unknown or invalid for the device it is given to (set_property,
    get_property, a compile's config; CompiledModel.get_property), or ONNX Runtime dropped a device's EP
    over a provider option it refuses."""


class ModelError(HeteroError):
    """A model cannot be read, parsed or exported (read_model, Model.save), breaks ONNX's rules, or its
    file changed on disk while its weights are still read from it."""


class ArtifactError(ModelError):
    """An exported compiled model (Core.import_model, ``hetero benchmark -m OUT``) cannot be imported: not
    an export, truncated, damaged (its checksum), of another format or hetero-cli version, or holding what
    no export holds (a subgraph that refers to external data). The message says which, and what to do."""


class AffinityError(HeteroError, ValueError):
    """Affinities are incomplete, name unknown nodes (Model.set_affinities), or name devices outside the
    priority list or unavailable here (Core.plan, compile_model)."""


class UnsupportedNodesError(AffinityError):
    """Automatic mode found nodes that no device of the priority list supports (Core.plan,
    compile_model); the message names them. query_model leaves such nodes out of its map instead."""


class CompileError(HeteroError):
    """An ONNX Runtime session could not be created for a subgraph (compile_model), or the model's
    constant outputs could not be computed; the message names the subgraph, its nodes and device.

    ``subgraph`` and ``device``: the subgraph's name and the device it failed on, where one subgraph's
    session failed (None otherwise); ``reason``: the execution provider's reason in one line. HETERO_FALLBACK
    reads them to move that subgraph to the next device.
    """

    def __init__(
        self, message: str, *, subgraph: str | None = None, device: str | None = None, reason: str = ""
    ) -> None:
        super().__init__(message)
        self.subgraph = subgraph
        self.device = device
        self.reason = reason


class InferenceError(HeteroError, ValueError):
    """Inputs do not match the model, or a subgraph failed while running (InferRequest.infer, start_async,
    wait, AsyncInferQueue), or an inference API was misused (a request still busy, a bad timeout or
    callback)."""


class BenchmarkError(HeteroError, ValueError):
    """A benchmark option (shape, input file, report setting) is bad: the message says how to fix it."""


class ImageError(HeteroError, ValueError):
    """An image cannot be read, or a model's input cannot take an image, or preprocessing options are bad."""


class NotClassScoresError(ModelError):
    """The model's output is no class scores (strings, maps, empty): classify cannot use the model given, a
    usage error even when only the inference shows it."""


class ValidationError(HeteroError, ValueError):
    """A validation cannot be set up as asked (validate_model, ``hetero validate``): a tolerance not in
    Polygraphy's syntax, an inputs or outputs file in no format Polygraphy writes, inputs that do not match
    the model. A split that gives other results than the reference is no error: the report says FAILED."""


class TuneError(HeteroError, ValueError):
    """A tune cannot start as asked (tune_model, ``hetero tune``): a device string that is not HETERO with
    two available devices, or a budget it cannot work within (TuneBudgetError)."""


class TuneBudgetError(TuneError):
    """A tune's budget is no positive number of seconds, or under what the search needs here: the message
    gives the budget to ask for instead."""


class ExportError(HeteroError, ValueError):
    """A split cannot be exported as asked (``hetero export``): an unknown format, an output folder that
    exists and is not empty (without --force), or a tensor the chosen format cannot carry (Triton's
    datatypes, a model output no subgraph computes)."""


class ServeError(HeteroError, ValueError):
    """A server cannot start as asked (``hetero serve``): a port in use, an address it cannot listen on, an
    engine that is not installed. The message says what to change."""


class RequestError(HeteroError):
    """A KServe v2 request the server refuses: a body that is no infer request, inputs that do not match
    the model, an unknown model or route. ``status`` is the HTTP status the server answers with (400 by
    default, 404 for an unknown model, 413 for a body over the size limit), the message its ``{"error"}``."""

    def __init__(self, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.status = status


class StopServing(BaseException):
    """SIGTERM during ``hetero serve``'s start-up, raised by its handler (the console script installs one as
    soon as it runs, the serve command its own): it unwinds the start-up, and the command says so in one
    line (this exception's text) and exits 0, as a server stopped while it serves does. A BaseException, so
    that no ``except Exception`` on the way takes it for a failure."""

    def __init__(self) -> None:
        super().__init__("Stopped during start-up (SIGTERM): nothing was served")


class NoOnnxRuntimeError(ImportError):
    """ONNX Runtime is not installed (or cannot be imported): the message names the extras that install it.
    An ImportError, since it is raised while hetero_cli's modules load; the console scripts print it as one
    line (entry.py)."""
