"""Exception classes of hetero-cli: each message says what is wrong and what would fix it."""

from __future__ import annotations


class HeteroError(Exception):
    """Base class of every error hetero-cli raises on purpose."""


class DeviceError(HeteroError, ValueError):
    """A device string is malformed, names an unknown device, or no listed device is available."""


class DeviceUnavailableError(DeviceError):
    """Every device a request names is known but none can run on this machine."""


class ConfigError(HeteroError, ValueError):
    """A configuration key or value is unknown or invalid for the device it is given to."""


class ModelError(HeteroError):
    """A model cannot be read, parsed or exported."""


class AffinityError(HeteroError, ValueError):
    """Affinities are incomplete, name unknown nodes, or name devices outside the priority list."""


class UnsupportedNodesError(AffinityError):
    """Automatic mode found nodes that no device of the priority list supports."""


class CompileError(HeteroError):
    """An ONNX Runtime session could not be created for a subgraph."""


class InferenceError(HeteroError, ValueError):
    """Inputs do not match the model, or a subgraph failed while running."""


class BenchmarkError(HeteroError, ValueError):
    """A benchmark option (shape, input file, report setting) is bad: the message says how to fix it."""


class ImageError(HeteroError, ValueError):
    """An image cannot be read, or a model's input cannot take an image, or preprocessing options are bad."""


class NotClassScoresError(ModelError):
    """The model's output is no class scores (strings, maps, empty): classify cannot use the model given, a
    usage error even when only the inference shows it."""
