"""Automatic mode: HETERO gives every op to the first device, in priority order, that supports it.

    python samples/automatic_mode.py [model.onnx]

The doc's snippets with hetero_cli in place of openvino. GPU (CUDA) is skipped with a warning on a
machine without one, so HETERO:GPU,OPENVINO,CPU splits between OPENVINO and CPU here (the OpenVINO EP
refuses Hardmax).
"""

import sys

from _example_model import check, model_source, print_subgraphs, random_inputs

import hetero_cli
import hetero_cli.device as device

core = hetero_cli.Core()
model = core.read_model(model_source(sys.argv))
inputs = random_inputs(model)

compiled_model = core.compile_model(model, device_name="HETERO:GPU,CPU")
print_subgraphs(compiled_model)
check(model, inputs, compiled_model.create_infer_request().infer(inputs))

# device priorities via configuration property
compiled_model = core.compile_model(model, device_name="HETERO", config={device.priorities: "GPU,CPU"})
print_subgraphs(compiled_model)
check(model, inputs, compiled_model.create_infer_request().infer(inputs))

# a real split on this machine: OpenVINO first, CPU for the ops the OpenVINO EP refuses
compiled_model = core.compile_model(model, "HETERO:GPU,OPENVINO,CPU")
print_subgraphs(compiled_model)
results = compiled_model.create_infer_request().infer(inputs)
for name, value in results.items():
    print(f"  {name}: shape {value.shape}, first values {value.ravel()[:4]}")
check(model, inputs, results)
