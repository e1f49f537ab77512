"""Polygraphy's own JSON files, read and written without Polygraphy: inputs (what ``polygraphy run
--save-inputs`` and ``polygraphy data merge``/``concat`` write and ``--load-inputs`` reads) and outputs (the
RunResults that ``polygraphy run --save-outputs`` writes and ``--load-outputs`` compares against), so a
user can move data between ``hetero validate`` and Polygraphy either way.

The formats (polygraphy/json/serde.py and comparator/struct.py):
- an array is ``{"array": <base64 of np.save's .npy bytes>, "polygraphy_class": "ndarray"}``; older files
  mark it ``"__polygraphy_encoded_ndarray": "polygraphy_serialized_json_type"`` instead, and very old ones
  hold the bytes as latin-1 text rather than base64; an .npz payload gives its first array;
- inputs are a JSON list of feed dicts ``[{"input name": <array>, ...}, ...]``, one per iteration; a file
  holding one feed dict is one iteration;
- outputs are ``{"lst": [[runner name, [<IterationResult>, ...]], ...], "polygraphy_class": "RunResults"}``,
  an IterationResult being ``{"outputs": {name: <LazyArray>}, "runtime": seconds or null, "runner_name":
  ..., "polygraphy_class": "IterationResult"}`` and a LazyArray ``{"values": <array>, "polygraphy_class":
  "LazyArray"}`` (older files: "LazyNumpyArray");
- Polygraphy also saves to an extensionless path as a folder of per-iteration files (0000000000.json, ...):
  the loaders read such a folder too (inputs: each file one feed dict or a list; outputs: each file a
  RunResults whose iterations are appended per runner).
"""

from __future__ import annotations

import base64
import binascii
import io
import json
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ...errors import ValidationError
from ...graph import new_file_beside
from ..npy import NpyError, load_npy
from ..paths import file_problem

TYPE_MARKER = "polygraphy_class"
_LEGACY_MARKER = "polygraphy_serialized_json_type"
_LEGACY_PREFIX = "__polygraphy_encoded_"
_TAB = " " * 4  # Polygraphy's indent
_INPUTS_HINT = "write it with `polygraphy run --save-inputs`, `polygraphy data merge` or save_inputs"
_OUTPUTS_HINT = "write it with `polygraphy run --save-outputs` or save_outputs"


class _Runs(list):
    """A decoded RunResults: [(runner name, [_Iteration, ...]), ...]."""


class _Iteration(dict):
    """A decoded IterationResult's outputs, {name: array}."""


class _Unknown(dict):
    """A Polygraphy object of a type these files never hold (an AccuracyResult, a torch tensor...)."""

    type_name: str = ""


class _BadArray(Exception):
    """An encoded array that cannot be decoded (raised inside json's hook, reported with the file)."""


def save_inputs(path: str | os.PathLike, feeds: Sequence[Mapping[str, np.ndarray]]) -> None:
    """Write ``feeds`` (one {input name: array} per iteration) to ``path`` as Polygraphy's inputs file,
    which ``polygraphy run --load-inputs`` and polygraphy.json.load_json read. Written to a temporary file
    renamed into place, so a failure leaves nothing; raises ValidationError for an array NumPy cannot save
    without pickling (object arrays) and OSError where the file cannot be written."""
    if isinstance(feeds, Mapping):
        raise TypeError("save_inputs takes a sequence of feed dicts, one per iteration: pass [feed]")
    document = [{str(name): _encode_array(array, name) for name, array in feed.items()} for feed in feeds]
    _write(Path(path), document)


def load_inputs(path: str | os.PathLike) -> list[dict[str, np.ndarray]]:
    """The feeds in a Polygraphy inputs file (or folder of per-iteration files), one {input name: array}
    per iteration; a file holding one feed dict is one iteration, as ``--load-inputs`` reads it. Raises
    ValidationError, naming the file and what was expected, for a missing or unreadable file, one that is
    not JSON, holds something else (outputs, plain JSON) or an array that cannot be decoded, or no
    iteration at all."""
    path = Path(path)
    feeds: list[dict[str, np.ndarray]] = []
    for file in _files(path):
        document = _read(file)
        if isinstance(document, _Runs):
            raise ValidationError(
                f"{file} holds Polygraphy outputs (RunResults), not inputs: to feed a run's outputs as "
                f"inputs, convert them with `polygraphy data merge -o inputs.json {file.name}`"
            )
        iterations = document if isinstance(document, list) else [document]
        for index, feed in enumerate(iterations):
            feeds.append(_feed(feed, file, index, iterations is document))
    if not feeds:
        raise ValidationError(f"{path} holds no iterations: give at least one feed dict; {_INPUTS_HINT}")
    return feeds


def save_outputs(path: str | os.PathLike, runs: Mapping[str, Sequence[Mapping[str, np.ndarray]]]) -> None:
    """Write ``runs`` ({runner name: one {output name: array} per iteration}) to ``path`` as Polygraphy's
    RunResults, which ``polygraphy.comparator.RunResults.load`` reads and ``polygraphy run --load-outputs``
    compares against (runtime null: no time was measured). Written to a temporary file renamed into place;
    raises ValidationError for an array NumPy cannot save without pickling, OSError where it cannot write."""
    lst = []
    for runner, iterations in runs.items():
        encoded = [
            {
                "outputs": {
                    str(name): {"values": _encode_array(array, name), TYPE_MARKER: "LazyArray"}
                    for name, array in outputs.items()
                },
                "runtime": None,
                "runner_name": str(runner),
                TYPE_MARKER: "IterationResult",
            }
            for outputs in iterations
        ]
        lst.append([str(runner), encoded])
    _write(Path(path), {"lst": lst, TYPE_MARKER: "RunResults"})


def load_outputs(path: str | os.PathLike) -> dict[str, list[dict[str, np.ndarray]]]:
    """The runs in a Polygraphy RunResults file (or folder of per-iteration RunResults files): {runner name:
    one {output name: array} per iteration}, in the file's order. Raises ValidationError, naming the file
    and what was expected, for a missing or unreadable file, one that is not JSON, holds something other
    than RunResults (an inputs file, plain JSON), an array that cannot be decoded, or a runner twice."""
    path = Path(path)
    runs: dict[str, list[dict[str, np.ndarray]]] = {}
    for file in _files(path):
        document = _read(file)
        if not isinstance(document, _Runs):
            what = "Polygraphy inputs (feed dicts)" if _is_inputs(document) else _describe(document)
            raise ValidationError(f"{file} holds {what}, not Polygraphy outputs: {_OUTPUTS_HINT}")
        seen: set[str] = set()
        for runner, iterations in document:
            if runner in seen:
                raise ValidationError(
                    f"{file} holds runner {runner!r} twice: keep one run per runner name; {_OUTPUTS_HINT}"
                )
            seen.add(runner)
            runs.setdefault(runner, []).extend(dict(iteration) for iteration in iterations)
    if not runs:
        raise ValidationError(f"{path} holds no runs: {_OUTPUTS_HINT}")
    return runs


def _encode_array(array: Any, name: Any) -> dict[str, str]:
    """Polygraphy's ndarray encoding: the .npy bytes (np.save, no pickle) in base64."""
    buffer = io.BytesIO()
    try:
        np.save(buffer, np.asarray(array), allow_pickle=False)
    except ValueError as err:
        raise ValidationError(f"{name!r} cannot be saved as Polygraphy data: {err}") from None
    return {"array": base64.b64encode(buffer.getvalue()).decode(), TYPE_MARKER: "ndarray"}


def _decode_array(dct: Mapping[str, Any]) -> np.ndarray:
    """Polygraphy's ndarray decoder: base64 .npy bytes, or latin-1 text for old files; an .npz's first
    array; never a pickle (npy.load_npy). Raises _BadArray."""
    payload = dct.get("array")
    if not isinstance(payload, str):
        raise _BadArray("an encoded array without its 'array' text")
    try:
        data = base64.b64decode(payload.encode(), validate=True)
    except (binascii.Error, ValueError):
        try:
            data = payload.encode("latin-1")
        except UnicodeEncodeError:
            raise _BadArray("an array that is neither base64 nor latin-1 .npy bytes") from None
    try:
        return load_npy(data, npz=True)
    except NpyError as err:
        raise _BadArray(f"an array payload that {err}, where Polygraphy stores np.save's bytes") from None


def _hook(pairs: list[tuple[str, Any]]) -> Any:
    """json's object_pairs_hook: Polygraphy's Decoder for the types these files hold."""
    dct = dict(pairs)
    legacy = (k for k, v in dct.items() if k.startswith(_LEGACY_PREFIX) and v == _LEGACY_MARKER)
    type_name = next((k.removeprefix(_LEGACY_PREFIX) for k in legacy), dct.get(TYPE_MARKER))
    if type_name is None or not isinstance(type_name, str):
        return dct
    if type_name == "ndarray":
        return _decode_array(dct)
    if type_name in ("LazyArray", "LazyNumpyArray"):
        return dct.get("values")
    if type_name == "IterationResult":
        outputs = dct.get("outputs")
        if not isinstance(outputs, dict):
            raise _BadArray("an IterationResult without its outputs")
        return _Iteration(outputs)
    if type_name == "RunResults":
        lst = dct.get("lst")
        if not isinstance(lst, list) or not all(_is_run(item) for item in lst):
            raise _BadArray("a RunResults whose 'lst' is not [runner name, [IterationResult, ...]] pairs")
        for _, iterations in lst:
            for iteration in iterations:
                for name, array in iteration.items():
                    if not isinstance(array, np.ndarray):
                        raise _BadArray(f"output {name!r} holding {_describe(array)}, not an array")
        return _Runs((runner, iterations) for runner, iterations in lst)
    unknown = _Unknown(dct)
    unknown.type_name = type_name
    return unknown


def _is_inputs(document: Any) -> bool:
    feeds = document if isinstance(document, list) else [document]
    return all(
        type(feed) is dict and all(isinstance(array, np.ndarray) for array in feed.values()) for feed in feeds
    )


def _is_run(item: Any) -> bool:
    return (
        isinstance(item, list)
        and len(item) == 2
        and isinstance(item[0], str)
        and isinstance(item[1], list)
        and all(isinstance(iteration, _Iteration) for iteration in item[1])
    )


def _files(path: Path) -> list[Path]:
    """The file, or a folder's per-iteration *.json files in name order (Polygraphy's list_iteration_files)."""
    if path.is_dir():
        files = sorted(path.glob("*.json"))
        if not files:
            raise ValidationError(f"{path} is a folder without Polygraphy .json files in it")
        return files
    problem = file_problem(path, folder=True)
    if problem:
        raise ValidationError(f"{problem}: give a Polygraphy .json file, or a folder of them")
    return [path]


def _read(file: Path) -> Any:
    """The decoded document in ``file``; ValidationError naming the file for anything unreadable."""
    try:
        text = file.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as err:
        raise ValidationError(f"cannot read {file}: {getattr(err, 'strerror', None) or err}") from None
    try:
        return json.loads(text, object_pairs_hook=_hook)
    except _BadArray as err:
        raise ValidationError(f"{file} holds {err}: it is damaged, or not written by Polygraphy") from None
    except (json.JSONDecodeError, RecursionError) as err:
        raise ValidationError(f"{file} is not JSON ({err}), so not a Polygraphy data file") from None


def _feed(feed: Any, file: Path, index: int, in_list: bool) -> dict[str, np.ndarray]:
    """One iteration's feed dict, checked: a mapping of names to arrays."""
    where = f"iteration {index} of {file}" if in_list else str(file)
    if type(feed) is not dict or not all(isinstance(array, np.ndarray) for array in feed.values()):
        raise ValidationError(f"{where} holds {_describe(feed)}, not Polygraphy inputs: {_INPUTS_HINT}")
    return dict(feed)


def _describe(obj: Any) -> str:
    """What a decoded document is, in a few words for a message."""
    if isinstance(obj, _Unknown):
        return f"a Polygraphy {obj.type_name}"
    if isinstance(obj, _Runs):
        return "Polygraphy outputs (RunResults)"
    if isinstance(obj, _Iteration):
        return "a Polygraphy IterationResult"
    if isinstance(obj, np.ndarray):
        return "an array"
    if isinstance(obj, dict):
        kinds = sorted({_kind(value) for value in obj.values()})
        return f"a dict of {' and '.join(kinds)}" if kinds else "an empty dict"
    if isinstance(obj, list):
        kinds = sorted({_kind(value) for value in obj})
        return f"a list of {' and '.join(kinds)}" if kinds else "an empty list"
    return "a " + _kind(obj).rstrip("s") if obj is not None else "null"


def _kind(obj: Any) -> str:
    if isinstance(obj, np.ndarray):
        return "arrays"
    if isinstance(obj, _Unknown):
        return f"Polygraphy {obj.type_name}s"
    return {dict: "dicts", list: "lists", str: "strings", bool: "booleans", type(None): "nulls"}.get(
        type(obj), "numbers"
    )


def _write(path: Path, document: Any) -> None:
    """Write ``document`` as Polygraphy's indented JSON to a temporary file next to ``path``, renamed into
    place, so a failure leaves neither a partial file nor the temporary one."""
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = new_file_beside(path)  # the umask's permissions, as Polygraphy's own files have
    try:
        with open(temporary, "w", encoding="utf-8") as stream:
            json.dump(document, stream, indent=_TAB)
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
