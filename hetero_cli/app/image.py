"""Images in, tensors out: read a picture and shape it for a model's image input.

    prep = image.preprocessing(model)                    # from the model's input and metadata_props
    tensor = image.load("digit_3.png", prep)             # numpy array, ready for request.infer

Reading uses Pillow (JPEG, PNG, BMP, GIF, TIFF, WebP...; grey, RGB, RGBA, palette, 16-bit...). The input
tensor decides the rest: layout NCHW or NHWC (from the shape, or the metadata's ``layout``), 1 or 3
channels, float or uint8 elements, and its height and width (the image's own size where they are dynamic).

Preprocessing comes from the model's ``metadata_props`` when present, overridden by explicit options:

* ``mean`` and ``scale`` (one number, or one per channel, comma separated): ``(x - mean) / scale`` on pixel
  values 0..255. When the graph itself starts with exactly that normalisation (a Sub of ``mean`` and a Div
  by ``scale`` - or Mul by 1/scale - within its first operations after the input), the metadata only records
  what the graph does, and raw pixels are fed: normalising twice would be wrong. Explicit options always apply.
* ``layout`` (NCHW, NHWC), ``color`` (GRAY, RGB, BGR).
* ``foreground``: ``light`` (bright strokes on a dark background) or ``dark``. An image whose background
  (its border) is the other way round is inverted; ``invert=True/False`` forces it either way.

Without metadata nor options: no normalisation, no inversion, RGB order for 3 channels.
"""

from __future__ import annotations

import os
import re
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np

from ..errors import ImageError
from ..graph import Model, TensorInfo, shape_text
from . import limits
from .paths import file_problem

LAYOUTS = ("NCHW", "NHWC")
COLORS = ("GRAY", "RGB", "BGR")
FLOAT_TYPES = (np.float16, np.float32, np.float64)


# --- limits ------------------------------------------------------------------------------------------


def pixel_limit() -> int | None:
    """The most pixels an image may have, read or resized to: Pillow's MAX_IMAGE_PIXELS (None: no limit)."""
    from PIL import Image

    return Image.MAX_IMAGE_PIXELS


@dataclass(frozen=True)
class ImageInput:
    """What a model's image input needs: name, element type, layout, channels, height and width."""

    name: str
    dtype: np.dtype
    layout: str
    channels: int | None
    height: int | None
    width: int | None
    batch: int | None
    has_batch: bool = True

    @property
    def rank(self) -> int:
        return 4 if self.has_batch else 3


@dataclass(frozen=True)
class Preprocess:
    """Everything that turns a picture into the input tensor."""

    input: ImageInput
    color: str
    mean: tuple[float, ...] = (0.0,)
    scale: tuple[float, ...] = (1.0,)
    normalise: bool = False
    invert: bool | None = None
    foreground: str | None = None
    notes: list[str] = field(default_factory=list, compare=False)

    def describe(self) -> str:
        """One line for the user: what the tensor will look like and what was done to the pixels."""
        i = self.input
        size = f"{i.height or '?'}x{i.width or '?'}"
        parts = [f"{i.name}: {i.layout} {i.dtype} {size} {self.color}", *self.notes]
        if self.normalise:
            parts.append(f"(x - {_nums(self.mean)}) / {_nums(self.scale)}")
        return ", ".join(parts)


def _nums(values: Sequence[float]) -> str:
    text = ",".join(f"{v:g}" for v in values)
    return text if len(values) == 1 else f"[{text}]"


def metadata(model: Model) -> dict[str, str]:
    """The model's metadata_props as a dict (keys lower-case)."""
    return {k.strip().lower(): v.strip() for k, v in model.metadata_props.items()}


# --- the model's input -----------------------------------------------------------------------------------


def image_input(model: Model, layout: str | None = None, name: str | None = None) -> ImageInput:
    """The model's image input (its only one, or ``name``), analysed; ImageError saying why if it cannot take one."""
    inputs = model.inputs
    if name is not None:
        chosen = [i for i in inputs if i.name == name]
        if not chosen:
            raise ImageError(
                f"the model has no input {name!r}: its inputs are {', '.join(i.name for i in inputs)}"
            )
        inputs = chosen
    elif len(inputs) != 1:
        names = ", ".join(i.name for i in inputs) or "none"
        raise ImageError(
            f"the model has {len(inputs)} inputs ({names}) but an image fills exactly one: "
            f"use a model with a single image input, or `hetero benchmark -i name:file` for several"
        )
    return _analyse(inputs[0], layout or metadata(model).get("layout"))


def _analyse(info: TensorInfo, layout: str | None) -> ImageInput:
    where = f"the model's input {info.name!r}"
    if info.dtype is None or info.shape is None:
        raise ImageError(f"{where} has no known element type or rank: an image needs a typed 4-D tensor")
    dtype = np.dtype(info.dtype)
    if dtype != np.uint8 and not any(dtype == np.dtype(t) for t in FLOAT_TYPES):
        raise ImageError(f"{where} takes {dtype}, not an image: images go into float or uint8 tensors")
    shape = list(info.shape)
    if len(shape) not in (3, 4):
        raise ImageError(
            f"{where} has shape {shape_text(shape)} (rank {len(shape)}): an image needs rank 4 "
            f"([N,C,H,W] or [N,H,W,C]) or rank 3 ([C,H,W] or [H,W,C])"
        )
    if any(isinstance(d, int) and d == 0 for d in shape):
        raise ImageError(
            f"{where} has shape {shape_text(shape)}: a dimension fixed at 0 makes an empty tensor, which holds "
            f"no image: use a model whose input has a size there (or a dynamic one)"
        )
    has_batch = len(shape) == 4
    body = shape[1:] if has_batch else shape
    layout = _layout(where, body, layout, has_batch)
    c, h, w = (body[0], body[1], body[2]) if layout == "NCHW" else (body[2], body[0], body[1])
    channels = c if isinstance(c, int) and c > 0 else None
    if channels is not None and channels not in (1, 3):
        raise ImageError(
            f"{where} has {channels} channels ({layout} {shape_text(shape)}): an image has 1 (grey) or 3 (colour)"
        )
    batch = shape[0] if has_batch and isinstance(shape[0], int) and shape[0] > 0 else None
    return ImageInput(
        info.name,
        dtype,
        layout,
        channels,
        h if isinstance(h, int) and h > 0 else None,
        w if isinstance(w, int) and w > 0 else None,
        batch,
        has_batch,
    )


def _layout(where: str, body: list, wanted: str | None, has_batch: bool) -> str:
    if wanted:
        text = wanted.strip().upper()
        if not has_batch and text in ("CHW", "HWC"):
            text = "N" + text
        if text not in LAYOUTS:
            raise ImageError(f"unknown layout {wanted!r}: use NCHW or NHWC")
        return text
    first, last = body[0], body[2]
    if last in (1, 3) and first not in (1, 3):
        return "NHWC"
    if first not in (1, 3) and isinstance(first, int) and isinstance(last, int):
        raise ImageError(
            f"{where} has no channel dimension of 1 or 3 in {shape_text(body)}: it does not take an image "
            f"(give --layout if it does)"
        )
    return "NCHW"


# --- preprocessing ---------------------------------------------------------------------------------------


def parse_numbers(
    text: str | Sequence[float] | float, what: str, channels: int | None = None
) -> tuple[float, ...]:
    """``"127.5"`` or ``"0.485,0.456,0.406"`` (or numbers) as a tuple of floats; ImageError if not numbers.

    ``channels`` (the input's, where known) only words the message: a grey input takes one number.
    """
    if isinstance(text, int | float):
        return (float(text),)
    if not isinstance(text, str):
        values = tuple(float(v) for v in text)
    else:
        try:
            values = tuple(float(p) for p in text.replace(" ", ",").split(",") if p)
        except ValueError:
            raise ImageError(
                f"bad {what} {text!r}: give one number or one per channel, e.g. 127.5 or 123,117,104"
            ) from None
    if not values or len(values) not in (1, 3) or not all(np.isfinite(values)):
        if channels == 1:
            raise ImageError(
                f"bad {what} {text!r}: the input has 1 channel (grey): give one finite number, e.g. 127.5"
            )
        raise ImageError(f"bad {what} {text!r}: give one number or one per channel (3), all finite")
    return values


def preprocessing(
    model: Model,
    *,
    mean: str | Sequence[float] | None = None,
    scale: str | Sequence[float] | None = None,
    layout: str | None = None,
    color: str | None = None,
    invert: bool | None = None,
    input_name: str | None = None,
) -> Preprocess:
    """How to feed an image to ``model``: its input, the model's metadata, then these options (which win)."""
    meta = metadata(model)
    spec = image_input(model, layout, input_name)
    notes: list[str] = []

    color_text = (color or meta.get("color") or "").strip().upper()
    color_text = {"GREY": "GRAY", "L": "GRAY", "GRAYSCALE": "GRAY", "GREYSCALE": "GRAY"}.get(
        color_text, color_text
    )
    if color_text and color_text not in COLORS:
        raise ImageError(f"unknown colour {color or meta.get('color')!r}: use GRAY, RGB or BGR")
    if not color_text:
        color_text = "GRAY" if spec.channels == 1 else "RGB"
    declared = next((i.shape for i in model.inputs if i.name == spec.name), None)
    if spec.channels == 1 and color_text in ("RGB", "BGR"):
        source = f"--color {color}" if color else f"the model's metadata (color {meta.get('color')})"
        fix = "drop --color or give --color GRAY" if color else "give --color GRAY"
        raise ImageError(
            f"{source} makes 3 channels but the model's input {spec.name!r} {shape_text(declared)} takes 1 "
            f"(grey): {fix}"
        )
    if spec.channels is None:
        spec = replace(spec, channels=1 if color_text == "GRAY" else 3)
    if spec.height is not None and spec.width is not None:  # fixed: refuse before reading any image
        check_size(spec, spec.height, spec.width)

    explicit = mean is not None or scale is not None
    given = {"mean": mean, "scale": scale} if explicit else meta  # options given: the metadata ignored
    where = "" if explicit else " in the model's metadata"
    mean_v, scale_v = (
        default if given.get(key) is None else parse_numbers(given[key], key + where, spec.channels)
        for key, default in (("mean", (0.0,)), ("scale", (1.0,)))
    )
    if any(v == 0 for v in scale_v):
        raise ImageError("scale 0 would divide by zero: give a non-zero --scale")
    for values, what in ((mean_v, "mean"), (scale_v, "scale")):
        if len(values) == 3 and spec.channels != 3:
            raise ImageError(
                f"{what} has 3 values but the input has {spec.channels} channel(s): give one value"
            )
    wanted = mean_v != (0.0,) or scale_v != (1.0,)
    normalise = wanted and spec.dtype != np.uint8
    if wanted and not normalise:  # uint8 pixels
        if explicit:
            raise ImageError(
                f"the model's input {spec.name!r} takes uint8 pixels: --mean and --scale need a float input"
            )
        notes.append("raw uint8 pixels (metadata mean/scale left to the graph)")

    foreground = (meta.get("foreground") or "").strip().lower()
    foreground = foreground if foreground in ("light", "dark") else None
    return Preprocess(spec, color_text, mean_v, scale_v, normalise, invert, foreground, notes)


def tensor_shape(spec: ImageInput, height: int, width: int, batch: int = 1) -> tuple[int, ...]:
    """The shape of the tensor ``to_tensor`` makes for an image of ``height`` x ``width``."""
    c = spec.channels or 3
    body = (c, height, width) if spec.layout == "NCHW" else (height, width, c)
    return ((spec.batch or batch), *body) if spec.has_batch else body


def check_size(spec: ImageInput, height: int, width: int, batch: int = 1) -> None:
    """ImageError, before anything is resized or allocated, if the input's tensor for an image of ``height``
    x ``width`` needs more pixels than Pillow decodes (MAX_IMAGE_PIXELS) or more bytes than limits.memory_limit()."""
    shape = tensor_shape(spec, height, width, batch)
    nbytes = limits.data_bytes(spec.dtype, shape)
    what = f"the model's input {spec.name!r} needs a {shape_text(shape)} {spec.dtype} tensor"
    pixels = pixel_limit()
    if pixels is not None and height * width > pixels:
        raise ImageError(
            f"{what}, {width}x{height} = {height * width} pixels per image ({limits.size_text(nbytes)}), over the "
            f"limit of {pixels} pixels (Pillow's MAX_IMAGE_PIXELS, against decompression bombs): use a model "
            f"with a smaller input, or dynamic height and width"
        )
    over = limits.over_limit(nbytes)
    if over is not None:
        raise ImageError(
            f"{what} of {limits.size_text(nbytes)}, {over}: use a model with a smaller input, or a smaller batch"
        )


# --- reading and converting ------------------------------------------------------------------------------


def read(path: str | os.PathLike[str]):
    """Open and fully decode an image with Pillow; ImageError naming the file and the problem if it cannot."""
    from PIL import Image, ImageOps, UnidentifiedImageError

    p = Path(path)
    if not p.exists():
        raise ImageError(f"image file not found: {p}: check the path")
    problem = file_problem(p)
    if problem:
        raise ImageError(f"{problem}: give the path of an image file (JPEG, PNG, BMP...)")
    if p.stat().st_size == 0:
        raise ImageError(f"{p} is empty (0 bytes): give an image file (JPEG, PNG, BMP...)")
    try:
        with warnings.catch_warnings():
            # Pillow only warns between MAX_IMAGE_PIXELS and twice that, then decodes it all: refuse both
            warnings.simplefilter("error", Image.DecompressionBombWarning)
            with Image.open(p) as img:
                img.load()
                return ImageOps.exif_transpose(img).copy()
    except Image.DecompressionBombWarning as exc:
        raise ImageError(_too_large(p, exc)) from None
    except PermissionError:
        raise ImageError(f"cannot read image {p}: permission denied") from None
    except UnidentifiedImageError:
        raise ImageError(
            f"{p} is not an image Pillow can read (JPEG, PNG, BMP, GIF, TIFF, WebP...): is it another kind of file?"
        ) from None
    except Image.DecompressionBombError as exc:
        raise ImageError(_too_large(p, exc)) from None
    except (OSError, SyntaxError, ValueError, EOFError) as exc:
        text = str(exc).strip().splitlines()
        raise ImageError(
            f"{p} is corrupt or truncated ({text[0] if text else type(exc).__name__}): re-export or re-download it"
        ) from None


def _too_large(path: Path, exc: BaseException) -> str:
    # Pillow words its warning with MAX_IMAGE_PIXELS and its error with twice that; read() refuses both,
    # so the limit that applies is MAX_IMAGE_PIXELS: quote only that one
    m = re.search(r"\((\d+) pixels\)", str(exc))
    size = f"{int(m.group(1))} pixels" if m else "its size"
    return (
        f"{path} is too large to decode safely ({size}, over the limit of {pixel_limit()} pixels "
        f"against decompression bombs): downscale it first"
    )


def _to_8bit(img):
    """Any Pillow mode as L, RGB or RGBA with 8-bit channels."""
    from PIL import Image

    mode = img.mode
    if mode in ("L", "RGB", "RGBA"):
        return img
    if mode in ("1", "CMYK", "YCbCr", "LAB", "HSV"):
        return img.convert("RGB" if mode != "1" else "L")
    if mode in ("P", "PA", "LA", "RGBa"):
        return img.convert("RGBA")
    if mode == "La":  # premultiplied alpha: Pillow converts it to LA only
        return img.convert("LA").convert("RGBA")
    if mode.startswith("I") or mode == "F":
        arr = np.asarray(img, dtype=np.float64)
        finite = np.isfinite(arr)
        if not finite.all():  # NaN -> 0, infinities -> the largest / smallest finite value
            top = float(arr[finite].max()) if finite.any() else 0.0
            bottom = float(arr[finite].min()) if finite.any() else 0.0
            arr = np.nan_to_num(arr, nan=0.0, posinf=top, neginf=bottom)
        if mode.startswith("I;16"):
            arr = arr / 257.0
        elif mode == "F" and arr.size and float(np.nanmax(arr)) <= 1.0:
            arr = arr * 255.0
        elif arr.size and float(np.nanmax(arr)) > 255.0:
            arr = arr * (255.0 / float(np.nanmax(arr)))
        return Image.fromarray(np.clip(np.nan_to_num(arr), 0, 255).round().astype(np.uint8), "L")
    return img.convert("RGB")


def _flatten_alpha(img, background: int):
    from PIL import Image

    if img.mode != "RGBA":
        return img
    base = Image.new("RGBA", img.size, (background, background, background, 255))
    return Image.alpha_composite(base, img).convert("RGB")


def _background_is_light(arr: np.ndarray) -> bool:
    """Whether the image's border (its background, for a centred subject) is brighter than mid-grey."""
    grey = arr if arr.ndim == 2 else arr.mean(axis=2)
    border = np.concatenate([grey[0], grey[-1], grey[:, 0], grey[:, -1]])
    return float(np.median(border)) > 127.5


def to_tensor(img, prep: Preprocess, batch: int = 1) -> np.ndarray:
    """A decoded Pillow image as the model's input tensor (``batch`` copies where the batch is dynamic)."""
    from PIL import Image

    spec = prep.input
    if spec.channels is None:
        spec = replace(spec, channels=1 if prep.color == "GRAY" else 3)
    width = spec.width or img.width
    height = spec.height or img.height
    check_size(spec, height, width, batch)  # before resizing or allocating anything
    img = _to_8bit(img)
    img = _flatten_alpha(img, 0 if prep.foreground == "light" else 255)
    img = img.convert("L") if prep.color == "GRAY" else img.convert("RGB")
    if img.size != (width, height):
        img = img.resize((width, height), Image.Resampling.BILINEAR)
    arr = np.asarray(img, dtype=np.uint8)
    invert = prep.invert
    if invert is None and prep.foreground is not None:
        invert = _background_is_light(arr) == (prep.foreground == "light")
    if invert:
        arr = 255 - arr
    if arr.ndim == 2:
        arr = arr[:, :, None]
    if prep.color == "BGR":
        arr = arr[:, :, ::-1]
    if spec.channels == 3 and arr.shape[2] == 1:
        arr = np.repeat(arr, 3, axis=2)
    if spec.dtype == np.uint8:
        out = arr
    else:
        out = arr.astype(np.float32)
        if prep.normalise:
            out = (out - np.asarray(prep.mean, np.float32)) / np.asarray(prep.scale, np.float32)
        out = out.astype(spec.dtype)
    if spec.layout == "NCHW":
        out = out.transpose(2, 0, 1)
    if spec.has_batch:
        n = spec.batch or batch
        out = np.repeat(out[None], n, axis=0)
    return np.ascontiguousarray(out)


def load(path: str | os.PathLike[str], prep: Preprocess, batch: int = 1) -> np.ndarray:
    """Read the image at ``path`` and return the model's input tensor for it."""
    return to_tensor(read(path), prep, batch)


def inverted(img, prep: Preprocess) -> bool:
    """Whether ``to_tensor`` inverts this image (for messages)."""
    if prep.invert is not None:
        return prep.invert
    if prep.foreground is None:
        return False
    gray = np.asarray(_flatten_alpha(_to_8bit(img), 0 if prep.foreground == "light" else 255).convert("L"))
    return _background_is_light(gray) == (prep.foreground == "light")
