"""An infer request's JSON, read as untrusted input: nesting bounded before anything is parsed, NaN and
Infinity refused, and no native call that holds Python's GIL for long.

``json.loads`` of a 61 MiB body of numbers is one native call of about 3 s: it holds the GIL throughout,
so a server that parses on a worker thread still stops answering (a health check waited that long), and
it makes a Python float per number (about 17 times the body in memory). Here the body is scanned in
chunks (CHUNK bytes per numpy call) for its strings, its nesting and its arrays of numbers; each array of
numbers of LARGE bytes or more is checked and read CHUNK bytes at a time (each chunk by ``json.loads``, so
numbers are exactly JSON's) into a flat numpy array, and the rest of the document, with those arrays left
out, is parsed by ``json.loads``. Between chunks the GIL passes to the other threads.

    doc = read_json(body)     # {"inputs": [{"name": "x", ..., "data": <numpy array of LARGE bytes or more>}]}
"""

from __future__ import annotations

import json
import logging
import re
import secrets
from typing import Any

import numpy as np

from ...errors import RequestError

log = logging.getLogger("hetero_cli")

#: the deepest nesting of arrays and objects a request may have (a tensor's data nests by its rank)
MAX_NESTING = 64
#: bytes handled per native call (each holds the GIL about a few milliseconds per MiB)
CHUNK = 1 << 20
#: an array of numbers this many bytes long or more is read by numpy, not by json.loads whole
LARGE = 1 << 16

_QUOTE, _BACKSLASH = ord('"'), ord("\\")
# what a byte is inside an array of numbers: whitespace, part of a number, comma, [, ], anything else
_W, _D, _C, _O, _X, _OTHER = range(6)
_CLASS = np.full(256, _OTHER, np.uint8)
_CLASS[list(b" \t\r\n")] = _W
_CLASS[list(b"0123456789+-.eE")] = _D
_CLASS[[ord(","), ord("["), ord("]")]] = [_C, _O, _X]
_NUMERIC = _CLASS != _OTHER
# neighbours (whitespace aside) that no JSON array of numbers has: "1[", "]1", "][", ",,", ",]", "[,"
_BAD = np.zeros(64, bool)
_BAD[[a * 8 + b for a, b in ((_D, _O), (_X, _D), (_X, _O), (_C, _C), (_C, _X), (_O, _C))]] = True
_BRACKETS_TO_COMMAS = bytes.maketrans(b"[]", b",,")
_COMMAS = re.compile(rb",{2,}")


def read_json(data: bytes) -> Any:
    """The JSON value in ``data`` (UTF-8, or UTF-16 or -32 as json.loads detects them), as ``json.loads``
    gives it, except that each array of numbers (nested or not) of LARGE bytes or more comes back as a flat
    numpy array (int64 where every number is an integer, else float64), in row-major order. Raises
    RequestError (400) for a body that is no valid JSON, nests deeper than MAX_NESTING, holds NaN, Infinity
    or -Infinity (no JSON numbers), or mixes LARGE bytes of numbers with other values in one array (no
    KServe datatype takes that, and json.loads of it would hold the GIL for as long as it reads them)."""
    text = _utf8(data)
    strings = _strings(text)
    found: dict[str, np.ndarray] = {}
    pieces: list[bytes] = []
    at = 0
    tag = secrets.token_hex(16)  # no string of the body can be taken for a placeholder
    for start, end in _scan(text, strings):
        values = _numbers(text, start, end)
        if values is None:
            continue
        key = f"{tag}:{len(found)}"
        found[key] = values
        # a placeholder only a value can be (a string would pass for an object's key): ["<key>"]
        pieces += [text[at:start], f'["{key}"]'.encode()]
        at = end
    doc = _loads(b"".join([*pieces, text[at:]]) if found else text)
    return _put_back(doc, found) if found else doc


def _utf8(data: bytes) -> bytes:
    """``data`` in UTF-8 (json.loads takes UTF-16 and -32 too, by their byte patterns)."""
    encoding = json.detect_encoding(data)
    if encoding == "utf-8":
        return data
    try:
        return data.decode(encoding).encode()
    except UnicodeError as exc:
        raise RequestError(f"the request body is no valid JSON: {exc}") from None


def _loads(text: bytes) -> Any:
    try:
        return json.loads(text, parse_constant=_no_number)
    except (UnicodeDecodeError, ValueError) as exc:  # JSONDecodeError, or digits past int's limit
        raise RequestError(f"the request body is no valid JSON: {exc}") from None


def _no_number(name: str) -> Any:
    """json.loads' hook for NaN, Infinity and -Infinity, which Python writes but JSON has no number for."""
    raise RequestError(
        f"the request body holds {name}, which is no JSON number: send finite numbers (binary tensor data "
        "carries any float)"
    )


def _strings(text: bytes) -> tuple[np.ndarray, np.ndarray]:
    """Where the string literals in ``text`` start and end ([start, end), quotes included), in order, as two
    integer arrays (an unterminated one runs to the end: json.loads then says what is wrong). Worked out in
    numpy a CHUNK at a time, a few bytes per quote and backslash: a body of 20 million empty strings took
    gigabytes as Python tuples."""
    view = np.frombuffer(text, np.uint8)
    quotes = _positions(view, _QUOTE)
    slashes = _positions(view, _BACKSLASH)
    if len(slashes) and len(quotes):  # a quote after an odd run of backslashes is escaped
        breaks = np.flatnonzero(np.diff(slashes) != 1)
        run_ends = np.append(slashes[breaks], slashes[-1])
        run_starts = np.insert(slashes[breaks + 1], 0, slashes[0])
        at = np.minimum(np.searchsorted(run_ends, quotes - 1), len(run_ends) - 1)  # the run before each quote
        odd = (run_ends - run_starts) % 2 == 0  # each run: whether it has an odd number of backslashes
        quotes = quotes[~((run_ends[at] == quotes - 1) & odd[at])]
    starts, ends = quotes[0::2], quotes[1::2] + 1
    if len(starts) > len(ends):
        ends = np.append(ends, np.array(len(text), ends.dtype))
    return starts, ends


def _positions(view: np.ndarray, byte: int) -> np.ndarray:
    """Where ``byte`` is in ``view``, in order, found a CHUNK at a time (each call lets the GIL go) into one
    array of int32 (int64 past 2 GiB) made once."""
    dtype = np.int32 if len(view) < 2**31 else np.int64
    chunks = range(0, len(view), CHUNK)
    counts = [int(np.count_nonzero(view[at : at + CHUNK] == byte)) for at in chunks]
    found = np.empty(sum(counts), dtype)
    filled = 0
    for at, count in zip(chunks, counts, strict=True):
        found[filled : filled + count] = np.flatnonzero(view[at : at + CHUNK] == byte) + at
        filled += count
    return found


def _scan(text: bytes, strings: tuple[np.ndarray, np.ndarray]) -> list[tuple[int, int]]:
    """The ranges [start, end) of the arrays of numbers of LARGE bytes or more outside ``strings`` (their
    starts and ends); raises RequestError where arrays and objects nest deeper than MAX_NESTING."""
    view = np.frombuffer(text, np.uint8)
    starts, ends = strings
    depth = 0
    open_at = -1  # where a run of numeric bytes still open at the end of the last chunk began
    runs: list[tuple[int, int]] = []  # the runs of LARGE bytes or more: only those are kept
    for at in range(0, len(view), CHUNK):
        part = view[at : at + CHUNK]
        # the strings over this chunk, marked by +1 where each starts and -1 where it ends
        first, last = np.searchsorted(ends, at, "right"), np.searchsorted(starts, at + len(part))
        marks = np.zeros(len(part) + 1, np.int32)
        np.add.at(marks, np.clip(starts[first:last] - at, 0, len(part)), 1)
        np.add.at(marks, np.clip(ends[first:last] - at, 0, len(part)), -1)
        outside = np.cumsum(marks[:-1], dtype=np.int32) == 0
        delta = ((part == ord("[")) | (part == ord("{"))).astype(np.int32)
        delta -= (part == ord("]")) | (part == ord("}"))
        delta[~outside] = 0
        nesting = np.cumsum(delta, dtype=np.int32) + depth
        if len(nesting) and nesting.max() > MAX_NESTING:
            raise RequestError(
                f"the request body nests arrays and objects deeper than {MAX_NESTING} levels: send a "
                "tensor's data flat (row-major), or as binary tensor data"
            )
        depth = int(nesting[-1]) if len(nesting) else depth
        numeric = _NUMERIC[part] & outside
        change = np.flatnonzero(np.diff(numeric.view(np.int8), prepend=np.int8(open_at >= 0))) + at
        if open_at >= 0 and len(change):  # the run open before this chunk ends here
            if change[0] - open_at >= LARGE:
                runs.append((open_at, int(change[0])))
            open_at, change = -1, change[1:]
        if len(change) % 2:  # a run opens and stays open past this chunk
            open_at, change = int(change[-1]), change[:-1]
        pairs = change.reshape(-1, 2)  # each run of numeric bytes: where it starts, where it ends
        runs += map(tuple, pairs[pairs[:, 1] - pairs[:, 0] >= LARGE].tolist())
    if open_at >= 0 and len(view) - open_at >= LARGE:
        runs.append((open_at, len(view)))
    found: list[tuple[int, int]] = []
    for start, end in runs:
        arrays = _arrays(text, start, end)
        if end - start - sum(e - s for s, e in arrays) >= LARGE:
            raise RequestError(
                f"the request body has an array (near byte {start}) that holds other values than numbers "
                "among its numbers (strings, true, false, null or objects): a tensor's data are all "
                "numbers, all booleans or all strings"
            )
        found += arrays
    return found


def _arrays(text: bytes, start: int, end: int) -> list[tuple[int, int]]:
    """The whole arrays of LARGE bytes or more in ``text[start:end]``, a run of numeric bytes: each from a
    ``[`` to the ``]`` that closes it (an array the run ends inside of holds something else too)."""
    found = []
    opening = text.find(b"[", start, end)
    while opening >= 0:
        closing = _closing(text, opening, end)
        if closing is None:
            break
        if closing - opening >= LARGE:
            found.append((opening, closing))
        opening = text.find(b"[", closing, end)
    return found


def _closing(text: bytes, opening: int, end: int) -> int | None:
    """Where the array that opens at ``opening`` ends (just past its ``]``), or None past ``end``."""
    view = np.frombuffer(text, np.uint8)
    depth = 0
    for at in range(opening, end, CHUNK):
        part = view[at : min(at + CHUNK, end)]
        nesting = np.cumsum((part == ord("[")).astype(np.int32) - (part == ord("]"))) + depth
        closed = np.flatnonzero(nesting == 0)
        if len(closed):
            return at + int(closed[0]) + 1
        depth = int(nesting[-1])
    return None


def _numbers(text: bytes, start: int, end: int) -> np.ndarray | None:
    """The numbers of the array ``text[start:end]``, flat; None where it holds integers numpy cannot take as
    int64 (json.loads reads those). RequestError where it is no JSON array of numbers."""
    view = np.frombuffer(text, np.uint8, count=end - start, offset=start)
    last, white = _C, False  # the byte before the chunk (whitespace aside): "," leads to the opening "["
    parts: list[np.ndarray] = []
    at = 0
    while at < len(view):
        stop = min(at + CHUNK, len(view))
        if stop < len(view):  # a chunk ends after a comma: no number is cut
            comma = text.find(b",", start + stop, end)
            stop = len(view) if comma < 0 else comma - start + 1
        part = view[at:stop]
        classes = _CLASS[part]
        kept = np.flatnonzero(classes != _W)
        if len(kept):
            shown = classes[kept]
            before = np.concatenate(([last], shown[:-1]))
            first = white if kept[0] == 0 else True
            spaced = np.concatenate(([first], classes[kept[1:] - 1] == _W))
            if _BAD[before * 8 + shown].any() or ((before == _D) & (shown == _D) & spaced).any():
                raise _not_numbers(start, "misplaced commas, brackets or spaces")
            last = shown[-1]
            tokens = bytes(part).translate(_BRACKETS_TO_COMMAS, b" \t\r\n")
            if b",," in tokens:  # where brackets were (most chunks of a flat array have none)
                tokens = _COMMAS.sub(b",", tokens)
            tokens = tokens.strip(b",")
            if tokens:
                try:
                    values = np.asarray(json.loads(b"[" + tokens + b"]"))
                except ValueError as exc:  # JSONDecodeError: a token that is no JSON number ("1.", "01")
                    raise _not_numbers(start, str(exc)) from None
                if values.dtype not in (np.int64, np.float64):
                    log.debug("an array of the request holds integers past int64: read by json.loads")
                    return None
                parts.append(values)
        white = bool(classes[-1] == _W)
        at = stop
    return np.concatenate(parts) if parts else np.zeros(0, np.float64)


def _not_numbers(start: int, why: str) -> RequestError:
    return RequestError(
        f"the request body is no valid JSON: the array of numbers at byte {start} holds something that is no "
        f"JSON number ({why})"
    )


def _put_back(doc: Any, found: dict[str, np.ndarray]) -> Any:
    """``doc`` with each placeholder (a list of one string, a key of ``found``) replaced by its array;
    walked without recursion."""
    if _placeholder(doc, found):
        return found[doc[0]]
    stack = [doc] if isinstance(doc, (dict, list)) else []
    while stack:
        node = stack.pop()
        for key, value in list(node.items() if isinstance(node, dict) else enumerate(node)):
            if _placeholder(value, found):
                node[key] = found[value[0]]
            elif isinstance(value, (dict, list)):
                stack.append(value)
    return doc


def _placeholder(value: Any, found: dict[str, np.ndarray]) -> bool:
    return isinstance(value, list) and len(value) == 1 and isinstance(value[0], str) and value[0] in found
