"""PERFORMANCE_HINT: one session for a split (LATENCY, the default) or one per subgraph (THROUGHPUT).

    python samples/performance_hint.py [model.onnx]

Under LATENCY an automatic split whose every node the query's probe session placed as the plan does runs
in that one session (ONNX Runtime's own split of the model); THROUGHPUT gives each subgraph its own
session, the pipeline stages that asynchronous requests overlap on. Both give the model's results.
"""

import sys

from _example_model import check, model_source, random_inputs

import hetero_cli
import hetero_cli.hint as hints

core = hetero_cli.Core()
model = core.read_model(model_source(sys.argv))
inputs = random_inputs(model)

for mode in (hints.PerformanceMode.LATENCY, hints.PerformanceMode.THROUGHPUT):
    compiled = core.compile_model(model, "HETERO:GPU,OPENVINO,CPU", {hints.performance_mode: mode})
    print(
        f"{mode}: {len(compiled.subgraphs)} subgraph(s) on {', '.join(compiled.execution_devices)} in "
        f"{len(compiled.runs)} ONNX Runtime session(s); "
        f"OPTIMAL_NUMBER_OF_INFER_REQUESTS {compiled.get_property('OPTIMAL_NUMBER_OF_INFER_REQUESTS')}"
    )
    results: dict = {}
    queue = hetero_cli.AsyncInferQueue(compiled)  # jobs=0: OPTIMAL_NUMBER_OF_INFER_REQUESTS requests
    queue.set_callback(lambda request, userdata: userdata.update(request.results))
    queue.start_async(inputs, userdata=results)
    queue.wait_all()
    check(model, inputs, results)
