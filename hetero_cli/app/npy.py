"""Reading .npy data (benchmark's and tune's -i files, the arrays in Polygraphy's JSON files) without ever
unpickling anything, and with errors a user can act on.

numpy's np.load answers bytes that are not .npy data with "This file contains pickled (object) data. If you
trust the file you can load it unsafely using allow_pickle=": wrong for data that is merely damaged, and an
invitation to run code from the file. Here the data's header is read first: no .npy header, or an array of
Python objects, is refused with what is expected instead.
"""

from __future__ import annotations

import io
import os
import zipfile
from typing import BinaryIO

import numpy as np

NPY_MAGIC = b"\x93NUMPY"
NPZ_MAGIC = b"PK\x03\x04"
NOT_NPY = "is not .npy data (it lacks the header np.save writes)"
OBJECTS = (
    "holds Python objects (dtype object), which are never loaded: save the array with a numeric or "
    "string dtype (np.save(path, array.astype(np.float32)))"
)


class NpyError(ValueError):
    """.npy data that is not read: the message says what is wrong with it (no advice to unpickle it)."""


def npy_header(path: str | os.PathLike[str]) -> tuple[tuple[int, ...], np.dtype]:
    """(shape, dtype) of the .npy file at ``path``, from its header alone. Raises NpyError for data that
    is not .npy or holds Python objects; OSError where the file cannot be read."""
    with open(path, "rb") as f:
        return _header(f)


def load_npy(source: str | os.PathLike[str] | bytes, *, npz: bool = False) -> np.ndarray:
    """The array in a .npy file (a path) or in .npy bytes; with ``npz``, an .npz archive's first array too
    (Polygraphy's payloads may be either). Nothing is unpickled. Raises NpyError for data that is not .npy
    (or .npz), holds Python objects, or is cut short or damaged; OSError where a file cannot be read."""
    if isinstance(source, bytes):
        return _load(io.BytesIO(source), npz)
    with open(source, "rb") as f:
        return _load(f, npz)


def _load(stream: BinaryIO, npz: bool) -> np.ndarray:
    start = stream.read(len(NPZ_MAGIC))
    stream.seek(0)
    if npz and start == NPZ_MAGIC:
        return _first_npz_array(stream)
    _header(stream)
    stream.seek(0)
    try:
        return np.load(stream, allow_pickle=False)
    except Exception as err:  # np.load raises many kinds (ValueError, OSError, EOFError...) for damaged data
        raise NpyError(f"is damaged .npy data ({_reason(err)})") from None


def _header(stream: BinaryIO) -> tuple[tuple[int, ...], np.dtype]:
    """(shape, dtype) from the .npy header at the stream's position; NpyError as for load_npy."""
    if stream.read(len(NPY_MAGIC)) != NPY_MAGIC:
        raise NpyError(NOT_NPY)
    stream.seek(-len(NPY_MAGIC), io.SEEK_CUR)
    try:
        version = np.lib.format.read_magic(stream)
        if version == (1, 0):
            shape, _, dtype = np.lib.format.read_array_header_1_0(stream)
        else:
            shape, _, dtype = np.lib.format.read_array_header_2_0(stream)
    except Exception as err:  # a header numpy cannot parse: ValueError, EOFError, SyntaxError...
        raise NpyError(f"is damaged .npy data: its header cannot be read ({_reason(err)})") from None
    if dtype.hasobject:
        raise NpyError(OBJECTS)
    return tuple(shape), dtype


def _first_npz_array(stream: BinaryIO) -> np.ndarray:
    """The first array of an .npz archive, each member's header checked as a .npy file's."""
    try:
        with zipfile.ZipFile(stream) as archive:
            names = [n for n in archive.namelist() if n.endswith(".npy")]
            if not names:
                raise NpyError("is an .npz archive holding no array")
            with archive.open(names[0]) as member:
                data = member.read()
    except (zipfile.BadZipFile, OSError, EOFError) as err:
        raise NpyError(f"is a damaged .npz archive ({_reason(err)})") from None
    return _load(io.BytesIO(data), npz=False)


def _reason(err: Exception) -> str:
    """numpy's reason in one line, never its advice to unpickle."""
    text = " ".join(str(err).split()) or type(err).__name__
    return type(err).__name__ if "pickle" in text else text
