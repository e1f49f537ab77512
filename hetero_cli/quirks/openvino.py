"""The known defects of ONNX Runtime's OpenVINO execution provider, one Quirk each, and the data that the
code acting on them reads from here."""

from __future__ import annotations

from functools import partial

from .record import unfixed

EP = "OpenVINOExecutionProvider"
SEEN = "onnxruntime-openvino 1.24.1 (OpenVINO 2025.4.1)"
_TESTS = "tests/quirks/test_openvino_limits.py::"
# a quirk of the EP seen with SEEN, not reported and not fixed, unless its record says otherwise
_openvino = partial(unfixed, ep=EP, versions_seen=SEEN)

OUTER_SCOPE_LOOP = _openvino(
    id="openvino-outer-scope-loop",
    summary=(
        "ONNX Runtime's OpenVINO execution provider cannot compile a Loop or Scan whose body reads values "
        "from outside it (it fails, or aborts the process when the body holds an If)"
    ),
    repro=_TESTS + "test_openvino_cannot_compile_a_loop_whose_body_reads_an_outer_value",
    hook=(
        "placement.known_failures.known_to_fail: such nodes are never probed on the EP; "
        "runtime.compiler.refuse_known_failures: a CompileError before ORT tries"
    ),
    ops=frozenset({"Loop", "Scan"}),
    outer_scope_only=True,
)

LOOP_BODY_PARTITIONED = _openvino(
    id="openvino-loop-body-partitioned",
    summary=(
        "ONNX Runtime's OpenVINO execution provider cannot compile any Loop: it claims the nodes of the "
        "Loop's body as a subgraph of its own, then claims the Loop and cannot read the body it left ('OpenVINO "
        "does not support the following ONNX operations: com.intel.ai.OpenVINO-EP-subgraph_1'), so a whole "
        "model holding a Loop fails to load"
    ),
    repro=_TESTS + "test_openvino_cannot_compile_a_loop_whose_body_it_partitioned",
    hook=(
        "placement.known_failures.known_to_fail: a Loop is never probed on the EP (the query probes the rest once "
        "instead of bisecting the failing model); runtime.compiler.refuse_known_failures: a CompileError "
        "before ORT tries"
    ),
    ops=frozenset({"Loop"}),
)

LSTM_PEEPHOLES = _openvino(
    id="openvino-lstm-peepholes",
    versions_seen=SEEN + "; native OpenVINO 2026.4.1",
    summary=(
        "An LSTM given peephole weights (its input P) runs as if they were zero: silently wrong outputs "
        "(madmom's beat tracker: bench/concurrency_real.py records them thousands off the CPU EP's)"
    ),
    repro=_TESTS + "test_openvino_runs_an_lstm_as_if_its_peepholes_were_zero",
    hook=(
        "placement.known_failures.known_to_fail: such LSTMs are never probed on the EP (they run on CPU); "
        "runtime.compiler.refuse_known_failures: a CompileError where affinities put one there"
    ),
    ops=frozenset({"LSTM"}),
    given_input=7,
)

LONE_INPUT_VARIADIC = _openvino(
    id="openvino-lone-input-variadic",
    summary=(
        "A Max, Min or Sum given one input, reading a graph input and making a graph output, answers "
        "uninitialized memory: OpenVINO's ONNX reader folds the node away and names the input after the "
        "output, so the EP never feeds it (native OpenVINO 2026.4.1 fed by index is right)"
    ),
    repro=_TESTS + "test_openvino_answers_garbage_for_a_max_of_one_input",
    hook=(
        "placement.known_failures.known_to_fail: such nodes are never probed on the EP (they run on CPU); "
        "runtime.compiler.refuse_known_failures: a CompileError where affinities put one there"
    ),
    ops=frozenset({"Max", "Min", "Sum"}),
    lone_input=True,
)

EMPTY_TENSOR = _openvino(
    id="openvino-empty-tensor",
    upstream="https://github.com/openvinotoolkit/openvino/issues/37963",
    summary=(
        "A tensor with a 0 dimension comes out of the EP with each 0 made 1 (OpenVINO makes zero-sized "
        "constants size 1): nothing tells it from a real tensor of size 1"
    ),
    repro=_TESTS + "test_an_empty_tensor_comes_out_of_openvino_with_each_0_made_1",
    hook="none: documented (keep the nodes making empty tensors, and their consumers, on CPU)",
)

CEIL_MODE_POOL = _openvino(
    id="openvino-ceil-mode-pool",
    summary=(
        "A pool with ceil_mode keeps a last window that would start past the end of the input (as onnx's "
        "shape rule does) where ORT's CPU kernel drops it (as PyTorch does): another output length"
    ),
    repro=_TESTS + "test_openvino_keeps_a_ceil_mode_pools_last_window_the_cpu_ep_drops",
    hook=(
        "none: documented (pin such pools to CPU); runtime.replacing.relaxed compiles again "
        "where a split's CPU pool contradicts the declared shape"
    ),
)

DECLARED_SHAPE_IN_SPLIT = _openvino(
    id="openvino-declared-shape-in-split",
    summary=(
        "Where ORT splits one session between the OpenVINO EP and the CPU EP, the OpenVINO EP hands a "
        "tensor over in the shape the model's value_info declares: a wrong value_info cuts a batch, silently"
    ),
    repro=_TESTS + "test_a_value_info_lie_cuts_a_batch_inside_orts_own_openvino_cpu_split",
    hook=(
        "runtime.one_session.whole_plan_probe asks runtime.type_repair.vetoes_one_session: no one session where "
        "inference contradicts a shape declared between the EP's part and the CPU EP's"
    ),
)

CPU_PRECISION = _openvino(
    id="openvino-cpu-precision",
    summary=(
        "On OpenVINO's CPU device the EP takes precision FP32 or ACCURACY only; for another (FP16) ORT drops "
        "the EP from the session ('Unsupported inference precision is selected') and runs on CPU alone"
    ),
    repro=_TESTS + "test_openvino_on_its_cpu_device_drops_the_ep_for_fp16",
    hook="placement.config._check_openvino_precision: a ConfigError when such a precision is set",
)

FOLDS_OVERRIDABLE_INITIALIZERS = _openvino(
    id="openvino-folds-overridable-initializers",
    summary=(
        "The EP builds initializers into what it compiles, overridable ones (also listed among the graph "
        "inputs) too: a value fed for one is ignored, silently"
    ),
    repro=_TESTS + "test_openvino_ignores_a_value_fed_for_an_overridable_initializer",
    hook=(
        "placement.devices (DeviceKind.folds_initializers) and placement.export.fed_initializers: such "
        "initializers become inputs of the subgraph's session; no probe reuse, no one session"
    ),
)

INITIALIZER_OUTPUT = _openvino(
    id="openvino-initializer-output",
    summary=(
        "The EP refuses a model with an initializer among its graph outputs ('<name> node not found in "
        "graph cache')"
    ),
    repro=_TESTS + "test_openvino_refuses_an_initializer_as_a_graph_output",
    hook=(
        "runtime.compiler._is_whole_model: a model with such an output is never loaded from its file; the "
        "exported subgraph leaves the initializer out (served without a session)"
    ),
)

CYCLIC_SPLIT = _openvino(
    id="openvino-cyclic-split",
    summary=(
        "The EP can take nodes on both sides of one it leaves to the CPU EP; ORT then refuses the valid "
        "model as invalid ('the graph is not acyclic')"
    ),
    repro=_TESTS + "test_openvino_taking_nodes_around_one_it_refuses_makes_a_cycle",
    hook=(
        "runtime.compiler._loads_on_cpu: a CompileError naming the nodes to move, not a ModelError blaming "
        "the model, where the CPU EP alone loads the subgraph"
    ),
)

COLON_EXTERNAL_DATA = _openvino(
    id="openvino-colon-external-data",
    summary=(
        "The EP cannot read external data at a location with a ':' in it (it reads 'm:x.bin' as 'x.bin'); "
        "ORT's CPU EP reads it"
    ),
    repro=_TESTS + "test_openvino_cannot_read_external_data_at_a_location_with_a_colon",
    hook=(
        "graph.weights.referable, asked by Weights.reference and by an import's weight pool: such a file's "
        "weights are read into memory (graph imports no quirks: it cites this id)"
    ),
)

THREAD_COUNTS = _openvino(
    id="openvino-thread-counts",
    summary=(
        "The EP's num_of_threads and num_streams quietly mean 1 for 0 or less, and fail beyond a C int. "
        "No plain-ORT repro: a thread count shows only in timings"
    ),
    repro="",
    hook=(
        "placement.config._threads: INFERENCE_NUM_THREADS=0 leaves num_of_threads out (the EP's default); "
        "placement.config.COUNT_OPTIONS: num_of_threads or num_streams outside 1..MAX_THREADS is a ConfigError"
    ),
)

_FALLBACK_HOOK = (
    "runtime.fallback: with HETERO_FALLBACK (the default in automatic mode) the subgraph moves to the next "
    "device that supports its nodes, and the warning cites this id"
)

INPUT_ORDER = _openvino(
    id="openvino-input-order",
    summary=(
        "Given a graph whose inputs are an int64 piece of a shape and a float [?,200,1,1] tensor, in this "
        "order (Concat -> Reshape -> MatMul -> Add -> Softmax), the EP feeds them to what it compiled in the wrong "
        "order at run time ('Can't set the input tensor with index: 0, because the model input (shape="
        "[?,200,1,1]) and the tensor (shape=(1)) are incompatible'), in one plain ORT session too"
    ),
    repro=_TESTS + "test_openvino_feeds_a_shape_piece_and_a_tensor_in_the_wrong_order",
    hook=_FALLBACK_HOOK,
    signature="Can't set the input tensor with index",
)

SHAPE_OF_OUTPUT = _openvino(
    id="openvino-shape-of-output",
    summary=(
        "Where a tensor of static shape and ConstantOfShape(Shape(that tensor)) are both graph outputs, the "
        "EP folds the second into a constant and then cannot find it ('<name> node not found in graph "
        "cache'): the session is never created"
    ),
    repro=_TESTS + "test_openvino_loses_a_folded_constant_of_shape_beside_its_source",
    hook=_FALLBACK_HOOK,
    signature="node not found in graph cache",
)

STALE_AFTER_FAILURE = _openvino(
    id="openvino-stale-output-after-failure",
    summary=(
        "After a run fails inside the EP (a Reshape to a shape its input cannot take), the same inputs a "
        "second time pass: the EP reshapes to the last shape that succeeded, and no error says so"
    ),
    repro=_TESTS + "test_openvino_answers_a_failed_input_again_with_the_last_outputs",
    hook=(
        "runtime.recovery.recover: the unbound rerun of a failed pre-bound run counts as a success "
        "only where its outputs differ from the declared shapes (and do not contradict inference: "
        "runtime.shape_check); the whole path (runtime.whole) is never rerun"
    ),
)

FAILED_SHAPE_KEPT = _openvino(
    id="openvino-failed-shape-kept",
    summary=(
        "After a run fails inside the EP on inputs of a new shape (a zero batch into a MaxPool: 'Batch size "
        "is zero'), the session keeps that shape: every later run in the shape of the last run that "
        "succeeded fails the same way, until a run of yet another shape succeeds. The CPU EP takes such "
        "a run (an empty output) and its next runs are right"
    ),
    repro=_TESTS + "test_openvino_fails_the_last_good_shape_again_after_a_failed_run",
    hook=(
        "runtime.renewal.renewed, asked by runtime.recovery.recover before the caller's error is raised: a "
        "session of this EP whose run failed is made again (the same model, options and providers) and "
        "swapped in as the compiled model's next revision, so the next inference runs on a fresh session; "
        "an inference in flight whose run of the old session fails once it was made again starts over"
    ),
)

ATTENTION_OUTPUT_SHAPE = _openvino(
    id="openvino-attention-output-shape",
    summary=(
        "A self-attention (MatMul -> Softmax -> MatMul, scaled by a Mul or Div or not) of static shape whose "
        "batch times heads is 1 and whose output is a graph output of the EP's part comes back with its "
        "second-last dimension split in two ([1,8,4] as [1,2,4,4], the values in order), silently: OpenVINO "
        "2025.4's CPU plugin splits that dimension for its threads and reports the compiled model's output "
        "in the split shape (native OpenVINO 2026.4.1 does not); with one thread it does not split"
    ),
    repro=_TESTS + "test_openvino_hands_back_a_self_attention_with_its_rows_split_in_two",
    hook=(
        "runtime.shape_check.contradiction, asked by runtime.walk.Walk.check_shapes and "
        "runtime.recovery.recover until a subgraph completes an inference: an output in another rank, or its "
        "elements in another shape, than ONNX Runtime infers is a failure of the subgraph (HETERO_FALLBACK "
        "moves it, the warning citing this id; else an InferenceError), never a result. The check is general "
        "(any EP, every release)"
    ),
    signature="ONNX Runtime infers for it",  # the words of runtime.shape_check's message
)

ONE_THREAD_EMPTY_OUTPUTS = _openvino(
    id="openvino-one-thread-empty-outputs",
    summary=(
        "On one thread (num_of_threads 1, or INFERENCE_NUM_THREADS 1 through load_config), the CPU plugin "
        "answers inputs a node cannot broadcast (x [2,3,8] masked by m [2,4] unsqueezed) with empty outputs "
        "([0,8], [0,0,8]) instead of failing, as it does on more threads; right inputs are answered right"
    ),
    repro=_TESTS + "test_openvino_on_one_thread_answers_inputs_it_cannot_broadcast_with_empty_outputs",
    hook=(
        "runtime.inputs.Inputs.refuse_conflicts: where a compiled model runs an OpenVINO session on one "
        "thread (a concurrent schedule's share of two cores gives it one), inputs that give one named "
        "dimension two sizes are an InferenceError before any session runs where onnx's shape inference "
        "fails at their shapes and not with the sizes agreeing (such a run left the process to crash "
        "later); runtime.inputs.Inputs.explain_empty: an inference whose outputs come out empty from "
        "inputs that disagree so is one too"
    ),
)

EP_CONTEXT_LOAD = _openvino(
    id="openvino-ep-context-load",
    summary=(
        "The EP writes an EPContext model of what it compiled (session options ep.context_enable=1, embed "
        "mode 0 or 1), but a session of that model fails to load: '[ONNXRuntimeError] : 11 : EP_FAIL : "
        "Unhandled exception type: 1' (a two-node MatMul/Relu model, ResNet-50, Smart Turn alike); "
        "onnxruntime-openvino 1.23.0 (OpenVINO 2025.3) fails to load it too, with '[ CORE ] Unable to read "
        "the model' (tried by hand, PP-OCRv4's recogniser with static shapes). 1.24.1 fails the same way "
        "underneath (a debugger shows that error raised inside): openvino-cpu-blob-unreadable is the cause"
    ),
    repro=_TESTS + "test_openvino_cannot_load_the_ep_context_model_it_wrote",
    hook=(
        "none: documented (an export and CACHE_DIR keep ONNX models, never EPContext models; "
        "placement.config.SplitConfig.settings gives the EP on a GPU or NPU OpenVINO's own cache_dir under "
        "CACHE_DIR instead)"
    ),
)

CPU_BLOB_UNREADABLE = _openvino(
    id="openvino-cpu-blob-unreadable",
    summary=(
        "OpenVINO's CPU device cannot read back a compiled blob inside the EP: its blob holds an OpenVINO IR, "
        "and the wheel ships OpenVINO's ONNX frontend but no IR frontend (libopenvino_ir_frontend), so "
        "reading it fails with '[ CORE ] Unable to read the model'. With the EP's cache_dir, each session "
        "in a new process finds the blob its model left, fails to read it, deletes it, compiles again and "
        "writes it anew: the cache costs a write and never saves a compile (bench/reuse.py's blob_cache "
        "rows). Native OpenVINO 2025.4.1 from PyPI, which has the IR frontend, loads such blobs (tried by "
        "hand); its IR frontend does not load into the EP's OpenVINO (another build: undefined symbols), "
        "so no install step mends it"
    ),
    repro=_TESTS + "test_openvino_on_the_cpu_writes_its_cache_blob_again_instead_of_loading_it",
    hook=(
        "placement.config.SplitConfig.settings: CACHE_DIR gives an OPENVINO device on the CPU no cache_dir "
        "while this is in force (a GPU or NPU gets it either way)"
    ),
)

QUIRKS = (
    OUTER_SCOPE_LOOP,
    LOOP_BODY_PARTITIONED,
    LSTM_PEEPHOLES,
    LONE_INPUT_VARIADIC,
    EMPTY_TENSOR,
    CEIL_MODE_POOL,
    DECLARED_SHAPE_IN_SPLIT,
    CPU_PRECISION,
    FOLDS_OVERRIDABLE_INITIALIZERS,
    INITIALIZER_OUTPUT,
    CYCLIC_SPLIT,
    COLON_EXTERNAL_DATA,
    THREAD_COUNTS,
    INPUT_ORDER,
    SHAPE_OF_OUTPUT,
    STALE_AFTER_FAILURE,
    FAILED_SHAPE_KEPT,
    ATTENTION_OUTPUT_SHAPE,
    ONE_THREAD_EMPTY_OUTPUTS,
    EP_CONTEXT_LOAD,
    CPU_BLOB_UNREADABLE,
)

# the precisions the EP takes on each OpenVINO device it restricts (openvino-cpu-precision)
PRECISIONS: dict[str, tuple[str, ...]] = {"CPU": ("FP32", "ACCURACY")}
