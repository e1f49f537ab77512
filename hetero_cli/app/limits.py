"""Input size limits shared by the commands that allocate input data (image tensors, benchmark data).

An input too big for this machine is refused with a message before anything is allocated, instead of
allocating until MemoryError (or the kernel's OOM killer) ends the command.
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
        try:
            text = Path(path).read_text().strip()
        except OSError:
            continue
        if text.isdigit() and 0 < int(text) < (total or int(text) + 1):
            total = int(text)
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


def over_limit(nbytes: int) -> str | None:
    """None if ``nbytes`` fit under memory_limit(), else the words for a message: 'over the limit of ...'."""
    limit = memory_limit()
    if nbytes <= limit:
        return None
    return f"over the limit of {size_text(limit)} ({MEMORY_LIMIT_TEXT})"
