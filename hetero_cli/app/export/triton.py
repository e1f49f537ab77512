"""A split as a Triton Inference Server model repository: one ``onnxruntime_onnx`` model per subgraph,
on the device its plan names, and an ensemble named after the model that wires them as the plan's links
do, with the model's own input and output names.

    repo/
      digits/config.pbtxt                  platform: "ensemble", ensemble_scheduling { step [...] }
      digits/1/                            (empty: Triton wants a version folder for an ensemble too)
      digits_1_OPENVINO/config.pbtxt       KIND_CPU with the "openvino" cpu_execution_accelerator
      digits_1_OPENVINO/1/model.onnx       the subgraph, its weights inside
      digits_2_CPU/...

The configs are written in protobuf's text format, as model_config.proto (shipped in the tritonclient
wheel) describes them; the tests parse every one with it.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path

import onnx

from ...errors import ExportError
from .folder import save_onnx
from .members import Member, Split, TensorSpec

log = logging.getLogger("hetero_cli")

#: onnx.TensorProto element type -> Triton's DataType
DATATYPES = {
    onnx.TensorProto.BOOL: "TYPE_BOOL",
    onnx.TensorProto.UINT8: "TYPE_UINT8",
    onnx.TensorProto.UINT16: "TYPE_UINT16",
    onnx.TensorProto.UINT32: "TYPE_UINT32",
    onnx.TensorProto.UINT64: "TYPE_UINT64",
    onnx.TensorProto.INT8: "TYPE_INT8",
    onnx.TensorProto.INT16: "TYPE_INT16",
    onnx.TensorProto.INT32: "TYPE_INT32",
    onnx.TensorProto.INT64: "TYPE_INT64",
    onnx.TensorProto.FLOAT16: "TYPE_FP16",
    onnx.TensorProto.FLOAT: "TYPE_FP32",
    onnx.TensorProto.DOUBLE: "TYPE_FP64",
    onnx.TensorProto.STRING: "TYPE_STRING",
    onnx.TensorProto.BFLOAT16: "TYPE_BF16",
}

#: what each device family runs on in Triton's onnxruntime backend: (instance kind, accelerator block)
_CPU_OPENVINO = (
    'optimization { execution_accelerators { cpu_execution_accelerator: [{ name: "openvino" }] } }'
)
_GPU_TENSORRT = (
    'optimization { execution_accelerators { gpu_execution_accelerator: [{ name: "tensorrt" }] } }'
)


def member_name(split: Split, member: Member) -> str:
    """The Triton model name of one subgraph: ``<model>_<N>_<device>`` (N from 1, as subgraph<N>)."""
    device = member.device.name.replace(".", "_")
    return f"{split.name}_{member.index + 1}_{device}"


def write_repository(split: Split, folder: Path) -> list[Path]:
    """Write ``split`` as a Triton model repository into ``folder`` (which exists and is empty); returns
    the files written. Raises ExportError where Triton cannot take the split as it is: a tensor of no
    Triton datatype, or a model output no subgraph computes."""
    _check_outputs(split)
    written = []
    for member in split.members:
        name = member_name(split, member)
        version = folder / name / "1"
        version.mkdir(parents=True)
        written.append(save_onnx(member.model(), version / "model.onnx"))
        written.append(_write(folder / name / "config.pbtxt", member_config(split, member)))
    (folder / split.name / "1").mkdir(parents=True)
    written.append(_write(folder / split.name / "config.pbtxt", ensemble_config(split)))
    return written


def member_config(split: Split, member: Member) -> str:
    """config.pbtxt of one subgraph's model: the onnxruntime backend, its tensors, its device."""
    lines = [
        f"name: {quote(member_name(split, member))}",
        'platform: "onnxruntime_onnx"',
        "max_batch_size: 0",
        *_tensors("input", member.inputs),
        *_tensors("output", member.outputs),
        *_device_lines(member),
    ]
    return "\n".join(lines) + "\n"


def ensemble_config(split: Split) -> str:
    """config.pbtxt of the ensemble: the model's inputs and outputs, one step per subgraph in execution
    order, each mapping its model's tensor names to the ensemble's (which are the model's own names: a
    tensor keeps its name from the subgraph that makes it to those that read it)."""
    steps = []
    for member in split.members:
        maps = [
            *(f"      input_map {{ key: {quote(t.name)} value: {quote(t.name)} }}" for t in member.inputs),
            *(f"      output_map {{ key: {quote(t.name)} value: {quote(t.name)} }}" for t in member.outputs),
        ]
        steps.append(
            "    {\n"
            f"      model_name: {quote(member_name(split, member))}\n"
            "      model_version: -1\n" + "\n".join(maps) + "\n    }"
        )
    lines = [
        f"name: {quote(split.name)}",
        'platform: "ensemble"',
        "max_batch_size: 0",
        *_tensors("input", split.inputs, member=False),
        *_tensors("output", split.outputs, member=False),
        "ensemble_scheduling {",
        "  step [",
        ",\n".join(steps),
        "  ]",
        "}",
    ]
    return "\n".join(lines) + "\n"


def quote(text: str) -> str:
    """``text`` as a protobuf text-format string: in double quotes, backslash, quote and control
    characters escaped (octal), anything else as it is (UTF-8)."""
    out = []
    for ch in text:
        if ch in '"\\':
            out.append("\\" + ch)
        elif ord(ch) < 32 or ord(ch) == 127:
            out.append(f"\\{ord(ch):03o}")
        else:
            out.append(ch)
    return '"' + "".join(out) + '"'


def _tensors(kind: str, specs: Sequence[TensorSpec], *, member: bool = True) -> list[str]:
    """``input [ {...}, ... ]`` (or output) for ``specs``: name, Triton datatype, dims (-1 for dynamic).
    A scalar is dims [1] (dims may not be empty), which a ``member`` reshapes to [] for its model; the
    ensemble's own scalars stay [1], the shape Triton checks its steps' dims against."""
    if not specs:
        return []
    entries = []
    for spec in specs:
        data_type = datatype(spec)
        dims = _dims(spec)
        reshape = " reshape: { shape: [ ] }" if not dims and member else ""
        entries.append(
            f"  {{ name: {quote(spec.name)} data_type: {data_type} "
            f"dims: [ {', '.join(str(d) for d in dims or [1])} ]{reshape} }}"
        )
    return [f"{kind} [", ",\n".join(entries), "]"]


def datatype(spec: TensorSpec) -> str:
    """Triton's DataType of ``spec``; ExportError for a value no Triton datatype holds."""
    if spec.kind != "tensor":
        raise ExportError(
            f"tensor {spec.name!r} is a {spec.kind}, not a tensor: Triton's onnxruntime backend passes "
            "tensors only; --format onnx writes such a split (its manifest records the type)"
        )
    found = DATATYPES.get(spec.elem_type)
    if found is None:
        raise ExportError(
            f"tensor {spec.name!r} is {onnx.TensorProto.DataType.Name(spec.elem_type)}, which Triton has no "
            "datatype for: --format onnx writes such a split"
        )
    return found


def _dims(spec: TensorSpec) -> list[int]:
    if spec.dims is None:
        raise ExportError(
            f"tensor {spec.name!r} has no known rank, which a Triton config needs: give the model a "
            "declared shape for it (or use --format onnx)"
        )
    return [d if isinstance(d, int) and d >= 0 else -1 for d in spec.dims]


def _device_lines(member: Member) -> list[str]:
    """The instance group (and accelerator) of ``member``'s device, as Triton's onnxruntime backend
    runs it: CPU and OPENVINO on KIND_CPU (OpenVINO as the CPU accelerator), GPU (CUDA) and TENSORRT on
    KIND_GPU with the device's index (TensorRT as the GPU accelerator)."""
    device = member.device
    family = device.kind.family
    if family in ("GPU", "TENSORRT"):
        index = int(device.provider_options.get("device_id", "0"))
        lines = [f"instance_group [ {{ count: 1, kind: KIND_GPU, gpus: [ {index} ] }} ]"]
        return [*lines, _GPU_TENSORRT] if family == "TENSORRT" else lines
    lines = ["instance_group [ { count: 1, kind: KIND_CPU } ]"]
    if family != "OPENVINO":
        return lines
    target = device.provider_options.get("device_type", "CPU")
    if target != "CPU":
        log.warning(
            "%s runs on %s here, but Triton's onnxruntime backend runs its OpenVINO accelerator on the CPU: "
            "%s is written as KIND_CPU with the openvino accelerator",
            member.label,
            device.name,
            member.label,
        )
    return [*lines, _CPU_OPENVINO]


def _check_outputs(split: Split) -> None:
    """ExportError for a model output no step computes (the model's input or a constant, which hetero-cli
    serves without a session): an ensemble's outputs come from its steps."""
    for name, source in split.sources.items():
        if not isinstance(source, int):
            raise ExportError(
                f"the model's output {name!r} is its {source}, served without a session: a Triton ensemble "
                "takes its outputs from its steps only; --format onnx writes this split (its manifest "
                "records where the output comes from)"
            )


def _write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path
