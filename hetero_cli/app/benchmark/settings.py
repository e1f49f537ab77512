"""How a benchmark runs, from benchmark_app's options: the hint, the API and the number of infer requests
(and why: step 3 says it), per-device values (-nstreams, -infer_precision), the element types of -ip / -op
/ -iop and the per-input values of --mean_values / --scale_values.

    mode = run_mode(hint="latency", configured=None, api=None, nireq=None, hetero=True)
    mode.api, mode.nireq, mode.why     # "sync", 1, "-hint latency: PERFORMANCE_HINT=LATENCY, -api sync"
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from ...errors import BenchmarkError
from ...graph import Model, TensorInfo

#: benchmark_app's element type names (-ip, -op, -iop) as NumPy types.
PRECISIONS = {
    "bool": np.bool_,
    "f16": np.float16,
    "f32": np.float32,
    "f64": np.float64,
    "i8": np.int8,
    "i16": np.int16,
    "i32": np.int32,
    "i64": np.int64,
    "u8": np.uint8,
    "u16": np.uint16,
    "u32": np.uint32,
    "u64": np.uint64,
}


@dataclass(frozen=True)
class RunMode:
    """The hint (``latency``, ``throughput``, ``cumulative_throughput``; ``none`` sets no PERFORMANCE_HINT,
    leaving HETERO's LATENCY), the API, the infer requests (None: the compiled model's
    OPTIMAL_NUMBER_OF_INFER_REQUESTS) and ``why``, the sentence step 3 prints; ``defaulted``: no hint was
    given on the command line or in the configuration (benchmark_app warns then)."""

    hint: str
    api: str
    nireq: int | None
    why: str
    defaulted: bool


def default_requests() -> int:
    """Requests in flight for THROUGHPUT when -nireq is not given: 2 to 4, by the cores here."""
    return max(2, min(4, os.cpu_count() or 1))


def run_mode(
    *, hint: str | None, configured: str | None, api: str | None, nireq: int | None, hetero: bool
) -> RunMode:
    """benchmark_app's choice of hint, API and requests, for HETERO as OpenVINO's HETERO behaves.

    ``hint``: -hint (lower case, aliases resolved), ``configured``: a PERFORMANCE_HINT from --config or
    -load_config, ``api`` / ``nireq``: -api / -nireq as given (None: not given), ``hetero``: whether -d is
    a HETERO device. -hint latency means -api sync, as in benchmark_app; with no hint anywhere, one device
    runs THROUGHPUT (benchmark_app's default for -api async, LATENCY for -api sync), and HETERO runs
    LATENCY with -api async and OPTIMAL_NUMBER_OF_INFER_REQUESTS requests: benchmark_app sets no hint on
    OpenVINO's HETERO ("does not support performance hint property"), whose devices then run LATENCY.
    """
    defaulted = False
    if hint is not None:
        source = f"-hint {hint}"
    elif configured is not None:
        hint, source = configured.lower(), f"PERFORMANCE_HINT={configured.upper()} from the configuration"
    elif hetero or api == "sync":
        hint, defaulted = "latency", True
        source = (
            "HETERO's default, as OpenVINO's HETERO (benchmark_app sets it no hint; its devices run LATENCY)"
            if hetero
            else "benchmark_app's default for -api sync"
        )
    else:
        hint, defaulted = "throughput", True
        source = "benchmark_app's default for -api async on one device"
    if api is None:
        api = "sync" if hint == "latency" and source.startswith("-hint") else "async"
    if api == "sync":
        requests: int | None = 1
    elif nireq is not None:
        requests = nireq
    elif hint in ("throughput", "cumulative_throughput"):
        requests = default_requests()
    else:
        requests = None
    shown = "no PERFORMANCE_HINT (HETERO's LATENCY)" if hint == "none" else f"PERFORMANCE_HINT={hint.upper()}"
    count = (
        f"{requests} infer request(s)"
        if requests is not None
        else "OPTIMAL_NUMBER_OF_INFER_REQUESTS infer requests (one per pipeline stage)"
    )
    why = f"{shown}: {source}; -api {api}, {count}"
    return RunMode(hint, api, requests, why, defaulted)


def per_device(text: str, devices: Sequence[str], option: str) -> dict[str, str]:
    """benchmark_app's value per device: ``V`` for every device of ``devices``, or ``DEV:V,DEV:V``
    (devices named as in -d, any case). BenchmarkError for a device that -d does not list."""
    text = text.strip()
    if ":" not in text:
        if not text:
            raise BenchmarkError(f"{option} is empty: give a value, or DEVICE:VALUE,...")
        return dict.fromkeys(devices, text)
    out: dict[str, str] = {}
    upper = {d.upper(): d for d in devices}
    for part in (p.strip() for p in text.split(",") if p.strip()):
        device, sep, value = part.rpartition(":")
        if not sep or not device.strip() or not value.strip():
            raise BenchmarkError(f"{option} {part!r}: write VALUE for every device, or DEVICE:VALUE,...")
        if device.strip().upper() not in upper:
            raise BenchmarkError(
                f"{option} names {device.strip()!r}, which -d does not list: it lists {', '.join(devices)}"
            )
        out[upper[device.strip().upper()]] = value.strip()
    return out


def element_types(model: Model, ip: str | None, op: str | None, iop: str | None) -> dict[str, np.dtype]:
    """{input: the type its random data is made in}, from -ip (every input) and -iop (by name, over -ip).

    ONNX Runtime takes each input in the model's own type, so the data is made in the given type's range
    and converted; an output type (-op, or -iop naming an output) must be the model's own, since ONNX
    Runtime returns outputs in that type. BenchmarkError for an unknown name or type, or another output type.
    """
    named: dict[str, str] = {}
    for part in (p.strip() for p in (iop or "").split(",") if p.strip()):
        name, sep, kind = part.rpartition(":")
        if not sep or not name.strip():
            raise BenchmarkError(f"-iop {part!r}: write NAME:TYPE,..., e.g. -iop image:u8")
        named[name.strip()] = kind.strip()
    inputs = {i.name: i for i in model.inputs}
    outputs = {o.name: o for o in model.outputs}
    for name in named:
        if name not in inputs and name not in outputs:
            raise BenchmarkError(
                f"-iop names {name!r}, which is no input or output of the model: its inputs are "
                f"{', '.join(inputs)}; its outputs {', '.join(outputs)}"
            )
    made: dict[str, np.dtype] = {}
    for name in inputs:
        kind = named.get(name, ip)
        if kind is not None:
            made[name] = _precision(kind, "-iop" if name in named else "-ip")
    for name, info in outputs.items():
        kind = named.get(name, op)
        if kind is not None:
            _check_output(info, _precision(kind, "-iop" if name in named else "-op"), kind)
    return made


def _precision(kind: str, option: str) -> np.dtype:
    value = PRECISIONS.get(kind.strip().lower())
    if value is None:
        raise BenchmarkError(f"{option} {kind!r} is no element type: give one of {', '.join(PRECISIONS)}")
    return np.dtype(value)


def _check_output(info: TensorInfo, wanted: np.dtype, kind: str) -> None:
    own = np.dtype(info.dtype) if info.dtype is not None else None
    if own != wanted:
        raise BenchmarkError(
            f"output {info.name!r} is {own} in the model and ONNX Runtime returns it so; {kind} would need a "
            "Cast in the model: leave -op / -iop out for it, or convert the model"
        )


_VALUES = re.compile(r"\s*([^\[\],]*?)\s*\[([^\]]*)\]\s*,?")


def per_input_values(text: str | None, input_names: Sequence[str], option: str) -> dict[str, str]:
    """--mean_values / --scale_values ``[R,G,B]`` (every input) or ``name[R,G,B],...``: {input: "R,G,B"}.
    BenchmarkError for another form or an unknown input."""
    if not text or not text.strip():
        return {}
    out: dict[str, str] = {}
    pos, text = 0, text.strip()
    while pos < len(text):
        m = _VALUES.match(text, pos)
        if not m or m.end() == pos:
            raise BenchmarkError(f"bad {option} {text!r}: write [R,G,B] for every input or name[R,G,B],...")
        name, values = m.group(1), m.group(2)
        for target in [name] if name else list(input_names):
            if target not in input_names:
                raise BenchmarkError(
                    f"{option} names unknown input {target!r}: the model's inputs are {', '.join(input_names)}"
                )
            out[target] = values
        pos = m.end()
    return out


def check_image_values(values: Mapping[str, str], image_inputs: Sequence[str], option: str) -> None:
    """BenchmarkError where --mean_values / --scale_values name an input that gets no images from -i:
    hetero-cli applies them as classify does, to images it preprocesses; other data is fed as it is."""
    for name in values:
        if name not in image_inputs:
            raise BenchmarkError(
                f"{option} for input {name!r}: hetero-cli applies it to the images -i gives (as classify's "
                f"--mean / --scale), and {name!r} gets none: give -i {name}:IMAGE, or leave {option} out"
            )
