"""HETERO_CONCURRENCY: the branches of one inference at the same time, each on its share of the cores.

    python samples/concurrent_branches.py [model.onnx]

The default model has two branches that meet only at its input (x -> Relu -> Abs and x -> Neg -> Exp).
Under the default (AUTO) HETERO:CPU keeps OpenVINO's rule, one subgraph for the connected CPU nodes;
CONCURRENT cuts branches apart (at the input, or between a fork and its join inside the model), runs the
CPU sessions side by side, and the timeline of a profiled inference says when each ran. Every mode gives
the model's results.
"""

import sys

from _example_model import check, random_inputs
from onnx import TensorProto
from onnx import helper as h

import hetero_cli
from hetero_cli.runtime import counter_tables, subgraph_summaries


def two_branches():
    """x[64, 256] -> Relu -> Abs -> a, and x -> Neg -> Exp -> b."""
    nodes = [
        h.make_node("Relu", ["x"], ["r"], name="relu"),
        h.make_node("Abs", ["r"], ["a"], name="abs"),
        h.make_node("Neg", ["x"], ["m"], name="neg"),
        h.make_node("Exp", ["m"], ["b"], name="exp"),
    ]
    value = lambda name: h.make_tensor_value_info(name, TensorProto.FLOAT, [64, 256])  # noqa: E731
    graph = h.make_graph(nodes, "two_branches", [value("x")], [value("a"), value("b")])
    return h.make_model(graph, ir_version=9, opset_imports=[h.make_opsetid("", 17)])


core = hetero_cli.Core()
model = core.read_model(sys.argv[1] if len(sys.argv) > 1 else two_branches())
inputs = random_inputs(model)
for mode in ("AUTO", "CONCURRENT"):
    config = {"HETERO_CONCURRENCY": mode, "PERF_COUNT": "YES"}
    compiled = core.compile_model(model, "HETERO:CPU", config)
    print(f"{mode}: {len(compiled.subgraphs)} subgraph(s); {compiled.schedule.describe()}")
    request = compiled.create_infer_request()
    results = request.infer(inputs)
    timeline = request.get_timeline()
    if len(timeline.spans) > 1:  # the last line of -pc's timeline: the wall time against the sum
        summaries = subgraph_summaries(compiled.subgraphs)
        tables = counter_tables(request.get_profiling_info(), summaries, timeline=timeline)
        print(" ", tables.splitlines()[-1].strip())
    check(model, inputs, results)
