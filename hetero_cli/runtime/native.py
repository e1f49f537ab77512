"""Ctrl-C while ONNX Runtime compiles, for the layers above, which never import it: the sessions being
created now (a spinner names a long one), and, for a command line, Ctrl-C ending the process at once
while one is (ort.session: some ORT releases hold Python's GIL for a whole compile).

    interrupt_ends_process(True)      # the command line, at its start
    for creating in sessions_in_creation():
        print(f"still {creating.doing} ({creating.seconds:.0f} s)")
"""

from __future__ import annotations

from ..ort.session import Creating, in_creation, interrupt_ends_process

__all__ = ["Creating", "interrupt_ends_process", "sessions_in_creation"]


def sessions_in_creation() -> list[Creating]:
    """The sessions ONNX Runtime is creating now (compiles, probes), on any thread, the longest-running
    first: each says what it is (``doing``) and for how many ``seconds``."""
    return in_creation()
