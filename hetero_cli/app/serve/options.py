"""What every serving engine is given (ServeOptions), and the model's tensors as KServe sees them."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from ...errors import RequestError, ServeError
from ...graph import TensorInfo
from .protocol import TensorSpec, datatype_of

#: the default limit on a request's body: 64 MiB
DEFAULT_MAX_BODY_BYTES = 64 << 20
#: the default deadline of one infer request, in seconds: its body read, parsed, inferred and answered
DEFAULT_REQUEST_TIMEOUT_S = 60.0
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*")


@dataclass
class ServeOptions:
    """``hetero serve``'s options an engine reads: the model's ``name`` in URLs, where to listen
    (``host``, ``port``; 0 for any free port), the largest body accepted, ``request_timeout_s`` (each infer
    request's deadline, in seconds: http.make_app answers 408 or 504 once it passes, and a stop waits no
    longer for the requests in flight), and ``shapes`` ({input: dims, None for a dynamic one}) narrowing
    the inputs' dynamic dimensions. The ray engine's: ``address`` (a running Ray cluster's host:port; None
    starts a local Ray instance) and ``replicas`` (per stage)."""

    name: str
    host: str = "127.0.0.1"
    port: int = 8000
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES
    request_timeout_s: float = DEFAULT_REQUEST_TIMEOUT_S
    shapes: dict[str, list[int | None]] = field(default_factory=dict)
    address: str | None = None
    replicas: int = 1


def check_name(name: str) -> str:
    """``name`` if it can be a model's name in a URL (letters, digits, ``_ . -``, not starting with a
    punctuation mark); ServeError saying so otherwise."""
    if not _NAME.fullmatch(name):
        raise ServeError(
            f"--name {name!r} cannot name a model in a URL: use letters, digits, '_', '.' and '-' "
            "(starting with a letter or digit)"
        )
    return name


def tensor_specs(
    tensors: Sequence[TensorInfo], shapes: Mapping[str, Sequence[int | None]]
) -> list[TensorSpec]:
    """The model's ``tensors`` as KServe TensorSpecs: a dimension without a fixed size is -1 unless
    ``shapes`` gives it one. ServeError for a tensor without a known type, or without a rank that
    ``shapes`` does not give, or a shape that contradicts the model's fixed dimensions."""
    specs = []
    for tensor in tensors:
        if tensor.dtype is None:
            raise ServeError(f"the model declares no element type for {tensor.name!r}: it cannot be served")
        given = shapes.get(tensor.name)
        declared = tensor.shape
        if declared is None and given is None:
            raise ServeError(f"the model declares no rank for {tensor.name!r}: give its shape with -shape")
        dims = [d if isinstance(d, int) and d >= 0 else -1 for d in (declared or [None] * len(given or []))]
        if given is not None:
            dims = _narrowed(tensor.name, dims, given)
        try:
            datatype = datatype_of(tensor.dtype)
        except RequestError as exc:
            raise ServeError(f"{tensor.name!r} cannot be served: {exc}") from None
        specs.append(TensorSpec(tensor.name, datatype, tuple(dims)))
    return specs


def _narrowed(name: str, dims: list[int], given: Sequence[int | None]) -> list[int]:
    if len(given) != len(dims) or any(
        d != -1 and g is not None and g != d for d, g in zip(dims, given, strict=True)
    ):
        shown = [-1 if d is None else d for d in given]
        raise ServeError(
            f"-shape gives {name!r} the shape {shown}, the model's is {dims} (-1: any): give one that fits"
        )
    return [d if d != -1 else (-1 if g is None else g) for d, g in zip(dims, given, strict=True)]
