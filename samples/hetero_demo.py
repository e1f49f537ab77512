"""The engine's demo: split a real model across this machine's devices and check it (`make demo` runs
hello_classification; this is the library-level walk-through).

    python samples/hetero_demo.py [model.onnx]

Without an argument it runs models/digits.onnx (or, if that is missing, the SqueezeNet that ships in
the onnx wheel). It compiles the model twice - automatic HETERO:GPU,OPENVINO,CPU, then a forced split
with the last third of the ops pinned to CPU - prints each plan, runs one seeded random input through
it, and compares the outputs with one plain onnxruntime session over the whole model.
"""

import sys
from pathlib import Path

import onnx
from _example_model import check, random_inputs

import hetero_cli

DEVICE = "HETERO:GPU,OPENVINO,CPU"


def default_model() -> Path:
    digits = Path(__file__).resolve().parent.parent / "models" / "digits.onnx"
    if digits.exists():
        return digits
    return Path(onnx.__file__).parent / "backend" / "test" / "data" / "light" / "light_squeezenet.onnx"


def show(title: str, compiled: hetero_cli.CompiledModel, model: hetero_cli.Model) -> None:
    print(f"== {title}")
    print(compiled.plan)
    for s in compiled.subgraphs:
        print(f"  {s.description}")
    inputs = random_inputs(model, seed=0)
    results = compiled.create_infer_request().infer(inputs)
    for name, value in results.items():
        print(f"  output {name}: shape {value.shape}, argmax {int(value.argmax())}")
    check(model, inputs, results)


def main() -> None:
    path = Path(sys.argv[1]) if len(sys.argv) > 1 else default_model()
    core = hetero_cli.Core()
    print(f"model {path}; devices available here: {', '.join(core.available_devices)}")
    model = core.read_model(path)

    show(f"automatic {DEVICE}", core.compile_model(model, DEVICE), model)

    affinities = core.query_model(model, DEVICE)
    ops = model.get_ops()
    for op in ops[len(ops) - len(ops) // 3 :]:
        affinities[op.get_friendly_name()] = "CPU"
    for op in ops:
        op.get_rt_info()["affinity"] = affinities[op.get_friendly_name()]
    show(
        f"forced split (last {len(ops) // 3} of {len(ops)} ops pinned to CPU)",
        core.compile_model(model, DEVICE),
        model,
    )


if __name__ == "__main__":
    main()
