"""Per-device configuration (the doc's ov::device::properties): each device gets its own settings.

python samples/device_properties.py [model.onnx]
"""

import sys

from _example_model import check, model_source, print_subgraphs, random_inputs

import hetero_cli
import hetero_cli.device as device
import hetero_cli.hint as hints
import hetero_cli.properties as properties

core = hetero_cli.Core()
model = core.read_model(model_source(sys.argv))
inputs = random_inputs(model)

core.set_property("HETERO", {device.priorities: "GPU,CPU"})
core.set_property("GPU", {properties.enable_profiling: True})
core.set_property("CPU", {hints.inference_precision: hetero_cli.Type.f32})
compiled_model = core.compile_model(model=model, device_name="HETERO")
print_subgraphs(compiled_model)
check(model, inputs, compiled_model.create_infer_request().infer(inputs))

# The same with OpenVINO in the list: profiling and two threads for it only.
core.set_property("HETERO", {device.priorities: "GPU,OPENVINO,CPU"})
core.set_property("OPENVINO", {properties.enable_profiling: True, properties.inference_num_threads: 2})
compiled_model = core.compile_model(model=model, device_name="HETERO")
print_subgraphs(compiled_model)
request = compiled_model.create_infer_request()
check(model, inputs, request.infer(inputs))
for counter in request.get_profiling_info():
    print(f"  subgraph{counter.subgraph}: {counter.node_name} {counter.status} {counter.real_time_us} us")
