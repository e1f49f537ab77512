"""Type repair: a split runs a model whose declared types (value_info, or onnx's shape inference) contradict
what ONNX Runtime computes, as ORT's one session of the whole model does (it only warns).

ORT's one session goes by what it infers; a split's sessions are exported with the declared type at each
subgraph boundary, where a wrong one makes a session refuse to load or refuse the real tensor. Four
mechanisms of the compile side set such boundary types right:

- retry (``retry_on_shape_failure``): fires when creating the subgraphs' sessions failed with an error
  about shapes (its text says shape, rank or dimension) and the model declares fixed dimensions. The
  boundary types that inference without the value_info contradicts (another rank, another fixed size)
  are corrected and every session made once more; if that fails too the corrections are taken back and
  the first failure is raised. Tests: tests/runtime/test_declared_types.py
  (test_a_value_info_lie_that_keeps_a_session_from_loading_is_corrected,
  test_a_lie_inside_a_subgraph_that_keeps_it_from_loading_is_corrected,
  test_a_failure_not_about_shapes_is_raised_as_it_is_and_leaves_the_types).
- correction loop (``correct_contradicted``): fires after the sessions were made, where a session's
  output that is passed to another subgraph comes out of ORT with a rank, or a dimension left unknown,
  that contradicts the static shape the model declares for it. Those tensors (and the passed tensors
  whose declared type inference without the value_info contradicts: ``_led_astray``) are corrected, and
  the sessions that read or write them made again; at most one round per subgraph (a correction can
  reveal the next). Tests: test_declared_types.py (test_a_split_at_a_tensor_whose_value_info_lies_...,
  test_value_info_lies_over_two_boundaries_are_all_corrected, test_a_lie_that_fixes_a_dynamic_batch_...,
  test_a_true_value_info_is_kept_as_declared, test_a_minus_one_dimension_is_dynamic_not_contradicted,
  test_a_lying_value_info_between_openvino_and_cpu).
- veto (``vetoes_one_session``): asked by the one-session choice (one_session.whole_plan_probe) before a
  query's probe session serves a whole plan; True where a passed tensor's declared shape is contradicted
  by inference at another batch size (the OpenVINO EP would hand it over in the declared shape,
  silently). It changes nothing: the plan then gets a session per subgraph, which relax can correct.
  Tests: test_declared_types.py (test_a_value_info_lie_between_openvino_and_cpu_keeps_latency_from_one_
  session, test_a_correct_value_info_keeps_latencys_one_session).
- relax (``relaxed_types``, for ``replacing.relaxed``): fires at run time, when a subgraph refused a
  tensor an earlier one made (another size, another rank). The refused dimensions of the type the
  refusing session declares are made symbolic (the rank dropped where the rank was refused) and the
  subgraphs that pass the tensor compiled again; if that compile fails the corrections are taken back.
  Tests: test_declared_types.py (test_a_value_info_true_only_for_one_batch_is_relaxed_when_the_run_shows_
  it and the relax tests after it, test_a_second_compile_of_the_same_model_relaxes_its_own_sessions).

What they may change: only the type corrections (``Model.correct_type``) of tensors passed between
subgraphs, in the compile's own copy of the model (Model.typed_copy; relax in a copy of its revision's):
the caller's Model is never changed, and each compile finds its corrections itself. What they never do:
change the graph, its nodes, initializers, inputs or outputs, the plan or its placement; guess a type no
inference gives (every corrected type is ORT's or inference's, or the
declared one with dimensions made symbolic); retry more than once, or keep corrections whose compile
failed. A failure not about shapes is raised as it is, the types untouched.

Not here: at run time (runtime/recovery.py, Revision.unbinding), an output whose metadata ORT gets wrong is made per
inference instead of bound in advance (the unbound fallback; tests/runtime/test_linked_tensors.py), unless
its shape contradicts ONNX Runtime's inference (runtime/shape_check.py: the EP's mistake, a failure), and
an extra CPU session infers types no declaration gives (ort/types.py).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import onnx
from onnx import helper

from ..errors import CompileError, ModelError
from ..graph import Model, shape_text, type_shape
from ..ort.failures import about_shapes
from ..ort.types import arg_type
from ..placement.partition import Plan

if TYPE_CHECKING:
    from .compiled_subgraph import CompiledSubgraph

log = logging.getLogger("hetero_cli")

# the types a repair replaced, {tensor: its correction before (None: none)}, to take them back
Previous = dict[str, onnx.TypeProto | None]


def correct(model: Model, types: Mapping[str, onnx.TypeProto]) -> Previous:
    """Correct ``model``'s types of these tensors; returns what their corrections were, for take_back."""
    before = {name: model.correction(name) for name in types}
    for name, value_type in types.items():
        model.correct_type(name, value_type)
    return before


def take_back(model: Model, before: Previous) -> None:
    """Put back the corrections ``correct`` replaced (a repair whose compile failed keeps nothing)."""
    for name, value_type in before.items():
        model.correct_type(name, value_type)


def retry_on_shape_failure(
    model: Model, plan: Plan, attempt: Callable[[], list[CompiledSubgraph]]
) -> list[CompiledSubgraph]:
    """``attempt()`` (every subgraph's session), and once more after a failure about shapes, with the
    boundary types corrected that inference without the value_info contradicts.

    A value_info that contradicts the graph, declared for a subgraph's input, can keep its session from
    loading (MatMul's shape inference refuses it) where ORT's one session of the model goes by what it
    infers. Raises the first failure where nothing is to correct, or the second attempt fails too (the
    corrections are taken back then).
    """
    try:
        return attempt()
    except (CompileError, ModelError) as exc:
        wrong = (
            _contradicted(model, plan.passed_tensors(), model.types_without_value_info)
            if about_shapes(exc) and model.types.declares_fixed_dims
            else {}
        )
        if not wrong:
            raise
        declared = {name: model.value_type(name) for name in wrong}
        before = correct(model, wrong)
        try:
            compiled = attempt()
        except (CompileError, ModelError):
            take_back(model, before)
            raise exc from None
        _warn_corrected(model, wrong, declared)
        return compiled


def correct_contradicted(
    model: Model,
    plan: Plan,
    compiled: list[CompiledSubgraph],
    recompile: Callable[[CompiledSubgraph], CompiledSubgraph],
) -> list[CompiledSubgraph]:
    """``compiled`` with the passed tensors' types corrected where ORT's sessions contradict the static
    shape the model declares, and ``recompile(c)`` for each session that reads or writes one of them.

    A correction can reveal the next one (a consumer's own output, declared wrong too, inferred again):
    at most one round per subgraph. Raises what ``recompile`` raises.
    """
    for _ in range(len(plan.subgraphs)):
        contradicted = _contradicted_types(model, plan, compiled)
        if not contradicted:
            break
        contradicted.update(_led_astray(model, plan, contradicted))
        _warn_corrected(model, contradicted)
        correct(model, contradicted)
        compiled = [
            recompile(c) if contradicted.keys() & {*c.subgraph.inputs, *c.subgraph.outputs} else c
            for c in compiled
        ]
    return compiled


def vetoes_one_session(model: Model, plan: Plan) -> bool:
    """Whether a value_info a run can contradict sits on a tensor passed between subgraphs: in ORT's one
    session of [EP, CPU] the OpenVINO EP returns the declared shape there, silently (a batch cut to the
    declared size), so such a plan gets sessions of its own, which relax corrects when a run shows it."""
    if not model.types.declares_fixed_dims:
        return False
    return bool(_contradicted(model, plan.passed_tensors(), model.types_at_one_size))


def relaxed_types(
    declared_inputs: Iterable[Any], refused: Mapping[str, tuple[int, ...] | None]
) -> dict[str, onnx.TypeProto]:
    """{tensor: its relaxed type} for the ``refused`` tensors ({name: refused dimensions, None for the
    rank}) that have dimensions to relax: the type the refusing session declares for it
    (``declared_inputs``: its get_inputs()), those dimensions made symbolic."""
    declared = {arg.name: arg_type(arg) for arg in declared_inputs}
    relaxed = {}
    for name, dims in refused.items():
        t = _dynamic(name, declared.get(name), dims)
        if t is not None:
            relaxed[name] = t
    return relaxed


def warn_relaxed(
    relaxed: Mapping[str, onnx.TypeProto], refused: Mapping[str, tuple[int, ...] | None]
) -> None:
    """The warning for tensors relax made dynamic."""
    log.warning(
        "ONNX Runtime computes %s with another shape than the model declares (its value_info, or "
        "onnx's shape inference): the subgraphs that pass it are compiled again, %s dynamic",
        ", ".join(relaxed),
        "; ".join(
            f"{name}: {'its rank' if dims is None else 'dimension(s) ' + ', '.join(map(str, dims))}"
            for name, dims in refused.items()
            if name in relaxed
        ),
    )


def _dynamic(name: str, t: onnx.TypeProto | None, dims: tuple[int, ...] | None) -> onnx.TypeProto | None:
    """Tensor ``name``'s type ``t`` with dimensions ``dims`` made symbolic (a name of their own each; ``dims``
    None: with no shape at all), or None where they already are (nothing to relax)."""
    if t is None or t.WhichOneof("value") != "tensor_type" or not t.tensor_type.HasField("shape"):
        return None
    out = onnx.TypeProto()
    out.CopyFrom(t)
    if dims is None:
        out.tensor_type.ClearField("shape")
        return out
    shape = out.tensor_type.shape.dim
    fixed = [i for i in dims if 0 <= i < len(shape) and shape[i].HasField("dim_value")]
    for i in fixed:
        shape[i].Clear()
        shape[i].dim_param = f"{name}_dim{i}"
    return out if fixed else None


def _warn_corrected(
    model: Model,
    types: Mapping[str, onnx.TypeProto],
    declared: Mapping[str, onnx.TypeProto | None] | None = None,
) -> None:
    """The warning for corrected boundary types (``declared``: what they were, where already replaced)."""
    was = {name: (declared or {}).get(name, model.value_type(name)) for name in types}
    log.warning(
        "the model's value_info contradicts what ONNX Runtime infers for %s: using ONNX Runtime's "
        "shapes at these subgraph boundaries (fix or drop that value_info)",
        ", ".join(
            f"{name} ({shape_text(type_shape(was[name]))} declared, {shape_text(type_shape(t))} inferred)"
            for name, t in types.items()
        ),
    )


def _contradicted(
    model: Model, names: Iterable[str], truth: Mapping[str, onnx.TypeProto]
) -> dict[str, onnx.TypeProto]:
    """{tensor: its type in ``truth``} for those of ``names`` whose declared shape ``truth`` (an inference
    without the model's value_info) contradicts: another rank, or another fixed size."""
    out = {}
    for name in sorted(names):
        have, real = type_shape(model.value_type(name)), type_shape(truth.get(name))
        if have is not None and real is not None and _contradicts(have, real):
            out[name] = truth[name]
    return out


def _contradicts(declared: Sequence[Any], inferred: Sequence[Any]) -> bool:
    """Whether two shapes disagree: another rank, or a dimension fixed in both at different sizes."""
    return len(declared) != len(inferred) or any(
        isinstance(a, int) and isinstance(b, int) and a >= 0 and a != b
        for a, b in zip(declared, inferred, strict=True)
    )


def _led_astray(model: Model, plan: Plan, found: Mapping[str, onnx.TypeProto]) -> dict[str, onnx.TypeProto]:
    """{tensor: its type without the model's value_info} for the tensors passed between subgraphs whose
    type (as ``found`` corrects it, or as inferred from a value_info ORT contradicted) fixes a dimension
    that inference without the value_info gives another size or leaves dynamic, or has another rank:
    ORT's sessions report such a type as declared, so only inference without the value_info shows it."""
    passed = plan.passed_tensors()
    truth = model.types_without_value_info if passed else {}
    out = {}
    for name in sorted(passed):
        have = type_shape(found.get(name) or model.value_type(name))
        real = type_shape(truth.get(name))
        if have is None or real is None:
            continue
        if len(have) != len(real) or any(
            isinstance(a, int) and a != b for a, b in zip(have, real, strict=True)
        ):
            out[name] = truth[name]
    return out


def _contradicted_types(
    model: Model, plan: Plan, compiled: Sequence[CompiledSubgraph]
) -> dict[str, onnx.TypeProto]:
    """{tensor: the type ORT infers} for the tensors passed between subgraphs whose static shape the model
    declares and ORT contradicts. ORT runs such a model whole (it warns and goes by what it infers) and
    reports the dimensions in conflict as unknown: declared as they are, a consumer's input would refuse
    the real tensor."""
    passed = plan.passed_tensors()
    out: dict[str, onnx.TypeProto] = {}
    for c in compiled:
        for arg in c.session.get_outputs():
            declared = model.value_type(arg.name) if arg.name in passed else None
            if declared is None or not declared.HasField("tensor_type"):
                continue
            tensor = declared.tensor_type
            if not tensor.HasField("shape"):
                continue
            # a negative dim_value (paddle2onnx writes -1 for the batch) declares nothing: as dynamic as none;
            # the rank is declared even where every dimension is symbolic
            dims = [
                d.dim_value if d.HasField("dim_value") and d.dim_value >= 0 else None
                for d in tensor.shape.dim
            ]
            seen = list(arg.shape)
            if len(seen) != len(dims):
                out[arg.name] = helper.make_tensor_type_proto(tensor.elem_type, None)
            elif any(d is not None and not isinstance(s, int) for d, s in zip(dims, seen, strict=True)):
                kept = [s if isinstance(s, int) else None for s in seen]
                out[arg.name] = helper.make_tensor_type_proto(tensor.elem_type, kept)
    return out
