"""Memory limits shared by the commands that allocate data (image tensors, benchmark data, and the
tensors one inference makes at the shapes a run asks for).

Data too big for this machine is refused with a message before anything is allocated, instead of
allocating until MemoryError (or the kernel's OOM killer) ends the command: at most half the machine's
memory (memory_limit), and never more than is available when the command starts (available_memory).
"""

from __future__ import annotations

import functools
import math
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

MEMORY_LIMIT_TEXT = "half of this machine's memory"
# a container's memory limit: cgroup v2, then v1 (whose "no limit" is a huge number, ignored as above RAM)
_CGROUP_LIMITS = ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes")
# what the container uses of it, in the same order
_CGROUP_USAGE = ("/sys/fs/cgroup/memory.current", "/sys/fs/cgroup/memory/memory.usage_in_bytes")
_MEMINFO = "/proc/meminfo"


@functools.cache
def memory_limit() -> int:
    """The most bytes one command's input data may take: half the memory here (physical, or the
    container's cgroup limit where lower; 16 GiB assumed where neither can be read).

    >>> memory_limit() > 0
    True
    """
    try:
        total = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (AttributeError, OSError, ValueError):
        total = 0
    for path in _CGROUP_LIMITS:
        limit = _read_int(path)
        if limit is not None and 0 < limit < (total or limit + 1):
            total = limit
    if total <= 0:
        total = 16 * 2**30
    return total // 2


def data_bytes(dtype: Any, shape: Sequence[int]) -> int:
    """The bytes an array of ``dtype`` and ``shape`` takes (Python ints: no overflow for absurd shapes).

    >>> data_bytes("float32", (2, 3))
    24
    """
    return math.prod(int(d) for d in shape) * np.dtype(dtype).itemsize


def size_text(nbytes: int) -> str:
    """A byte count for messages.

    >>> size_text(512), size_text(12 * 2**20), size_text(3 * 2**40)
    ('512 bytes', '12.0 MiB', '3.0 TiB')
    """
    if nbytes < 1024:
        return f"{nbytes} bytes"
    value = float(nbytes)
    for unit in ("KiB", "MiB", "GiB", "TiB", "PiB", "EiB"):
        value /= 1024.0
        if value < 1024.0 or unit == "EiB":
            return f"{value:.1f} {unit}"
    raise AssertionError("unreachable")  # pragma: no cover


def available_memory() -> int | None:
    """The bytes of memory available now (the kernel's MemAvailable, or free pages where there is no
    /proc/meminfo; less where a container's cgroup leaves less of its limit unused), read at each call;
    None where nothing tells."""
    found = _meminfo_available()
    for limit_path, usage_path in zip(_CGROUP_LIMITS, _CGROUP_USAGE, strict=True):
        limit, usage = _read_int(limit_path), _read_int(usage_path)
        if limit is None or usage is None:
            continue
        if found is None or limit - usage < found:  # v1's "no limit", a huge number, never is
            found = max(limit - usage, 0)
        break
    return found


def over_limit(nbytes: int) -> str | None:
    """None if ``nbytes`` fit under memory_limit() and in available_memory(), else the words for a
    message: 'over the limit of ...' or 'over the ... of memory available now'."""
    limit, available = memory_limit(), available_memory()
    if available is not None and available < limit and nbytes > available:
        return f"over the {size_text(available)} of memory available now"
    if nbytes <= limit:
        return None
    return f"over the limit of {size_text(limit)} ({MEMORY_LIMIT_TEXT})"


def _meminfo_available() -> int | None:
    """MemAvailable of /proc/meminfo in bytes, else the free physical pages; None where neither reads."""
    try:
        for line in Path(_MEMINFO).read_text().splitlines():
            key, _, value = line.partition(":")
            if key == "MemAvailable" and value.split() and value.split()[0].isdigit():
                return int(value.split()[0]) * 1024
    except OSError:
        pass
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (AttributeError, OSError, ValueError):
        return None


def _read_int(path: str) -> int | None:
    """The integer a cgroup file holds, None where it cannot be read or holds none ("max")."""
    try:
        text = Path(path).read_text().strip()
    except OSError:
        return None
    return int(text) if text.isdigit() else None
