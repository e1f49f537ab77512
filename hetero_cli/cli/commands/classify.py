"""``hetero classify`` (console script ``hello_classification``): classify an image and print the top
classes, in OpenVINO's hello_classification layout."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import click
import numpy as np

from ... import data
from ...app import image
from ...app.paths import file_problem
from ...errors import NotClassScoresError
from ...graph import Model, TensorInfo, shape_text
from ...runtime import counter_tables, format_counters, subgraph_summaries
from ..options import shared, shared_options
from ..output import info
from ..runner import CONTEXT, Command
from ..setup import compile_setup, prepare

BENCHMARK_HINT = (
    "This sample is an API example, for any performance measurements please use `hetero benchmark`"
)


def _positional(
    positional: Sequence[str], model: str | None, image_path: str | None, device: str | None
) -> tuple[str | None, str, str]:
    fields = {"model": model, "image": image_path, "device": device}
    rest = list(positional)
    for name in fields:
        if fields[name] is None and rest:
            fields[name] = rest.pop(0)
    if rest:
        raise click.UsageError(
            f"unexpected extra argument(s) {' '.join(rest)!r}: give MODEL IMAGE DEVICE, or -m/-i/-d"
        )
    if not fields["image"] and fields["model"] is None:
        fields["image"] = str(data.SAMPLE_IMAGE)  # the default model on its own sample: the first run
    if not fields["image"]:
        raise click.UsageError("no image given: hello_classification MODEL IMAGE DEVICE, or -i IMAGE")
    return fields["model"], str(fields["image"]), "CPU" if fields["device"] is None else fields["device"]


def read_labels(path: str | None, model: Model, model_path: Path) -> list[str] | None:
    """--labels FILE, else <model stem>.labels beside the model, else the metadata's "labels", else none;
    click.BadParameter for a --labels file that is missing or unreadable."""
    candidate = Path(path) if path else model_path.with_suffix(".labels")
    problem = file_problem(candidate)
    if path and problem:
        raise click.BadParameter(
            f"{problem}: give a text file of class names, one a line", param_hint="--labels"
        )
    if not problem:
        try:
            return [line.strip() for line in candidate.read_text(encoding="utf-8").splitlines()]
        except (OSError, UnicodeDecodeError) as exc:
            raise click.BadParameter(f"cannot read {candidate}: {exc}", param_hint="--labels") from None
    meta = image.metadata(model).get("labels")
    return [s.strip() for s in meta.split(",")] if meta else None


def top_results(probs: np.ndarray, top: int, labels: Sequence[str] | None) -> list[str]:
    """hello_classification's table: header, dashes as long as the header, one row per class (7 decimals)."""
    order = np.argsort(-probs, kind="stable")[:top]
    header = "class_id probability" + (" label" if labels else "")
    lines = [header, "-" * len(header)]
    for class_id in order:
        row = f"{class_id:<8} {probs[class_id]:.7f}"
        if labels:
            label = labels[class_id] if class_id < len(labels) else ""
            row = f"{row:<20} {label}"
        lines.append(row.rstrip())
    return lines


def check_classifier(path: Path, model: Model) -> None:
    """A usage error (NotClassScoresError), before anything runs, for a model whose outputs cannot be class
    scores as declared: several outputs, or one of strings (labels) or other non-numbers."""
    if len(model.outputs) != 1:
        raise NotClassScoresError(
            f"{path} has {len(model.outputs)} outputs: classification needs a model with one output of class "
            f"scores"
        )
    declared = model.outputs[0]
    if declared.dtype is not None and declared.dtype.kind not in "biuf":
        raise NotClassScoresError(_not_scores(path, declared.name, _kind_text(declared.dtype, None)))


def class_scores(path: Path, declared: TensorInfo, output: Any) -> np.ndarray:
    """The first image's class scores in the model's output, flattened to float64; a usage error
    (NotClassScoresError) when the output is no numbers (strings, maps) or is empty, which only the
    inference may show."""
    try:
        scores = np.asarray(output)
    except ValueError:  # ragged sequences
        raise NotClassScoresError(_not_scores(path, declared.name, "a ragged sequence")) from None
    if scores.dtype.kind not in "biuf":
        first = scores.flat[0] if scores.size else None
        raise NotClassScoresError(_not_scores(path, declared.name, _kind_text(scores.dtype, first)))
    scores = scores[0] if scores.ndim >= 2 and len(scores) else scores
    if scores.size == 0:
        raise NotClassScoresError(
            _not_scores(path, declared.name, f"no values (shape {shape_text(np.shape(output))})")
        )
    return scores.reshape(-1).astype(np.float64)


def _kind_text(dtype: np.dtype, first: Any) -> str:
    """What an output holds, for a message: strings, maps, or its numpy type."""
    if dtype.kind in "US" or (dtype.kind == "O" and (first is None or isinstance(first, str | bytes))):
        return "strings"
    if isinstance(first, Mapping):
        return "maps"
    return f"values of type {dtype}"


def _not_scores(path: Path, name: str, what: str) -> str:
    return (
        f"{path}'s output {name!r} holds {what}, not numeric class scores: classification needs a model whose one "
        f"output holds a score per class (hetero benchmark runs any model)"
    )


@click.command(
    cls=Command,
    context_settings=CONTEXT,
    short_help="Classify an image, like OpenVINO's hello_classification.",
)
@click.argument("positional", nargs=-1, metavar="[MODEL] [IMAGE] [DEVICE]")
@click.option("-m", "--model", "model", metavar="MODEL", help="ONNX model (default: models/digits.onnx).")
@click.option(
    "-i",
    "--image",
    "image_path",
    metavar="IMAGE",
    help="Image file: JPEG, PNG, BMP... (default, with the default model only: its sample image of a 3).",
)
@click.option(
    "-d", "--device", metavar="DEVICE", help="CPU, OPENVINO, GPU or HETERO:<dev>,<dev>,... (default CPU)."
)
@click.option(
    "--labels", metavar="FILE", help="Class names, one a line (default: <model>.labels beside the model)."
)
@click.option(
    "-nt", "--top", type=click.IntRange(min=1), default=10, show_default=True, help="How many classes."
)
@click.option(
    "-pc", "--perf-counts", "perf_counts", is_flag=True, help="Print per-subgraph performance counters."
)
@click.option(
    "--mean", metavar="V[,V,V]", help="Subtract from pixel values 0..255 (overrides the model's metadata)."
)
@click.option("--scale", metavar="V[,V,V]", help="Then divide by this (overrides the model's metadata).")
@click.option("--layout", type=click.Choice(["NCHW", "NHWC"], case_sensitive=False), help="Input layout.")
@click.option(
    "--color", type=click.Choice(["GRAY", "RGB", "BGR"], case_sensitive=False), help="Channel order."
)
@click.option(
    "--invert/--no-invert", default=None, help="Invert the image (default: as the model's metadata wants)."
)
@shared_options
def classify(
    positional: tuple[str, ...],
    model: str | None,
    image_path: str | None,
    device: str | None,
    labels: str | None,
    top: int,
    perf_counts: bool,
    mean: str | None,
    scale: str | None,
    layout: str | None,
    color: str | None,
    invert: bool | None,
    **options: Any,
) -> None:
    """Classify IMAGE with MODEL on DEVICE and print the top classes, like OpenVINO's hello_classification.

    \b
      hello_classification models/digits.onnx samples/images/digit_3.png HETERO:GPU,CPU
      hello_classification -m models/digits.onnx -i samples/images/digit_3.png -d HETERO:GPU,OPENVINO,CPU -pc
      hello_classification squeezenet.onnx cat.jpg CPU --color bgr --mean 104,117,123

    \b
    3-channel images are fed in RGB order unless --color (or the model's metadata) says otherwise: OpenVINO's
    sample reads them with OpenCV, in BGR order, which Caffe and Open Model Zoo models expect.
    """
    model_arg, image_arg, device_arg = _positional(positional, model, image_path, device)
    info("Creating hetero-cli Core")
    setup = prepare(model_arg, device_arg, perf_count=perf_counts, **shared(options))
    prep = image.preprocessing(setup.model, mean=mean, scale=scale, layout=layout, color=color, invert=invert)
    picture = image.read(image_arg)
    tensor = image.to_tensor(picture, prep)
    names = read_labels(labels, setup.model, setup.model_path)
    check_classifier(setup.model_path, setup.model)
    note = ", inverted" if image.inverted(picture, prep) else ""
    if prep.color in ("RGB", "BGR") and color is None:
        info(
            f"Channel order: {prep.color} (--color rgb|bgr sets it); OpenVINO's hello_classification reads "
            "images with OpenCV, in BGR order: a Caffe or Open Model Zoo model wants --color bgr"
        )
    info(f"Preprocessing: {picture.width}x{picture.height} {picture.mode} -> {prep.describe()}{note}")
    info(f"Loading the model to {setup.device}")
    compiled = compile_setup(setup)
    info("Starting inference in synchronous mode")
    request = compiled.create_infer_request()
    if perf_counts:
        request.infer({prep.input.name: tensor})  # warm-up: the counters below are a second, warm run
    results = request.infer({prep.input.name: tensor})
    probs = class_scores(setup.model_path, setup.model.outputs[0], next(iter(results.values())))
    info(f"Image path: {image_arg}")
    info(f"Top {min(top, probs.size)} results:")
    for line in top_results(probs, top, names):
        info(line)
    info()
    if perf_counts:
        info("Performance counters (of a second inference; the first one warmed up):")
        infos = request.get_profiling_info()
        click.echo(format_counters(infos))
        click.echo(counter_tables(infos, subgraph_summaries(compiled.subgraphs)))
        info()
    info(BENCHMARK_HINT)
