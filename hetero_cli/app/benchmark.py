"""Benchmark: what ``hetero benchmark`` measures and writes, in benchmark_app's conventions.

    shapes = benchmark.data_shapes(model, shape="[1,1,32,32]")
    feeds = benchmark.input_sets(model, shapes, files={}, count=4)        # seeded random data
    result = benchmark.measure(compiled, feeds, nireq=4, api="async", niter=None, duration_s=10)
    print(result.latency_median_ms, result.throughput_fps)

``-api async`` keeps ``nireq`` requests in flight on an AsyncInferQueue, as benchmark_app does: requests
run stage by stage on the compiled model's pipeline (one worker thread per device), so they overlap across
devices; ONNX Runtime releases the GIL while a session runs.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import HeteroError, InferenceError
from ..graph import Model, TensorInfo, shape_text
from ..runtime import NOT_RUN, AsyncInferQueue, CompiledModel, InferRequest, ProfilingInfo
from . import image, limits
from .limits import data_bytes, size_text

DATA_SUFFIXES = frozenset({".npy", ".bin", ".raw"})
IMAGE_SUFFIXES = frozenset(
    {".jpg", ".jpeg", ".png", ".bmp", ".gif", ".tif", ".tiff", ".webp", ".ppm", ".pgm"}
)


class BenchmarkError(HeteroError, ValueError):
    """A benchmark option (shape, input file, report setting) is bad: the message says how to fix it."""


# --- shapes ----------------------------------------------------------------------------------------------

_SHAPE = re.compile(r"\s*(?:([^\[\],]+?)\s*:?\s*)?\[([^\]]*)\]\s*,?")


def parse_shapes(text: str, input_names: Sequence[str], option: str) -> dict[str, list[int | None]]:
    """``[1,3,224,224]`` (every input) or ``name[1,3,224,224],other[1,4]``: {input: dims (None for ?/-1)}.

    One shape per input: benchmark_app's several shapes for one input (``[1,3,8,8][1,3,4,4]``, or a name
    given twice) would be run one after the other there; hetero-cli refuses them rather than keep the last.
    """
    out: dict[str, list[int | None]] = {}
    pos = 0
    text = text.strip()
    while pos < len(text):
        m = _SHAPE.match(text, pos)
        if not m or m.end() == pos:
            raise BenchmarkError(
                f"bad {option} {text!r}: write [1,3,224,224] for every input or name[1,3,224,224],other[1,4]"
            )
        name, dims = m.group(1), _parse_dims(m.group(2), text, option)
        for target in [name.strip()] if name else list(input_names):
            if target not in input_names:
                raise BenchmarkError(
                    f"{option} names unknown input {target!r}: the model's inputs are {', '.join(input_names)}"
                )
            if target in out:
                raise BenchmarkError(
                    f"{option} {text!r} gives input {target!r} more than one shape ({shape_text(out[target])} "
                    f"and {shape_text(dims)}): several shapes per input are not supported: give one"
                )
            out[target] = dims
        pos = m.end()
    return out


def _parse_dims(dims_text: str, text: str, option: str) -> list[int | None]:
    """The dimensions between one pair of brackets (``[]`` is a scalar's): whole numbers, ? or -1 for
    dynamic; an empty one (``[1,,3]``) is refused rather than dropped, which would change the rank."""
    if not dims_text.strip():
        return []
    dims: list[int | None] = []
    for k, part in enumerate(p.strip() for p in dims_text.split(",")):
        if not part:
            raise BenchmarkError(
                f"bad {option} {text!r}: dimension {k} is empty: write a number, or ? (or -1) for a dynamic one"
            )
        if part in ("?", "-1"):
            dims.append(None)
            continue
        if not part.isdigit() or int(part) == 0:
            raise BenchmarkError(
                f"bad {option} {text!r}: dimension {part!r} is not a positive whole number "
                f"(? or -1 leaves it dynamic; dimensions the model fixes, 0 included, need no {option})"
            )
        dims.append(int(part))
    return dims


def _fixed(dim: Any) -> bool:
    """Whether a model dimension is fixed: a whole number, 0 included (ONNX Runtime takes dim_value 0 as a
    fixed 0, an empty tensor); names, None and negative values are dynamic."""
    return isinstance(dim, int) and dim >= 0


def data_shapes(
    model: Model,
    shape: str | None = None,
    data_shape: str | None = None,
    requests: int = 1,
    from_images: Mapping[str, Mapping[int, int]] | None = None,
) -> tuple[dict[str, tuple[int, ...]], list[str]]:
    """The concrete shape of every input's data, and notes on dynamic dimensions filled in.

    ``shape`` (-shape) fills the model's dynamic dimensions (hetero-cli does not reshape static ones);
    ``data_shape`` (-data_shape) gives the data's shape, which must fit the model's and -shape's.
    ``from_images`` ({input: {axis: size}}, from image_dims()) fills the channels, height and width still
    dynamic from the input's first image, as classify sizes its tensor; other dynamic dimensions are 1.
    BenchmarkError if ``requests`` sets of that data (one per infer request) would not fit in memory.
    """
    names = [i.name for i in model.inputs]
    wanted = [
        ("-shape", parse_shapes(shape, names, "-shape") if shape else {}),
        ("-data_shape", parse_shapes(data_shape, names, "-data_shape") if data_shape else {}),
    ]
    out: dict[str, tuple[int, ...]] = {}
    notes: list[str] = []
    for info in model.inputs:
        dims = list(info.shape) if info.shape is not None else None
        set_by: list[str | None] = [None] * len(dims or ())
        for option, given in wanted:
            if info.name in given:
                dims, set_by = _merge_dims(info, dims, set_by, given[info.name], option)
        if dims is None:
            raise BenchmarkError(
                f"the model's input {info.name!r} has no known shape: give it with -data_shape {info.name}[...]"
            )
        out[info.name], note = _concrete(info, dims, (from_images or {}).get(info.name, {}))
        notes += [note] if note else []
    check_data_size(model, out, requests)
    return out, notes


def _merge_dims(
    info: TensorInfo,
    dims: list[Any] | None,
    set_by: list[str | None],
    given: Sequence[int | None],
    option: str,
) -> tuple[list[Any], list[str | None]]:
    """``dims`` with ``given`` (from ``option``) in its dynamic dimensions, and which option set each
    dimension (None: the model). A given dimension that differs from a fixed one is refused, blaming
    whoever fixed it: the model (hetero-cli does not reshape models) or -shape."""
    if dims is None:  # the model gives no rank: the option gives it
        dims, set_by = [None] * len(given), [None] * len(given)
    if len(given) != len(dims):
        raise BenchmarkError(
            f"{option} gives {info.name!r} rank {len(given)} but the model's input is "
            f"{shape_text(dims)} (rank {len(dims)}): give {len(dims)} dimensions"
        )
    merged, by = [], []
    for k, (want, have, setter) in enumerate(zip(given, dims, set_by, strict=True)):
        if want is not None and _fixed(have) and want != have:
            if setter is not None:
                raise BenchmarkError(
                    f"{option} gives {info.name!r} {shape_text(given)} but {setter} set dimension {k} of it to "
                    f"{have} (the model's input is {shape_text(info.shape)}): give the same value in both, or "
                    f"? in {setter} to leave it to {option}"
                )
            raise BenchmarkError(
                f"{option} gives {info.name!r} {shape_text(given)} but dimension {k} of the model's input "
                f"{shape_text(info.shape)} is fixed at {have}: hetero-cli does not reshape models; only dynamic "
                f"dimensions can be set"
            )
        merged.append(want if want is not None else have)
        by.append(option if want is not None and not _fixed(have) else setter)
    return merged, by


def _concrete(
    info: TensorInfo, dims: Sequence[Any], from_image: Mapping[int, int]
) -> tuple[tuple[int, ...], str | None]:
    """``dims`` with their dynamic dimensions filled: from the input's first image where it gives them
    (``from_image``: {axis: size}), else 1; and a note saying what was filled (None if nothing was)."""
    dynamic = [k for k, d in enumerate(dims) if not _fixed(d)]
    if not dynamic:
        return tuple(dims), None
    concrete = tuple(from_image.get(k, 1) if k in dynamic else d for k, d in enumerate(dims))
    sized = [k for k in dynamic if k in from_image]
    if not sized:
        what = "dynamic dimensions set to 1"
    elif len(sized) == len(dynamic):
        what = "dynamic dimensions taken from its first image"
    else:
        what = "image dimensions taken from its first image, the others set to 1"
    shown = shape_text(info.shape or dims)
    if info.shape is not None and list(dims) != list(info.shape):  # -shape / -data_shape set some
        shown += f" ({shape_text(dims)} as given)"
        what = what.replace("dynamic dimensions", "dimensions still dynamic")
    return (
        concrete,
        f"input {info.name!r} is {shown}: {what} (-data_shape {info.name}{shape_text(concrete)} to choose)",
    )


def _dtype(info: TensorInfo) -> np.dtype:
    """The element type of an input's data (float32 where the model does not say)."""
    return np.dtype(info.dtype) if info.dtype is not None else np.dtype(np.float32)


def _smaller(info: TensorInfo) -> str:
    """What makes an input's data smaller: the options where it has dynamic dimensions, else another model."""
    if info.shape is None or not all(_fixed(d) for d in info.shape):
        return "give a smaller -shape or -data_shape"
    return (
        f"its shape {shape_text(info.shape)} is fixed in the model (hetero-cli does not reshape models): "
        f"use a model with a smaller input"
    )


def check_data_size(model: Model, shapes: Mapping[str, Sequence[int]], count: int = 1) -> None:
    """BenchmarkError, before anything is allocated, if the inputs' data (``count`` sets of it, one per infer
    request) would take more than limits.memory_limit() bytes."""
    infos = [i for i in model.inputs if i.name in shapes]
    sizes = {i.name: data_bytes(_dtype(i), shapes[i.name]) for i in infos}
    for info in infos:
        over = limits.over_limit(sizes[info.name])
        if over is not None:
            raise BenchmarkError(
                f"input {info.name!r} data {shape_text(shapes[info.name])} {_dtype(info)} would take "
                f"{size_text(sizes[info.name])}, {over}: {_smaller(info)}"
            )
    total = sum(sizes.values())
    over = limits.over_limit(total)
    if over is not None:
        parts = ", ".join(f"{n} {size_text(b)}" for n, b in sizes.items())
        raise BenchmarkError(
            f"the inputs' data would take {size_text(total)} together ({parts}), {over}: "
            f"give a smaller -shape or -data_shape"
        )
    over = limits.over_limit(total * count)
    if over is not None:
        raise BenchmarkError(
            f"the data for {count} infer requests would take {count} x {size_text(total)} = "
            f"{size_text(total * count)}, {over}: give fewer requests (-nireq) or a smaller -shape "
            f"or -data_shape"
        )


def batch_size(shapes: Mapping[str, Sequence[int]]) -> int:
    """The batch (first dimension of the first input of rank >= 2), as benchmark_app counts frames."""
    for dims in shapes.values():
        if len(dims) >= 2:
            return int(dims[0])
    return 1


# --- input data ------------------------------------------------------------------------------------------


def parse_input_files(values: Sequence[str], input_names: Sequence[str]) -> dict[str, list[Path]]:
    """-i values (``file``, ``dir``, ``name:file``, comma separated) as {input: files}; one input may omit it."""
    out: dict[str, list[Path]] = {}
    for value in values:
        for part in (p.strip() for p in value.split(",") if p.strip()):
            name, sep, path = _split_name(part, input_names)
            if sep and name in input_names:
                if not path.strip():
                    raise BenchmarkError(
                        f"-i {part!r} names no file after {name!r}: write -i {name}:FILE (an image, .npy, .bin "
                        f"or .raw file, or a folder of them)"
                    )
                target, text = name, path.strip()
            elif sep and not Path(part).exists():  # NAME:FILE, and NAME is no input of the model
                fix = "write -i NAME:FILE with one of them" + (
                    f", or -i {path.strip() or 'FILE'} for its only input" if len(input_names) == 1 else ""
                )
                what = (
                    f"{name!r} is not an input of the model"
                    if name.strip()
                    else "no input is named before ':'"
                )
                raise BenchmarkError(f"-i {part!r}: {what}; its inputs are {', '.join(input_names)}: {fix}")
            elif len(input_names) == 1:
                target, text = input_names[0], part
            else:
                raise BenchmarkError(
                    f"-i {part!r}: the model has {len(input_names)} inputs ({', '.join(input_names)}); "
                    f"write -i name:file for each"
                )
            p = Path(text)
            if p.is_dir():
                files = sorted(
                    f
                    for f in p.iterdir()
                    if f.is_file() and f.suffix.lower() in IMAGE_SUFFIXES | DATA_SUFFIXES
                )
                if not files:
                    raise BenchmarkError(
                        f"-i {text}: the folder holds no images ({', '.join(sorted(IMAGE_SUFFIXES))}) "
                        f"nor data files (.npy, .bin, .raw)"
                    )
            elif p.exists():
                files = [p]
            else:
                raise BenchmarkError(f"-i {text}: no such file or folder")
            out.setdefault(target, []).extend(files)
    return out


def _npy_fix(name: str, given: Sequence[int], declared: Sequence[Any] | None) -> str:
    """What makes a .npy file's data fit an input: -data_shape where the model leaves the dimensions
    that differ dynamic, else data of the model's shape."""
    if declared is not None and len(declared) == len(given):
        clash = [k for k, (g, d) in enumerate(zip(given, declared, strict=True)) if _fixed(d) and g != d]
        if not clash:
            return f"give -data_shape {name}{shape_text(given)}"
        return f"the model fixes dimension {clash[0]} at {declared[clash[0]]}: give data of its shape"
    rank = f"rank {len(declared)}" if declared is not None else "the input's rank"
    return f"give data of {rank} ({shape_text(declared) if declared is not None else '?'})"


def _split_name(part: str, input_names: Sequence[str]) -> tuple[str, str, str]:
    """An -i value split as str.partition(":") splits it, but after the longest input name it starts with
    (names may hold ':', as TensorFlow's ``input_1:0`` do) when there is one, at the first ':' otherwise."""
    for name in sorted(input_names, key=len, reverse=True):
        if part.startswith(name + ":"):
            return name, ":", part[len(name) + 1 :]
    return part.partition(":")


def image_dims(
    model: Model, files: Mapping[str, Sequence[Path]], layout: str | None = None
) -> dict[str, dict[int, int]]:
    """{input: {axis: size}}: the channels, height and width of the first image -i gives each image input
    whose height or width the model leaves dynamic, at the axes of its layout, so that data_shapes sizes
    the data to the images as classify does rather than squash them to 1x1."""
    out: dict[str, dict[int, int]] = {}
    for info in model.inputs:
        given = files.get(info.name)
        if not given or Path(given[0]).suffix.lower() not in IMAGE_SUFFIXES:
            continue
        spec = image.preprocessing(model, input_name=info.name, layout=layout).input
        if spec.height is not None and spec.width is not None:
            continue
        picture = image.read(given[0])
        first = 1 if spec.has_batch else 0
        axes = (first, first + 1, first + 2) if spec.layout == "NCHW" else (first + 2, first, first + 1)
        out[info.name] = dict(zip(axes, (spec.channels or 3, picture.height, picture.width), strict=True))
    return out


def _random_kind(dtype: np.dtype) -> bool:
    """Whether random_tensor makes data of this type: booleans, integers and floats (not strings)."""
    return dtype == np.bool_ or np.issubdtype(dtype, np.integer) or np.issubdtype(dtype, np.floating)


def check_random_data(model: Model, files: Mapping[str, Sequence[Path]]) -> None:
    """BenchmarkError now, before anything is compiled or written, for an input -i gives no files for
    and whose type random data cannot be made of (strings, for one)."""
    for info in model.inputs:
        if not files.get(info.name) and not _random_kind(_dtype(info)):
            raise BenchmarkError(
                f"cannot make random data of type {_dtype(info)} for input {info.name!r}: give its data with "
                f"-i {info.name}:FILE.npy"
            )


def random_tensor(rng: np.random.Generator, dtype: np.dtype, shape: Sequence[int]) -> np.ndarray:
    """Seeded random data: images get 0..255, other floats 0..1, integers 0..9, booleans either."""
    dtype = np.dtype(dtype)
    shape = tuple(int(d) for d in shape)
    if _random_kind(dtype):
        over = limits.over_limit(data_bytes(dtype, shape))
        if over is not None:
            raise BenchmarkError(
                f"random data {shape_text(shape)} {dtype} would take {size_text(data_bytes(dtype, shape))}, "
                f"{over}: give a smaller -shape or -data_shape"
            )
    # made in the target type (no float64 or int64 array first, which would take 2 to 8 times the memory)
    if dtype == np.bool_:
        return rng.integers(0, 2, size=shape, dtype=np.bool_)
    if dtype == np.uint8:
        return rng.integers(0, 256, size=shape, dtype=np.uint8)
    if np.issubdtype(dtype, np.integer):
        return rng.integers(0, 10, size=shape, dtype=dtype)
    if np.issubdtype(dtype, np.floating):
        image_like = len(shape) == 4 and (shape[1] in (1, 3) or shape[3] in (1, 3))
        high = 255.0 if image_like else 1.0
        native = dtype if dtype in (np.dtype(np.float32), np.dtype(np.float64)) else np.dtype(np.float32)
        out = rng.random(size=shape, dtype=native)
        out *= native.type(high)
        return out if native == dtype else out.astype(dtype)
    raise BenchmarkError(
        f"cannot make random data of type {dtype}: give the input's data with -i name:file.npy"
    )


def _file_tensor(
    model: Model,
    name: str,
    paths: Sequence[Path],
    start: int,
    dtype: np.dtype,
    shape: Sequence[int],
    layout: str | None,
) -> np.ndarray:
    """Data for one input from its files, starting at file ``start``: one file, or one image per batch item."""
    path = paths[start % len(paths)]
    suffix = path.suffix.lower()
    if suffix == ".npy":
        try:
            arr = np.load(path, allow_pickle=False)
        except Exception as exc:
            raise BenchmarkError(f"-i {path}: not a readable .npy file ({exc})") from None
        if arr.dtype != dtype:
            if not np.can_cast(arr.dtype, dtype, casting="same_kind"):
                raise BenchmarkError(f"-i {path}: holds {arr.dtype} but input {name!r} takes {dtype}")
            arr = arr.astype(dtype)
        if tuple(arr.shape) != tuple(shape):
            if arr.size != int(np.prod(shape)):
                raise BenchmarkError(
                    f"-i {path}: shape {shape_text(arr.shape)} does not fit input {name!r} {shape_text(shape)}: "
                    + _npy_fix(name, arr.shape, model.tensor_info(name).shape)
                )
            arr = arr.reshape(shape)
        return arr
    if suffix in IMAGE_SUFFIXES:
        prep = image.preprocessing(model, input_name=name, layout=layout)
        spec = prep.input
        dims = list(shape)
        if spec.has_batch:
            dims = dims[1:]
        h, w = (dims[1], dims[2]) if spec.layout == "NCHW" else (dims[0], dims[1])
        from dataclasses import replace

        prep = replace(prep, input=replace(spec, height=h, width=w, batch=1 if spec.has_batch else None))
        if not spec.has_batch:
            return image.load(path, prep)
        out = np.empty(tuple(shape), dtype=spec.dtype)
        for b in range(shape[0]):
            item_path = paths[(start + b) % len(paths)]
            item = image.load(item_path, prep)
            if item.shape[1:] != out.shape[1:]:
                raise BenchmarkError(
                    f"-i {item_path}: the image makes {shape_text(item.shape)} but input {name!r} takes "
                    f"{shape_text(shape)}: give a -data_shape that fits the image, or --layout"
                )
            out[b] = item[0]
        return out
    data = np.fromfile(path, dtype=dtype)
    if data.size != int(np.prod(shape)):
        raise BenchmarkError(
            f"-i {path}: {path.stat().st_size} bytes are {data.size} {dtype} values but input {name!r} "
            f"{list(shape)} needs {int(np.prod(shape))}: give -data_shape, or an image or .npy file"
        )
    return data.reshape(shape)


def input_sets(
    model: Model,
    shapes: Mapping[str, Sequence[int]],
    files: Mapping[str, Sequence[Path]],
    count: int,
    *,
    seed: int = 0,
    layout: str | None = None,
) -> list[dict[str, np.ndarray]]:
    """``count`` input dicts (one per request): files in turn where given, seeded random data elsewhere."""
    check_data_size(model, shapes, count)  # before anything is read or made
    rng = np.random.default_rng(seed)
    sets: list[dict[str, np.ndarray]] = []
    for k in range(count):
        feeds: dict[str, np.ndarray] = {}
        for info in model.inputs:
            shape = tuple(shapes[info.name])
            dtype = _dtype(info)
            given = files.get(info.name)
            if given:
                per_set = (
                    shape[0] if len(shape) == 4 and Path(given[0]).suffix.lower() in IMAGE_SUFFIXES else 1
                )
                feeds[info.name] = _file_tensor(
                    model, info.name, [Path(g) for g in given], k * per_set, dtype, shape, layout
                )
            else:
                feeds[info.name] = random_tensor(rng, dtype, shape)
        sets.append(feeds)
    return sets


# --- measuring -------------------------------------------------------------------------------------------


@dataclass
class Measurement:
    """What benchmark_app reports: iterations, duration, latencies (ms) and throughput."""

    api: str
    nireq: int
    batch: int
    first_inference_ms: float
    duration_ms: float
    latencies_ms: list[float] = field(default_factory=list)

    @property
    def count(self) -> int:
        return len(self.latencies_ms)

    @property
    def latency_median_ms(self) -> float:
        return float(np.median(self.latencies_ms)) if self.latencies_ms else 0.0

    @property
    def latency_average_ms(self) -> float:
        return float(np.mean(self.latencies_ms)) if self.latencies_ms else 0.0

    @property
    def latency_min_ms(self) -> float:
        return float(np.min(self.latencies_ms)) if self.latencies_ms else 0.0

    @property
    def latency_max_ms(self) -> float:
        return float(np.max(self.latencies_ms)) if self.latencies_ms else 0.0

    @property
    def throughput_fps(self) -> float:
        """Frames per second: batch * 1000 / median latency (sync), batch * count / duration (async)."""
        if not self.latencies_ms:
            return 0.0
        if self.api == "sync":
            return self.batch * 1000.0 / self.latency_median_ms if self.latency_median_ms else 0.0
        return self.batch * self.count * 1000.0 / self.duration_ms if self.duration_ms else 0.0


def planned_iterations(niter: int | None, nireq: int, api: str) -> int | None:
    """benchmark_app rounds -niter up to a multiple of -nireq in async mode."""
    if niter is None or api == "sync" or nireq <= 1:
        return niter
    return -(-niter // nireq) * nireq


def measure(
    compiled: CompiledModel,
    feeds: Sequence[Mapping[str, np.ndarray]],
    *,
    nireq: int,
    api: str,
    niter: int | None,
    duration_s: float | None,
    batch: int = 1,
    on_progress: Callable[[int, float], None] | None = None,
) -> Measurement:
    """Run until both limits are reached (-niter iterations and -t seconds, whichever are given).

    The first inference (on request 0) is a warm-up, timed but not counted. Async: an AsyncInferQueue of
    ``nireq`` requests, request k always fed ``feeds[k]``; latency is start_async to completion.
    """
    if api == "sync":
        request = compiled.create_infer_request()
        first_ms = _timed_ms(lambda: request.infer(feeds[0]))
        return _measure_sync(request, feeds[0], api, batch, first_ms, niter, duration_s, on_progress)
    queue = AsyncInferQueue(compiled, nireq)
    first_ms = _timed_ms(lambda: queue[0].infer(feeds[0]))
    latencies: list[float] = []
    queue.set_callback(lambda request, _: latencies.append(request.latency))
    started = 0
    last = 0.0
    t0 = time.perf_counter()
    try:
        while _more(niter, duration_s, started, time.perf_counter() - t0):
            k = queue.get_idle_request_id()
            queue.start_async(feeds[k % len(feeds)], share_inputs=True)  # filled once, never changed
            started += 1
            now = time.perf_counter()
            if on_progress is not None and now - last > 0.1:
                last = now
                on_progress(len(latencies), now - t0)
    except BaseException:
        with contextlib.suppress(InferenceError):  # the first failure is the one to report
            queue.wait_all()
        raise
    queue.wait_all()
    duration_ms = (time.perf_counter() - t0) * 1000.0
    if on_progress is not None:
        on_progress(len(latencies), duration_ms / 1000.0)
    return Measurement(api, nireq, batch, first_ms, duration_ms, latencies)


def _timed_ms(fn: Callable[[], Any]) -> float:
    start = time.perf_counter()
    fn()
    return (time.perf_counter() - start) * 1000.0


def _more(niter: int | None, duration_s: float | None, done: int, elapsed: float) -> bool:
    """benchmark_app's loop condition: below -niter iterations or below -t seconds, whichever are given."""
    return bool((niter and done < niter) or (duration_s and elapsed < duration_s))


def _measure_sync(
    request: InferRequest,
    data: Mapping[str, np.ndarray],
    api: str,
    batch: int,
    first_ms: float,
    niter: int | None,
    duration_s: float | None,
    on_progress: Callable[[int, float], None] | None,
) -> Measurement:
    latencies: list[float] = []
    last = 0.0
    t0 = time.perf_counter()
    while _more(niter, duration_s, len(latencies), time.perf_counter() - t0):
        begin = time.perf_counter()
        request.infer(data)
        now = time.perf_counter()
        latencies.append((now - begin) * 1000.0)
        if on_progress is not None and now - last > 0.1:
            last = now
            on_progress(len(latencies), now - t0)
    duration_ms = (time.perf_counter() - t0) * 1000.0
    if on_progress is not None:
        on_progress(len(latencies), duration_ms / 1000.0)
    return Measurement(api, 1, batch, first_ms, duration_ms, latencies)


# --- performance counters --------------------------------------------------------------------------------


def average_counters(runs: Sequence[Sequence[ProfilingInfo]]) -> list[ProfilingInfo]:
    """Counters averaged over runs, line by line (same subgraph and name), in first-seen order."""
    order: dict[tuple[int, str], list[ProfilingInfo]] = {}
    for run in runs:
        for info in run:
            order.setdefault((info.subgraph, info.node_name), []).append(info)
    out = []
    n = max(len(runs), 1)
    for infos in order.values():
        first = infos[0]
        out.append(
            ProfilingInfo(
                first.node_name,
                first.node_type,
                first.exec_type,
                infos[-1].status,
                round(sum(i.real_time_us for i in infos) / n),
                round(sum(i.cpu_time_us for i in infos) / n),
                first.subgraph,
            )
        )
    return out


def _cut(text: str, width: int = 20) -> str:
    return text[: width - 4] + "..." if len(text) >= width else text


def sorted_counters(infos: Sequence[ProfilingInfo], mode: str) -> str:
    """benchmark_app's -pcsort table: sort (by real time), no_sort, simple_sort (EXECUTED rows only)."""
    total = sum(i.real_time_us for i in infos)
    total_cpu = sum(i.cpu_time_us for i in infos)
    rows = list(infos)
    if mode in ("sort", "simple_sort"):
        rows.sort(key=lambda i: i.real_time_us, reverse=True)
    if mode == "simple_sort":
        rows = [i for i in rows if i.status != NOT_RUN]
    lines = []
    proportion_sum = 0.0
    for i in rows:
        share = i.real_time_us / total if total else 0.0
        proportion_sum += share
        pct = f"{share * 100:.2f}"
        lines.append(
            f"subgraph{i.subgraph}: {_cut(i.node_name):<20} {i.status:<20} layerType: {_cut(i.node_type):<20} "
            f"execType: {i.exec_type:<20} realTime (ms): {i.real_time_us / 1000:<10.3f} "
            f"cpuTime (ms): {i.cpu_time_us / 1000:<10.3f}proportion: {(pct if pct != '0.00' else 'N/A') + '%':<8}"
        )
    lines.append(f"Total time:       {total / 1000:.3f} milliseconds")
    lines.append(f"Total CPU time:   {total_cpu / 1000:.3f} milliseconds")
    lines.append(f"Total proportion: {proportion_sum * 100:.2f} %")
    return "\n".join(line.rstrip() for line in lines)


# --- reports ---------------------------------------------------------------------------------------------

REPORT_TYPES = ("no_counters", "average_counters", "detailed_counters")


def _counter_rows(infos: Sequence[ProfilingInfo]) -> list[list[str]]:
    rows = [
        [
            f"subgraph{i.subgraph}: {i.node_name}",
            i.status,
            i.node_type,
            i.exec_type,
            f"{i.real_time_us / 1000:.3f}",
            f"{i.cpu_time_us / 1000:.3f}",
        ]
        for i in infos
    ]
    rows.append(
        [
            "Total",
            "",
            "",
            "",
            f"{sum(i.real_time_us for i in infos) / 1000:.3f}",
            f"{sum(i.cpu_time_us for i in infos) / 1000:.3f}",
        ]
    )
    return rows


def _counters_json(infos: Sequence[ProfilingInfo]) -> dict[str, Any]:
    return {
        "nodes": [
            {
                "name": f"subgraph{i.subgraph}: {i.node_name}",
                "subgraph": i.subgraph,
                "node_name": i.node_name,
                "status": i.status,
                "node_type": i.node_type,
                "exec_type": i.exec_type,
                "real_time": round(i.real_time_us / 1000, 3),
                "cpu_time": round(i.cpu_time_us / 1000, 3),
            }
            for i in infos
        ],
        "total_real_time": round(sum(i.real_time_us for i in infos) / 1000, 3),
        "total_cpu_time": round(sum(i.cpu_time_us for i in infos) / 1000, 3),
    }


def write_reports(
    folder: str | os.PathLike[str],
    report_type: str,
    *,
    json_stats: bool,
    parameters: Sequence[tuple[str, Any]],
    configuration: Sequence[tuple[str, Any]],
    results: Sequence[tuple[str, Any]],
    per_request: Sequence[Sequence[ProfilingInfo]] = (),
    average: Sequence[ProfilingInfo] = (),
) -> list[Path]:
    """benchmark_report.csv (or .json) and, for counter reports, benchmark_<type>_report.csv (or .json)."""
    out_dir = Path(folder)
    written: list[Path] = []
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
        if json_stats:
            path = out_dir / "benchmark_report.json"
            doc = {
                "cmd_options": {k: _jsonable(v) for k, v in parameters},
                "configuration_setup": {k: _jsonable(v) for k, v in configuration},
                "execution_results": {k: _jsonable(v) for k, v in results},
            }
            path.write_text(json.dumps(doc, indent=4) + "\n", encoding="utf-8")
        else:
            path = out_dir / "benchmark_report.csv"
            lines = []
            for title, pairs in (
                ("Command line parameters", parameters),
                ("Configuration setup", configuration),
                ("Execution results", results),
            ):
                lines.append(title)
                lines += [f"{k};{_csv_value(v)}" for k, v in pairs]
                lines.append("")
            path.write_text("\n".join(lines) + "\n", encoding="utf-8")
        written.append(path)
        if report_type in ("average_counters", "detailed_counters"):
            suffix = "json" if json_stats else "csv"
            path = out_dir / f"benchmark_{report_type}_report.{suffix}"
            groups = [list(average)] if report_type == "average_counters" else [list(r) for r in per_request]
            if json_stats:
                key = "avg_performance" if report_type == "average_counters" else "detailed_performance"
                doc = {key: [_counters_json(g) for g in groups]}
                path.write_text(json.dumps(doc, indent=4) + "\n", encoding="utf-8")
            else:
                header = "layerName;execStatus;layerType;execType;realTime (ms);cpuTime (ms)"
                lines = []
                for g in groups:
                    lines.append(header)
                    lines += [";".join(row) for row in _counter_rows(g)]
                    lines.append("")
                path.write_text("\n".join(lines) + "\n", encoding="utf-8")
            written.append(path)
    except OSError as exc:
        for path in written:  # the reports come as a set: none rather than part of it
            path.unlink(missing_ok=True)
        raise HeteroError(f"cannot write the report into {out_dir}: {exc.strerror or exc}") from None
    return written


def _csv_value(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.2f}"
    return str(value).replace(";", ",").replace("\n", " ")


def _jsonable(value: Any) -> Any:
    if isinstance(value, bool | int | float | str) or value is None:
        return value
    if isinstance(value, Mapping):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    return str(value)


def config_document(compiled: CompiledModel) -> dict[str, dict[str, Any]]:
    """The compiled model's configuration as -dump_config writes it: {"HETERO": {...}, device: {...}}."""
    config = compiled.config
    doc: dict[str, dict[str, Any]] = {}
    if config.hetero:
        doc["HETERO"] = {k: _jsonable(v) for k, v in config.hetero.items()}
    devices = list(dict.fromkeys([*compiled.execution_devices, *config.devices]))
    for name in devices:
        doc[name] = {k: _jsonable(v) for k, v in config.devices.get(name, {}).items()}
    return doc
