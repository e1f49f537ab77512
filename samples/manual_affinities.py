"""Manual mode: set rt_info["affinity"] on every op, and HETERO splits exactly there.

    python samples/manual_affinities.py [model.onnx]

Once any op has an affinity, automatic mode is off: every op needs one.
"""

import sys

from _example_model import check, model_source, print_subgraphs, random_inputs

import hetero_cli

core = hetero_cli.Core()
model = core.read_model(model_source(sys.argv))
inputs = random_inputs(model)

# The doc's snippet: everything on CPU.
for op in model.get_ops():
    rt_info = op.get_rt_info()
    rt_info["affinity"] = "CPU"
compiled_model = core.compile_model(model, "HETERO:GPU,CPU")
print_subgraphs(compiled_model)
check(model, inputs, compiled_model.create_infer_request().infer(inputs))

# A forced split: the first half of the ops on OpenVINO (if this machine has it), the rest on CPU.
accelerator = "OPENVINO" if "OPENVINO" in core.available_devices else "CPU"
ops = model.get_ops()
for i, op in enumerate(ops):
    op.get_rt_info()["affinity"] = accelerator if i < len(ops) // 2 else "CPU"
compiled_model = core.compile_model(model, "HETERO:OPENVINO,CPU")
print_subgraphs(compiled_model)
check(model, inputs, compiled_model.create_infer_request().infer(inputs))
