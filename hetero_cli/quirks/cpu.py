"""The known defects of ONNX Runtime itself and its CPU execution provider, one Quirk each, and the data
that the code acting on them reads from here."""

from __future__ import annotations

from .record import Quirk, unfixed

EP = "CPUExecutionProvider"

HALF_FLOAT_CASTS_UNRECORDED = Quirk(
    id="cpu-half-float-casts-unrecorded",
    ep=EP,
    versions_seen="onnxruntime 1.24.1, 1.25.1 and 1.26.0, onnxruntime-openvino 1.24.1",
    fixed_in="1.27.0",
    upstream="https://github.com/microsoft/onnxruntime/pull/28268",
    summary=(
        "ORT runs a node the CPU EP has no float16 kernel for through Casts it inserts, and leaves that node "
        "out of its record of which EP runs which node (session.record_ep_graph_assignment_info)"
    ),
    repro="tests/quirks/test_cpu_limits.py::test_a_float16_node_run_through_casts_is_recorded_only_where_fixed",
    hook=(
        "placement.query._optimized_claims: on an affected release, where Model.has_half_floats and a node "
        "is missing from the record, the exact probe (optimizations off) decides; placement.query._claims: "
        "a CPU probe that loads claims every node (on any release: what ORT casts for the CPU EP runs there)"
    ),
)

SPINNING_THREAD_POOLS = unfixed(
    id="cpu-spinning-thread-pools",
    ep=EP,
    versions_seen="onnxruntime 1.24.1, onnxruntime-openvino 1.24.1",
    summary=(
        "A session's intra-op threads spin after its run returns, taking the cores the next subgraph's "
        "session needs: a two-session chain ran up to twice as slow as one session. No plain-ORT repro: "
        "it shows only in timings"
    ),
    repro="",
    hook="runtime.compiler.prepare_subgraph: split sessions set session.force_spinning_stop",
)

FOLDED_IF_RANGE_SCALARS = unfixed(
    id="cpu-folded-if-range-scalars",
    ep=EP,
    versions_seen="onnxruntime 1.24.1 and 1.32.0, onnxruntime-openvino 1.24.1",
    summary=(
        "ORT's constant folding inlines the branch of an If whose condition is a constant "
        "(microsoft/onnxruntime#18105); where that branch hands a Range a one-element vector, as ONNX's own "
        "AffineGrid function body does, Range's shape inference then refuses the session ('Input to Range op "
        "should be scalars'), though its kernel runs such a vector and the same model runs where the "
        "condition is not known before a run"
    ),
    repro="tests/quirks/test_cpu_limits.py::test_a_constant_if_condition_breaks_a_range_of_one_element_vectors",
    hook=(
        "placement.export.extract: a static shape value a subgraph holds (placement.partition) from which an "
        "If's condition follows comes in as an overridable initializer, which ORT does not fold"
    ),
)

QUIRKS = (HALF_FLOAT_CASTS_UNRECORDED, SPINNING_THREAD_POOLS, FOLDED_IF_RANGE_SCALARS)

# ORT session config entry: the intra-op pool stops spinning the moment a Run returns (on again at the next
# Run); cpu-spinning-thread-pools
FORCE_SPINNING_STOP = "session.force_spinning_stop"
