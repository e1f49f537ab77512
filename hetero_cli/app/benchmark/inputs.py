"""The benchmark's input data: -i files and folders, images sized to the model, and seeded random tensors.

    files = parse_input_files(["image:samples/images"], input_names)
    feeds = input_sets(model, shapes, files, count=4)     # one dict per infer request

Inputs -i gives no file get seeded random data; image inputs get their images preprocessed as classify does.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from ...errors import BenchmarkError
from ...graph import Model, shape_text
from .. import image, limits
from ..limits import data_bytes, size_text
from ..npy import NpyError, load_npy, npy_header
from ..paths import file_problem
from .int_ranges import DEFAULT_RANGE, UINT8_RANGE, integer_ranges
from .shapes import FilledDims, check_data_size, data_shapes, element_type, is_fixed

DATA_SUFFIXES = frozenset({".npy", ".bin", ".raw"})
IMAGE_SUFFIXES = frozenset(
    {".jpg", ".jpeg", ".png", ".bmp", ".gif", ".tif", ".tiff", ".webp", ".ppm", ".pgm"}
)


def parse_input_files(values: Sequence[str], input_names: Sequence[str]) -> dict[str, list[Path]]:
    """-i values (``file``, ``dir``, ``name:file``, comma separated) as {input: files}; one input may omit it.
    As benchmark_app reads them, a path without a name in one value is the previous name's too
    (``a:f1,f2,b:f3``: f1 and f2 for a).

    Takes the -i values and the model's input names; returns the files of each input named, in order (a
    folder's images and data files sorted by name). Raises BenchmarkError for an unknown input, a missing
    name where the model has several inputs, or a path that does not exist or holds no usable file.
    """
    out: dict[str, list[Path]] = {}
    for value in values:
        previous = None
        for part in (p.strip() for p in value.split(",") if p.strip()):
            previous, text = _target(part, input_names, previous)
            out.setdefault(previous, []).extend(_listed(text))
    return out


def _target(part: str, input_names: Sequence[str], previous: str | None = None) -> tuple[str, str]:
    """The input one -i value is for and the path it gives: ``name:path``, or ``path`` for a model of one
    input or after ``previous`` (the input the value named last); BenchmarkError where neither fits."""
    name, sep, path = _split_name(part, input_names)
    if sep and name in input_names:
        if not path.strip():
            raise BenchmarkError(
                f"-i {part!r} names no file after {name!r}: write -i {name}:FILE (an image, .npy, .bin "
                f"or .raw file, or a folder of them)"
            )
        return name, path.strip()
    if sep and not Path(part).exists():  # NAME:FILE, and NAME is no input of the model
        fix = "write -i NAME:FILE with one of them" + (
            f", or -i {path.strip() or 'FILE'} for its only input" if len(input_names) == 1 else ""
        )
        what = f"{name!r} is not an input of the model" if name.strip() else "no input is named before ':'"
        raise BenchmarkError(f"-i {part!r}: {what}; its inputs are {', '.join(input_names)}: {fix}")
    if len(input_names) == 1:
        return input_names[0], part
    if previous is not None:
        return previous, part
    raise BenchmarkError(
        f"-i {part!r}: the model has {len(input_names)} inputs ({', '.join(input_names)}); "
        f"write -i name:file for each"
    )


def _listed(text: str) -> list[Path]:
    """The files an -i path gives: the file itself, or a folder's images and data files sorted by name;
    BenchmarkError for a path that does not exist or a folder with none of them."""
    p = Path(text)
    if p.is_dir():
        files = sorted(
            f for f in p.iterdir() if f.is_file() and f.suffix.lower() in IMAGE_SUFFIXES | DATA_SUFFIXES
        )
        if not files:
            raise BenchmarkError(
                f"-i {text}: the folder holds no images ({', '.join(sorted(IMAGE_SUFFIXES))}) "
                f"nor data files (.npy, .bin, .raw)"
            )
        return files
    problem = file_problem(p, folder=True)
    if problem:
        raise BenchmarkError(f"-i {problem}: give an image, .npy, .bin or .raw file, or a folder of them")
    return [p]


def _npy_fix(name: str, given: Sequence[int], declared: Sequence[Any] | None) -> str:
    """What makes a .npy file's data fit an input: -data_shape where the model leaves the dimensions
    that differ dynamic, else data of the model's shape."""
    if declared is not None and len(declared) == len(given):
        clash = [k for k, (g, d) in enumerate(zip(given, declared, strict=True)) if is_fixed(d) and g != d]
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
        sizes = (spec.channels or 3, picture.height, picture.width)
        out[info.name] = dict(zip(_image_axes(spec), sizes, strict=True))
    return out


def data_dims(
    model: Model, files: Mapping[str, Sequence[Path]], layout: str | None = None
) -> dict[str, dict[int, int]]:
    """{input: {axis: size}}: what the first -i file of each input gives data_shapes for its dynamic
    dimensions: an image its channels, height and width (image_dims), a .npy file of the input's rank
    every axis (read from its header, the data left on disk)."""
    out = image_dims(model, files, layout)
    for info in model.inputs:
        given = files.get(info.name)
        if not given or Path(given[0]).suffix.lower() != ".npy" or info.name in out:
            continue
        try:
            shape = npy_header(given[0])[0]
        except (NpyError, OSError) as exc:
            raise _npy_error(given[0], exc) from None
        if info.shape is not None and len(shape) == len(info.shape):
            out[info.name] = dict(enumerate(int(d) for d in shape))
    return out


def file_data_shapes(
    model: Model,
    files: Mapping[str, Sequence[Path]],
    shape: str | None = None,
    data_shape: str | None = None,
    requests: int = 1,
    *,
    layout: str | None = None,
    batch: int | None = None,
    fill_dynamic: bool = True,
) -> tuple[dict[str, tuple[int, ...]], list[FilledDims]]:
    """Every input's data shape where ``files`` ({input: -i files}, from parse_input_files) are read: the
    dynamic dimensions -shape, -b and -data_shape leave are sized from each input's first file (data_dims),
    the rest as data_shapes fills them (an input with files counts as given data). Returns data_shapes'
    (shapes, what was filled); raises BenchmarkError as data_dims and data_shapes do."""
    return data_shapes(
        model, shape, data_shape, requests, data_dims(model, files, layout), batch=batch,
        fill_dynamic=fill_dynamic, with_files=list(files),
    )  # fmt: skip


def _image_axes(spec: image.ImageInput) -> tuple[int, int, int]:
    """The axes of the channels, height and width in an image input's tensor (after its batch axis, if
    it has one), in the order of its layout: NCHW or NHWC."""
    first = 1 if spec.has_batch else 0
    return (first, first + 1, first + 2) if spec.layout == "NCHW" else (first + 2, first, first + 1)


def _random_kind(dtype: np.dtype) -> bool:
    """Whether random_tensor makes data of this type: booleans, integers and floats (not strings)."""
    return dtype == np.bool_ or np.issubdtype(dtype, np.integer) or np.issubdtype(dtype, np.floating)


def check_random_data(
    model: Model, files: Mapping[str, Sequence[Path]], fix: str = "give its data with -i {name}:FILE.npy"
) -> None:
    """BenchmarkError now, before anything is compiled or written, for an input -i gives no files for
    and whose type random data cannot be made of (strings, for one); ``fix`` ends the message, with the
    input's name for ``{name}`` (a command without -i names its own way to give data)."""
    for info in model.inputs:
        if not files.get(info.name) and not _random_kind(element_type(info)):
            kind = "strings" if element_type(info).hasobject else f"type {element_type(info)}"
            raise BenchmarkError(
                f"cannot make random data of {kind} for input {info.name!r}: {fix.format(name=info.name)}"
            )


def random_tensor(
    rng: np.random.Generator,
    dtype: np.dtype,
    shape: Sequence[int],
    bounds: tuple[int, int] | None = None,
) -> np.ndarray:
    """Seeded random data: images get 0..255, other floats 0..1, integers 0..9, booleans either; integers
    and booleans ``bounds`` (low, high, both included) where given (clipped to what the type holds), and
    floats the whole numbers of ``bounds`` (an integer input's data made as floats)."""
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
    if dtype == np.bool_ or np.issubdtype(dtype, np.integer):
        low, high = bounds if bounds is not None else UINT8_RANGE if dtype == np.uint8 else DEFAULT_RANGE
        held = (0, 1) if dtype == np.bool_ else (int(np.iinfo(dtype).min), int(np.iinfo(dtype).max))
        low, high = (min(max(b, held[0]), held[1]) for b in (low, high))
        return rng.integers(low, high, size=shape, dtype=dtype, endpoint=True)
    if np.issubdtype(dtype, np.floating):
        image_like = len(shape) == 4 and (shape[1] in (1, 3) or shape[3] in (1, 3))
        high = 255.0 if image_like else 1.0
        native = dtype if dtype in (np.dtype(np.float32), np.dtype(np.float64)) else np.dtype(np.float32)
        out = rng.random(size=shape, dtype=native)
        if bounds is not None:  # an integer input's data made as floats (-iop): whole numbers in its range
            out *= native.type(bounds[1] - bounds[0] + 1)
            out = np.clip(np.floor(out, out=out) + native.type(bounds[0]), bounds[0], bounds[1])
        else:
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
    values: tuple[str | None, str | None] = (None, None),
) -> np.ndarray:
    """Data for one input from its files, starting at file ``start``: one file, or one image per batch item.

    Takes the input's name, files, element type and concrete shape (``layout``, and ``values``, the mean
    and scale, for images); returns an array of that type and shape. Raises BenchmarkError for a file
    whose data does not fit it.
    """
    path = paths[start % len(paths)]
    suffix = path.suffix.lower()
    if suffix == ".npy":
        return _npy_tensor(model, name, path, dtype, shape)
    if suffix in IMAGE_SUFFIXES:
        return _image_tensor(model, name, paths, start, shape, layout, values)
    return _raw_tensor(name, path, dtype, shape)


def _npy_tensor(model: Model, name: str, path: Path, dtype: np.dtype, shape: Sequence[int]) -> np.ndarray:
    """A .npy file's array, cast (same kind only) and reshaped (same size only) to the input's."""
    try:
        arr = load_npy(path)
    except (NpyError, OSError) as exc:
        raise _npy_error(path, exc) from None
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


def _npy_error(path: Path, exc: Exception) -> BenchmarkError:
    """The error for an -i .npy file that is not read: what is wrong with its data (npy.NpyError), or why
    the file cannot be read."""
    if isinstance(exc, NpyError):
        return BenchmarkError(f"-i {path} {exc}")
    return BenchmarkError(f"-i {path}: not a readable .npy file ({getattr(exc, 'strerror', None) or exc})")


def _image_tensor(
    model: Model,
    name: str,
    paths: Sequence[Path],
    start: int,
    shape: Sequence[int],
    layout: str | None,
    values: tuple[str | None, str | None] = (None, None),
) -> np.ndarray:
    """Images preprocessed as classify does (``values``: its --mean and --scale), resized to ``shape``: one
    per batch item, from file ``start`` on (the first image alone where the input has no batch axis)."""
    prep = image.preprocessing(model, input_name=name, layout=layout, mean=values[0], scale=values[1])
    spec = prep.input
    _, height_axis, width_axis = _image_axes(spec)
    batch = 1 if spec.has_batch else None
    prep = replace(prep, input=replace(spec, height=shape[height_axis], width=shape[width_axis], batch=batch))
    if not spec.has_batch:
        return image.load(paths[start % len(paths)], prep)
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


def _raw_tensor(name: str, path: Path, dtype: np.dtype, shape: Sequence[int]) -> np.ndarray:
    """A .bin or .raw file's bytes as values of ``dtype``: exactly as many as ``shape`` holds."""
    data = np.fromfile(path, dtype=dtype)
    if data.size != int(np.prod(shape)):
        raise BenchmarkError(
            f"-i {path}: {path.stat().st_size} bytes are {data.size} {dtype} values but input {name!r} "
            f"{list(shape)} needs {int(np.prod(shape))}: give -data_shape, or an image or .npy file"
        )
    return data.reshape(shape)


def _per_set(shape: Sequence[int], paths: Sequence[Path | str]) -> int:
    """How many of an input's files one input set reads: one per batch item of an image input, else one."""
    return shape[0] if len(shape) == 4 and Path(paths[0]).suffix.lower() in IMAGE_SUFFIXES else 1


def files_read(shape: Sequence[int], paths: Sequence[Path | str], count: int) -> int:
    """How many of an input's -i ``paths`` ``count`` input sets (input_sets) read: the first ones, as
    benchmark_app reads them; the others are never opened."""
    return min(len(paths), count * _per_set(shape, paths))


def input_sets(
    model: Model,
    shapes: Mapping[str, Sequence[int]],
    files: Mapping[str, Sequence[Path]],
    count: int,
    *,
    seed: int = 0,
    layout: str | None = None,
    made_as: Mapping[str, np.dtype] | None = None,
    mean: Mapping[str, str] | None = None,
    scale: Mapping[str, str] | None = None,
    int_ranges: Mapping[str, tuple[int, int]] | None = None,
) -> list[dict[str, np.ndarray]]:
    """``count`` input dicts (one per request): files in turn where given, seeded random data elsewhere.

    Random integers stay within each input's range (int_ranges.integer_ranges: ``int_ranges``, {input:
    (low, high)}, where given, else what the graph bounds it to); ``made_as`` ({input: type}, -ip / -iop)
    makes an input's random data in that type's range, converted to the input's own type; ``mean`` /
    ``scale`` ({input: "R,G,B"}) preprocess its images as classify's --mean / --scale do. Raises
    BenchmarkError for data that does not fit an input, or a bad ``int_ranges``.
    """
    check_data_size(model, shapes, count)  # before anything is read or made
    ranges = {n: (r.low, r.high) for n, r in integer_ranges(model, int_ranges).items()}
    rng = np.random.default_rng(seed)
    sets: list[dict[str, np.ndarray]] = []
    for k in range(count):
        feeds: dict[str, np.ndarray] = {}
        for info in model.inputs:
            shape = tuple(shapes[info.name])
            dtype = element_type(info)
            given = files.get(info.name)
            if given:
                per_set = _per_set(shape, given)
                values = ((mean or {}).get(info.name), (scale or {}).get(info.name))
                feeds[info.name] = _file_tensor(
                    model, info.name, [Path(g) for g in given], k * per_set, dtype, shape, layout, values
                )
            elif made_as and info.name in made_as:
                made = random_tensor(rng, made_as[info.name], shape, ranges.get(info.name))
                feeds[info.name] = made.astype(dtype)
            else:
                feeds[info.name] = random_tensor(rng, dtype, shape, ranges.get(info.name))
        sets.append(feeds)
    return sets
