"""Automatic and manual together: query_model, fix one op by hand, set every affinity, compile.

python samples/query_then_fix.py [model.onnx]
"""

import sys

from _example_model import check, model_source, print_subgraphs, random_inputs

import hetero_cli

core = hetero_cli.Core()
model = core.read_model(model_source(sys.argv))
inputs = random_inputs(model)

# The doc uses "HETERO:GPU,CPU"; OPENVINO in the middle gives this machine a real choice.
device = "HETERO:GPU,OPENVINO,CPU"

# query_model result contains mapping of supported operations to devices
supported_ops = core.query_model(model, device)
print("query_model:", supported_ops)

# update default affinities manually for specific operations: here the last op not on CPU goes to CPU
moved = [name for name, dev in supported_ops.items() if dev != "CPU"][-1:]
for operation_name in moved:
    supported_ops[operation_name] = "CPU"
    print(f"moved {operation_name} to CPU by hand")

# set affinities to a model (the doc's Python snippet sets "CPU" here; the C++ one, rightly, the map's value)
for node in model.get_ops():
    affinity = supported_ops[node.get_friendly_name()]
    node.get_rt_info()["affinity"] = affinity

# load model with manually set affinities
compiled_model = core.compile_model(model, device)
print_subgraphs(compiled_model)
check(model, inputs, compiled_model.create_infer_request().infer(inputs))
