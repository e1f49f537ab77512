"""validate_model: a split against one whole-model ONNX Runtime session, on the same inputs, every output
compared (Polygraphy's ``polygraphy run --onnxrt --compare``, with the split as one of the two runners).

    report = validate_model(core, model, "HETERO:OPENVINO,CPU", shapes={"x": (1, 3, 96, 96)})
    print("PASSED" if report.passed else "FAILED", report.localisation)
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ...core import Core, ModelSource
from ...errors import BenchmarkError, ValidationError
from ...graph import Model, refused_shapes, shape_text
from ...placement import device_string
from ..benchmark.inputs import check_random_data, input_sets
from ..benchmark.shapes import FilledDims, data_shapes, is_fixed
from .compare import compare_outputs
from .localise import localise
from .reference import NO_DOT_FILES
from .report import ValidationReport
from .tolerances import Tolerances


def validate_model(
    core: Core,
    model: ModelSource,
    device: str,
    *,
    config: Mapping[str, Any] | None = None,
    inputs: Sequence[Mapping[str, Any]] | None = None,
    shapes: Mapping[str, Sequence[int]] | str | None = None,
    tolerances: Tolerances | None = None,
    reference: str = "CPU",
    seed: int = 0,
    bisect: bool = False,
    int_ranges: Mapping[str, tuple[int, int]] | None = None,
) -> ValidationReport:
    """Run ``model`` split on ``device`` (``core.compile_model(model, device, config)``: its affinities,
    automatic or manual, as a compile takes them) and as one ONNX Runtime session of the whole model on
    ``reference`` (a single-device compile), on the same inputs, and compare every output.

    ``inputs``: the input sets (feed dicts, as Polygraphy's ``--load-inputs`` gives them), one iteration
    each; else one set of seeded random data (``seed``; hetero benchmark's: images 0..255, other floats
    0..1, integers within what the graph bounds them to, else 0..9; ``int_ranges``: {input: (low, high)}
    over those) of ``shapes``: {input: shape}, or a -data_shape string (``[1,3,96,96]`` or
    ``x[1,3,96,96],y[1,4]``), needed for each dynamic dimension. ``tolerances``: Polygraphy's (default:
    atol 1e-5, rtol 1e-5, elemwise). ``bisect``: on a failure, narrow the first differing subgraph down to
    a node (localise.bisect_subgraph).

    Returns a ValidationReport: passed or not, the comparisons, the inputs, both sides' outputs, the .dot
    files the split's compile wrote (where asked for), and on a failure (but one of the same infinities or
    NaNs on both sides only, ValidationReport.only_matching) where the split starts to differ
    (localise.localise; it compiles the split again for that, see there). The reference's compiles write
    no .dot files (but under OPENVINO_HETERO_VISUALIZE, which asks for every compile's). Raises ValidationError for inputs that do not fit the model, a dynamic dimension with no
    shape, or tolerances naming outputs the model lacks; as compile_model and infer otherwise
    (CompileError, InferenceError, DeviceError...). A split that differs is no error: ``passed`` is False.
    """
    if not isinstance(core, Core):
        raise ValidationError(f"core must be a hetero_cli.Core, not {type(core).__name__}")
    check_reference(reference)
    model = core.read_model(model)  # a Model as it is; a path, bytes or ModelProto read, as tune_model does
    tolerances = tolerances if tolerances is not None else Tolerances()
    check_tolerances(model, tolerances)
    output_names = [o.name for o in model.outputs]
    feeds_list = input_sets_of(model, inputs, shapes, seed, int_ranges)
    # the reference first: where .dot files are asked for, the split's are the ones left (same model name)
    whole = core.compile_model(model, reference, NO_DOT_FILES)
    split = core.compile_model(model, device, config)
    iterations = []
    outputs: list[dict[str, Any]] = []
    reference_outputs: list[dict[str, Any]] = []
    for feeds in feeds_list:
        got = _outputs(split(feeds), output_names)
        want = _outputs(whole(feeds), output_names)
        outputs.append(got)
        reference_outputs.append(want)
        iterations.append(compare_outputs(got, want, tolerances))
    passed = all(c.passed for comparisons in iterations for c in comparisons)
    report = ValidationReport(
        device=device,
        reference=reference,
        iterations=iterations,
        passed=passed,
        inputs=feeds_list,
        outputs=outputs,
        reference_outputs=reference_outputs,
        dot_files=split.dot_files,
    )
    if not passed and not report.only_matching:  # the split gives what the whole model gives: no culprit
        failed = report.failed_iteration or 0
        report.localisation = localise(
            core,
            model,
            split,
            feeds_list[failed],
            device=device,
            config=config,
            reference=reference,
            tolerances=tolerances,
            bisect=bisect,
        )
    return report


def check_tolerances(model: Model, tolerances: Tolerances) -> None:
    """ValidationError where ``tolerances`` is no Tolerances, or names outputs ``model`` does not have (a
    typo would otherwise leave an output at the default tolerance, silently)."""
    if not isinstance(tolerances, Tolerances):
        raise ValidationError(
            "tolerances must be a Tolerances (Tolerances.parse(atol=['1e-4'], ...)), not "
            f"{type(tolerances).__name__}"
        )
    names = [o.name for o in model.outputs]
    unknown = tolerances.unknown_outputs(names)
    if unknown:
        raise ValidationError(
            f"the tolerances name output(s) {', '.join(map(repr, unknown))} the model does not have: its "
            f"outputs are {', '.join(names)}"
        )


def input_sets_of(
    model: Model,
    inputs: Sequence[Mapping[str, Any]] | None,
    shapes: Mapping[str, Sequence[int]] | str | None,
    seed: int,
    int_ranges: Mapping[str, tuple[int, int]] | None = None,
) -> list[dict[str, Any]]:
    """The input sets a comparison runs on: ``inputs`` checked against the model (check_inputs), else one
    set of seeded random data of ``shapes`` and ``int_ranges`` (random_inputs). ValidationError for an
    empty list, inputs that do not fit, ``int_ranges`` beside ``inputs`` (they are for random data), or
    arguments of another kind than these."""
    _check_kinds(inputs, shapes, seed, int_ranges)
    if inputs is not None and int_ranges:
        raise ValidationError("int_ranges are the ranges of random inputs: leave them out with given inputs")
    feeds_list = (
        [check_inputs(model, feeds, k) for k, feeds in enumerate(inputs)]
        if inputs is not None
        else random_inputs(model, shapes, seed, int_ranges)
    )
    if not feeds_list:
        raise ValidationError("no input sets given: give at least one feed dict, or none for random data")
    return feeds_list


def _check_kinds(inputs: Any, shapes: Any, seed: Any, int_ranges: Any) -> None:
    """ValidationError for an argument of input_sets_of that is not of its kind (before numpy or a loop
    over it fails with its own words)."""
    if inputs is not None and (not isinstance(inputs, Sequence) or isinstance(inputs, str | bytes)):
        raise ValidationError("inputs must be a list of feed dicts ({input name: array}), one per set")
    if shapes is not None and not isinstance(shapes, str | Mapping):
        raise ValidationError(
            f"shapes must be {{input name: shape}} or a -data_shape string, not {type(shapes).__name__}"
        )
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise ValidationError(f"seed must be an integer 0 or more, not {seed!r}")
    if int_ranges is not None and not isinstance(int_ranges, Mapping):
        raise ValidationError(
            f"int_ranges must be {{input name: (low, high)}}, not {type(int_ranges).__name__}"
        )


def input_shapes(
    model: Model, shape: str | None = None, data_shape: str | None = None
) -> dict[str, tuple[int, ...]]:
    """Each input's concrete shape from benchmark_app's -shape and -data_shape (app/benchmark/shapes.py's
    grammar); ValidationError for a bad option, or a dynamic dimension neither option sets (random data of
    size 1 there would validate little: the user chooses)."""
    try:
        shapes, filled = data_shapes(model, shape, data_shape)
    except BenchmarkError as exc:
        raise ValidationError(str(exc)) from None
    check_sized(filled)
    return shapes


def check_sized(filled: Sequence[FilledDims], *, files: bool = False) -> None:
    """ValidationError naming the first input of ``filled`` (data_shapes' account) with dynamic dimensions
    that nothing gave a size (set to 1), and the -data_shape that would: a size of 1 there would check
    little, so the user chooses. ``files``: -i files were read too (they can size an input)."""
    for f in filled:
        if not f.set_to_one:
            continue
        axes = ", ".join(map(str, f.set_to_one))
        what = f"dimension {axes}" if len(f.set_to_one) == 1 else f"dimensions {axes}"
        by = "-shape, -data_shape nor an -i file" if files else "-shape nor -data_shape"
        raise ValidationError(
            f"input {f.input!r} is {f.shown()}, and neither {by} gives a size for its dynamic {what}: give "
            f"{'it' if len(f.set_to_one) == 1 else 'them'} with -shape or -data_shape (e.g. -data_shape "
            f"{f.input}{shape_text(f.shape)})"
        )


def check_random_inputs(model: Model, fix: str = "give the inputs (inputs=: a list of feed dicts)") -> None:
    """ValidationError where random data cannot be made for an input of ``model`` (strings, for one): its
    inputs must be given then, as ``fix`` (the end of the message) says."""
    try:
        check_random_data(model, {}, fix=fix)
    except BenchmarkError as exc:
        raise ValidationError(str(exc)) from None


def random_inputs(
    model: Model,
    shapes: Mapping[str, Sequence[int]] | str | None,
    seed: int,
    int_ranges: Mapping[str, tuple[int, int]] | None = None,
) -> list[dict[str, np.ndarray]]:
    """One input set of seeded random data (hetero benchmark's) of ``shapes`` ({input: shape}, or a
    -data_shape string), integers within ``int_ranges`` ({input: (low, high)}) or what the graph bounds
    them to (benchmark.int_ranges); ValidationError for an input random data cannot be made for, a shape
    that does not fit an input, a dynamic dimension without one, or a bad range."""
    check_random_inputs(model)
    if isinstance(shapes, str):
        concrete = input_shapes(model, data_shape=shapes)
    else:
        given = dict(shapes or {})
        unknown = [k for k in given if k not in {i.name for i in model.inputs}]
        if unknown:
            raise ValidationError(
                f"shapes given for unknown input(s) {', '.join(map(repr, unknown))}: the model's inputs are "
                f"{', '.join(i.name for i in model.inputs)}"
            )
        concrete = {}
        for info in model.inputs:
            dims = given.get(info.name, info.shape)
            if dims is None or not all(is_fixed(d) for d in dims):
                raise ValidationError(
                    f"input {info.name!r} is {shape_text(info.shape) if info.shape is not None else 'of unknown shape'}"
                    f": give its size with -shape or -data_shape (shapes= in the API), e.g. -data_shape "
                    f"{_example(model)}"
                )
            _check_shape(info.name, tuple(int(d) for d in dims), info.shape)
            concrete[info.name] = tuple(int(d) for d in dims)
    try:
        return input_sets(model, concrete, {}, 1, seed=seed, int_ranges=int_ranges)
    except BenchmarkError as exc:
        raise ValidationError(str(exc)) from None


def check_reference(reference: Any) -> None:
    """ValidationError for a reference that is a HETERO device string: a split too, where the reference is
    one device running the whole model (an unknown device is compile_model's DeviceError)."""
    if device_string.is_hetero(reference):
        raise ValidationError(
            f"{reference!r} is a split: the reference is one device running the whole model, e.g. CPU"
        )


def check_inputs(model: Model, feeds: Mapping[str, Any], index: int = 0) -> dict[str, Any]:
    """One given input set as the feeds of both runs: {input: numpy array}; ValidationError for a set
    that is no mapping, or an input missing, unknown, of another dtype or of a shape the model does not take,
    shapes that give a named dimension two sizes no node can take included (refused_shapes, as -shape's);
    ``index`` names the set in the message."""
    where = f"input set {index}"
    if not isinstance(feeds, Mapping):
        raise ValidationError(f"{where} is {type(feeds).__name__}, not a dict of input name -> array")
    infos = {i.name: i for i in model.inputs}
    problems = [
        f"{what} input(s) {', '.join(map(repr, names))}"
        for what, names in (
            ("unknown", [k for k in feeds if k not in infos]),
            ("missing", [k for k in infos if k not in feeds]),
        )
        if names
    ]
    if problems:
        raise ValidationError(
            f"{where} does not fit the model: {'; '.join(problems)} (the model's inputs are {', '.join(infos)})"
        )
    out = {}
    for name, value in feeds.items():
        info = infos[name]
        arr = np.asarray(value)
        if info.dtype is not None and arr.dtype != info.dtype:
            raise ValidationError(f"{where}: input {name!r} is {arr.dtype} but the model takes {info.dtype}")
        _check_shape(name, arr.shape, info.shape, where)
        out[name] = arr
    refused = refused_shapes(model, {name: arr.shape for name, arr in out.items()})
    if refused:
        raise ValidationError(f"{where}: {refused}")
    return out


def _check_shape(name: str, got: tuple[int, ...], want: Any, where: str = "") -> None:
    """ValidationError where ``got`` has another rank than the model's input, or differs in a fixed
    dimension."""
    if want is None:
        return
    if len(got) != len(want) or any(is_fixed(w) and g != w for g, w in zip(got, want, strict=False)):
        raise ValidationError(
            f"{where + ': ' if where else ''}input {name!r} has shape {shape_text(got)} but the model takes "
            f"{shape_text(want)}"
        )


def _example(model: Model) -> str:
    """A -data_shape value for the model's inputs, its dynamic dimensions set to 1 (for messages)."""
    parts = []
    for info in model.inputs:
        dims = [d if is_fixed(d) else 1 for d in (info.shape or ())]
        parts.append(f"{info.name}[{','.join(map(str, dims))}]")
    return ",".join(parts)


def _outputs(results: Mapping[str, Any], names: Sequence[str]) -> dict[str, Any]:
    """{output name: value} of an inference's Results (which also key them by port and index)."""
    return {name: results[name] for name in names}
