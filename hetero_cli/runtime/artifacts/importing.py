"""Import an exported compiled model (exporting.py writes it): the sessions are created straight from the
subgraphs' ONNX models it holds, with no query, partition or export. An artifact is untrusted input: every
length, name and tensor in it is checked before anything is built from it (ArtifactError), and nothing in
it makes an import read or write outside it.

An artifact read from a file keeps its weights there: the models' pooled weights become references into
the file (weight_pool.py), which ONNX Runtime reads as it reads an .onnx file's, so the file must stay in
place while the compiled model is in use (as a model's file must).
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import onnx

from ...errors import ArtifactError, CompileError, HeteroError
from ...graph import Model, read_model
from ...graph.external import all_tensors
from ...graph.reading import read_referencing
from ...graph.weights import file_stamp, referable, stamp_of, still
from ...ort.failures import failure_reason
from ...ort.session import (
    ORT_ERRORS,
    SUBGRAPH,
    assignment,
    create_session,
    ort,
    record_assignment,
    session_options,
)
from ...placement import config as cfg
from ...placement.devices import Device
from ...placement.partition import Plan, Subgraph
from ...placement.query import Probe
from ...placement.schedule import plan_schedule
from ..compiled import Compiled, first_compiled
from ..compiler import prepare_subgraph
from ..environment import check_loadable
from ..fallback import Fallback
from ..one_session import one_session
from ..parallel import in_parallel
from . import artifact, import_checks, weight_pool
from .exporting import LOCAL_KEYS, external, hetero_cli_version

log = logging.getLogger("hetero_cli")


@dataclasses.dataclass(frozen=True)
class Source:
    """An artifact's ``data`` (None: read_artifact reads it from ``file``), how messages name it
    (``where``), and the regular ``file`` it comes from (its real path; None for bytes or a stream) with
    that file's ``stamp`` (file_stamp) as first seen."""

    data: bytes | memoryview | None
    where: str
    file: Path | None = None
    stamp: tuple[int, int, int] | None = None


def read_source(source: Any) -> Source:
    """The bytes of an artifact given as bytes, a path, or a binary file object, and how messages name
    it. Raises ArtifactError for a path that is no readable file, or anything else."""
    if isinstance(source, bytes | bytearray | memoryview):
        return Source(source, "the export given as bytes")
    if hasattr(source, "read"):
        where = str(getattr(source, "name", "the stream"))
        try:
            data = source.read()
        except UnicodeDecodeError:  # a file opened in text mode ('r'): its bytes are no text
            data = None
        if not isinstance(data, bytes | bytearray):
            raise ArtifactError(f"{where} is a text stream: open the export in binary mode ('rb')")
        return Source(data, where)
    if not isinstance(source, str | os.PathLike):
        raise ArtifactError(
            f"cannot import from {type(source).__name__}: give an export's bytes, its path or a binary file"
        )
    path = Path(source)
    try:
        before = file_stamp(path)
        real = path.resolve()
        if path.is_file() and referable(real):
            return Source(None, str(path), real, before)  # read once, by read_artifact: its pool stays there
        data = path.read_bytes()
        # a pipe, or a file written meanwhile: its bytes are kept in memory, never referenced
        regular = path.is_file() and before == file_stamp(path)
    except OSError as exc:
        raise _unreadable(path, exc) from None
    return Source(data, str(path), real if regular else None, before if regular else None)


def _unreadable(path: Path, exc: OSError) -> ArtifactError:
    return ArtifactError(f"cannot read {path}: {exc.strerror or exc}: give the path of an export")


def _unpack(source: Source) -> artifact.Unpacked:
    """The artifact of ``source`` checked and taken apart (artifact.unpack, or unpack_file where it is
    still in its file); ArtifactError as they raise it, or where the file changed since read_source saw
    it."""
    if source.data is not None:
        return artifact.unpack(source.data, source.where)
    assert source.file is not None and source.stamp is not None
    try:
        with open(source.file, "rb") as file:
            stamp = stamp_of(os.fstat(file.fileno()))
            if stamp != source.stamp:
                raise _changed(source.where)
            return artifact.unpack_file(file, stamp[0], source.where)
    except OSError as exc:
        raise _unreadable(Path(source.where), exc) from None


def is_export(source: Any) -> bool:
    """Whether ``source`` (bytes, or a path) starts as an export does (artifact.MAGIC): the one test every
    reader of a model applies, whatever the file's name. False where a path cannot be read (the model
    reader says why), or is no regular file."""
    if isinstance(source, bytes | bytearray | memoryview):
        return artifact.is_artifact(bytes(source[: len(artifact.MAGIC)]))
    if not isinstance(source, str | os.PathLike) or not Path(source).is_file():
        return False  # a pipe is never opened here: it would wait for a writer (the model reader refuses it)
    try:
        with open(source, "rb") as file:
            return artifact.is_artifact(file.read(len(artifact.MAGIC)))
    except OSError:
        return False


def read_artifact(source: Source) -> tuple[artifact.Unpacked, cfg.SplitConfig]:
    """Check an artifact's bytes (artifact.unpack), its hetero-cli version and its config.

    Returns it unpacked (with the file it came from, if any), with the config it was compiled with (paths
    it names left out: an import reads and writes nothing outside the artifact). Raises ArtifactError.
    """
    where = source.where
    unpacked = dataclasses.replace(_unpack(source), file=source.file, stamp=source.stamp)
    header = unpacked.header
    theirs, ours = str(header.get("hetero_cli", "unknown")), hetero_cli_version()
    if theirs.split(".")[:2] != ours.split(".")[:2]:
        raise ArtifactError(
            f"{where} was exported by hetero-cli {theirs}; this is hetero-cli {ours}, which imports exports of "
            f"{'.'.join(ours.split('.')[:2])}.x only: compile the model again (hetero compile)"
        )
    if header.get("onnxruntime") != ort.__version__:
        log.warning(
            "%s was exported with ONNX Runtime %s, this is %s: its outputs may differ from the exported split's",
            where,
            header.get("onnxruntime"),
            ort.__version__,
        )
    try:
        saved = header["config"]
        flat = {**saved["hetero"], **saved["devices"]}
        groups = (saved["hetero"], *saved["devices"].values())  # the settings, then each device's
        dropped = sorted({k for settings in groups for k in settings if k in LOCAL_KEYS})
        config = cfg.split({k: _without_paths(v) for k, v in flat.items() if k not in LOCAL_KEYS})
    except (KeyError, TypeError, AttributeError, HeteroError) as exc:
        raise ArtifactError(f"{where} is damaged: its config is not what hetero-cli writes ({exc})") from None
    if dropped:
        log.warning("%s: the config keys %s name paths and are not imported", where, ", ".join(dropped))
    return unpacked, config


def _without_paths(value: Any) -> Any:
    return {k: v for k, v in value.items() if k not in LOCAL_KEYS} if isinstance(value, Mapping) else value


def import_compiled(
    unpacked: artifact.Unpacked,
    where: str,
    devices: Sequence[Device],
    config: cfg.SplitConfig,
    device_name: str,
    hetero: bool,
    source: Model | None = None,
    *,
    draw: bool = False,
    dot_dir: str | None = None,
) -> Compiled:
    """The Compiled of an artifact read by read_artifact (LOADED_FROM_CACHE): its sessions created from the
    subgraph models it holds, on ``devices`` (the import's available devices, in priority order).
    ``source``: the model source_model read from it already, if any (the compiled model's ``model``, a
    copy with type corrections of its own); ``draw``: whether the .dot files of its plan are drawn, into
    ``dot_dir`` (None: the current directory).

    The subgraphs run in one session where the export's did (PERFORMANCE_HINT=LATENCY) and ``config``
    keeps LATENCY; a throughput mode in ``config`` gives each its own session, as a compile does.
    A subgraph whose device is not among ``devices`` (the artifact was compiled on a machine with a device
    this one lacks, or the import names other devices) moves to the CPU where it is listed, else to the
    last of ``devices``, with a warning. Raises ArtifactError for a header or payload that is not what an
    export holds (a subgraph model referring to external data among them), CompileError where a session
    cannot be created.
    """
    count = _model_count(unpacked, where)
    subgraph_models = [_model(unpacked, i, where, f"subgraph{i}'s model") for i in range(1, count)]
    model = (source if source is not None else source_model(unpacked, where)).typed_copy()
    plan = _plan(unpacked.header, model, count - 1, where)
    for subgraph, (proto, _) in zip(plan.subgraphs, subgraph_models, strict=True):
        import_checks.check_subgraph_model(proto, subgraph, model, where)
    plan, moved = _replace(plan, devices, where)
    by_name = {d.name: d for d in devices}
    # one session where the export ran one, unless this import asks for a throughput mode (a session per
    # subgraph, as compile_model gives it: hetero serve's pipeline overlaps requests across them)
    one = unpacked.header.get("one_session") and not moved and config.performance_mode == cfg.LATENCY
    manual = bool(unpacked.header.get("manual"))
    fallback = Fallback(hetero and len(devices) > 1 and config.fallback(manual), manual, tuple(devices))
    if one and any(not by_name[name].is_cpu for name in plan.devices):
        result = _one(model, plan, by_name, config, device_name, fallback, draw, dot_dir)
    else:
        shared = len(plan.subgraphs) > 1
        schedule = plan_schedule(plan, by_name, config, model.value_type)
        # the jobs in_parallel runs: prepare_subgraph with the exported model (no export; serialised as the
        # job is made) and the folder its weights' references are found in
        made = in_parallel(
            [
                functools.partial(
                    prepare_subgraph,
                    model,
                    s,
                    by_name[s.device],
                    config,
                    None,
                    None,
                    shared=shared,
                    schedule=schedule,
                    exported=proto.SerializeToString(),
                    exported_dir=folder,
                )
                for s, (proto, folder) in zip(plan.subgraphs, subgraph_models, strict=True)
            ]
        )
        result = first_compiled(
            model,
            plan,
            made,
            config,
            device_name,
            fallback=fallback,
            schedule=schedule,
            draw=draw,
            dot_dir=dot_dir,
            loaded_from_cache=True,
        )
    _check_unchanged(unpacked, where)
    return result


def source_model(unpacked: artifact.Unpacked, where: str) -> Model:
    """The model an artifact was compiled from (its first model), read as read_model reads one; its
    pooled weights are references into the artifact's file where it was read from one.
    ArtifactError where it refers to data outside the artifact; ModelError where it is no model ONNX
    Runtime loads."""
    _model_count(unpacked, where)
    proto, folder = _model(unpacked, 0, where, "its source model")
    if folder is None or unpacked.file is None:
        return read_model(proto, check_loadable)
    return read_referencing(proto, unpacked.file, check_loadable)


def _model_count(unpacked: artifact.Unpacked, where: str) -> int:
    """How many models ``unpacked`` holds (its payloads less the weight pool, the last), checked against
    its weight tables; ArtifactError where they disagree or there is no model at all."""
    tables = unpacked.header.get(weight_pool.TABLES)
    count = len(unpacked.payloads) - 1
    if count < 1 or not isinstance(tables, list) or len(tables) != count:
        raise ArtifactError(f"{where} is damaged: its weight tables do not match the models it holds")
    return count


def _model(
    unpacked: artifact.Unpacked, index: int, where: str, what: str
) -> tuple[onnx.ModelProto, Path | None]:
    """Model ``index`` of ``unpacked`` parsed (refused where it refers to data outside the artifact), its
    pooled weights given back (weight_pool.fill): references into the artifact's file where it was read
    from one sessions can read weights in, else inline. Returns it and the folder its references are found
    in (None where inline)."""
    proto = _check_inline(_held(unpacked, index), where, what)
    file = unpacked.file
    pool: memoryview | weight_pool.PoolFile
    if file is not None and referable(file):
        pool = weight_pool.PoolFile(file, unpacked.offsets[-1], unpacked.sizes[-1])
    else:
        pool = _held(unpacked, len(unpacked.payloads) - 1)
    weight_pool.fill(proto, unpacked.header[weight_pool.TABLES][index], pool, where, what)
    import_checks.check_tensors_filled(proto, where, what)
    return proto, pool.path.parent if isinstance(pool, weight_pool.PoolFile) else None


def _held(unpacked: artifact.Unpacked, index: int) -> memoryview:
    """Payload ``index``, which read_artifact held in memory (it leaves only a referable file's pool
    there)."""
    payload = unpacked.payloads[index]
    if payload is None:
        raise AssertionError(f"payload {index} was left in the file it is needed from")
    return payload


def _check_unchanged(unpacked: artifact.Unpacked, where: str) -> None:
    """ArtifactError where the artifact's file changed since it was read: its sessions may have read
    weights from bytes the checksum never saw."""
    if unpacked.file is not None and (unpacked.stamp is None or not still(unpacked.file, unpacked.stamp)):
        raise _changed(where)


def _changed(where: str) -> ArtifactError:
    return ArtifactError(
        f"{where} changed while it was imported (its sessions read weights from it): import it again once "
        "nothing writes it"
    )


def _one(
    model: Model,
    plan: Plan,
    devices: Mapping[str, Device],
    config: cfg.SplitConfig,
    device_name: str,
    fallback: Fallback,
    draw: bool,
    dot_dir: str | None,
) -> Compiled:
    """A split that ran in one ORT session (one_session.whole_plan_probe), made again as the query made it:
    one session of the source model, LOADED_FROM_CACHE. CompileError where ONNX Runtime refuses it."""
    device = next(devices[name] for name in plan.devices if not devices[name].is_cpu)
    settings = config.settings(device)
    threads = settings.intra_op_num_threads or None
    providers = device.providers(settings.provider_options)
    so = session_options(external_dir=model.external_dir)
    if threads:
        so.intra_op_num_threads = threads
    record_assignment(so)
    # as the query's probe: its weights referenced in their file (the artifact's, or the model's own where
    # a cache entry's key vouched for it), or inline
    data = model.session_copy().SerializeToString()
    try:
        session = create_session(
            data, so, providers, purpose=SUBGRAPH, subject=model.name, device=device.name
        )
    except ORT_ERRORS as exc:  # one line saying which session and why
        raise CompileError(
            f"the one session of {model.name}'s split could not be created on {device.ep}: "
            f"{failure_reason(exc)}; import it on another device string, or compile the model again"
        ) from None
    probe = Probe(providers, session, assignment(session), threads)
    return one_session(
        model,
        plan,
        devices,
        config,
        device_name,
        device,
        probe,
        fallback=fallback,
        draw=draw,
        dot_dir=dot_dir,
        loaded=True,
    )


def _check_inline(payload: memoryview, where: str, what: str) -> onnx.ModelProto:
    """``payload`` parsed (read_model takes it so: a model is parsed once); ArtifactError where it is no
    ONNX model, or one with a tensor whose data lies outside it."""
    proto = onnx.ModelProto()
    try:
        proto.ParseFromString(bytes(payload))
    except Exception:  # protobuf's DecodeError, or what its C++ parser raises: the payload is not a model
        raise ArtifactError(f"{where} is damaged: {what} is not an ONNX model") from None
    for tensor in all_tensors(proto):
        if external(tensor):
            location = next((e.value for e in tensor.external_data if e.key == "location"), "?")
            raise ArtifactError(
                f"{where} is refused: {what} refers to external data ({tensor.name!r} at {location!r}); an "
                "export holds every weight inline and is never read beyond itself: export the model again"
            )
    return proto


def _plan(header: Mapping[str, Any], model: Model, count: int, where: str) -> Plan:
    """The artifact's Plan; ArtifactError where it is not what an export writes for ``model``
    (import_checks.check_plan)."""
    try:
        saved = header["plan"]
        subgraphs = tuple(
            Subgraph(
                index=i,
                device=str(s["device"]),
                nodes=_names(s["nodes"]),
                constant_nodes=_names(s["constant_nodes"]),
                inputs=_names(s["inputs"]),
                outputs=_names(s["outputs"]),
                fixed=_names(s["fixed"]),
            )
            for i, s in enumerate(saved["subgraphs"])
        )
        outputs = _names(saved["outputs"])
        given = {str(k): v if isinstance(v, str) else int(v) for k, v in saved["output_sources"].items()}
        # in the model's output order (the header's keys are sorted): an inference returns them so
        sources = {name: given[name] for name in outputs} if set(given) == set(outputs) else given
        plan = Plan(
            model_name=model.name,
            subgraphs=subgraphs,
            inputs=_names(saved["inputs"]),
            outputs=outputs,
            output_sources=sources,
            affinities={str(k): str(v) for k, v in saved["affinities"].items()},
            folded=_names(saved["folded"]),
            branches=saved.get("branches") is True,
        )
    except (KeyError, TypeError, ValueError, AttributeError, AssertionError):
        plan = None
    if plan is None or len(plan.subgraphs) != count:
        raise ArtifactError(f"{where} is damaged: its plan does not match the subgraphs and model it holds")
    import_checks.check_plan(plan, model, where)
    return plan


def _names(value: Any) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise TypeError("not a list of names")
    return tuple(value)


def _replace(plan: Plan, devices: Sequence[Device], where: str) -> tuple[Plan, bool]:
    """``plan`` with each subgraph whose device is not among ``devices`` moved (import_compiled's rule),
    and whether any moved."""
    names = [d.name for d in devices]
    target = "CPU" if "CPU" in names else names[-1]
    moved = [s for s in plan.subgraphs if s.device not in names]
    if not moved:
        return plan, False
    for s in moved:
        log.warning(
            "%s: %s (%d node(s)) was compiled for %s, which this import does not have (it has %s): it runs on %s",
            where,
            s.name,
            len(s.nodes),
            s.device,
            ", ".join(names),
            target,
        )
    subgraphs = tuple(
        s if s.device in names else dataclasses.replace(s, device=target) for s in plan.subgraphs
    )
    gone = {s.device for s in moved}
    affinities = {n: target if d in gone else d for n, d in plan.affinities.items()}
    return dataclasses.replace(plan, subgraphs=subgraphs, affinities=affinities), True
