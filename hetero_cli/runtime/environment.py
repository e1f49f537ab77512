"""What the installed ONNX Runtime offers the layers above the runtime, which never import it: its version,
its log level, the models it can load, and Ctrl-C while it compiles: the sessions being created now (a
spinner names a long one), and, for a command line, Ctrl-C ending the process at once while one is
(ort.session: some ORT releases hold Python's GIL for a whole compile).

    interrupt_ends_process(True)      # the command line, at its start
    for creating in sessions_in_creation():
        print(f"still {creating.doing} ({creating.seconds:.0f} s)")
"""

from __future__ import annotations

import onnx

from ..errors import ModelError
from ..graph.operators import older_than, since_version
from ..ort.session import QUIET, Creating, in_creation, interrupt_ends_process, ort, unloadable
from ..ort.versions import OLDEST_OPSET, runtime_versions

__all__ = [
    "Creating",
    "check_loadable",
    "interrupt_ends_process",
    "runtime_versions",
    "sessions_in_creation",
    "set_log_level",
]


def set_log_level(debug: bool) -> None:
    """ORT's own log lines: warnings and up where ``debug``, else fatal only (noise a user cannot act on)."""
    ort.set_default_logger_severity(2 if debug else QUIET)


def check_loadable(proto: onnx.ModelProto, where: str) -> None:
    """Raise ModelError if this ONNX Runtime loads no model of ``proto``'s IR version and default opset,
    or if a node is an op version older than the oldest opset ONNX Runtime supports (no EP has a kernel
    for it: Add at opset 1).

    ``where`` names the model in the message (its path, "the model given as bytes"). Why: a model ORT
    cannot load is refused when it is read, with the way out, rather than at the first session.
    """
    opset = next((o.version for o in proto.opset_import if o.domain in ("", "ai.onnx")), None)
    refused = unloadable(proto.ir_version, opset) if opset is not None else None
    if refused is not None:
        raise ModelError(
            f"{where}: ONNX Runtime {ort.__version__} loads no model of IR version {proto.ir_version} and "
            f"opset {opset} ({refused}): convert it to an IR version and opset this ONNX Runtime supports "
            "(onnx.version_converter), or re-export it"
        )
    legacy = older_than(proto, OLDEST_OPSET)
    if legacy:
        use, op = legacy[0], legacy[0].node.op_type
        raise ModelError(
            f"{where}: {use.label} is {op}-{since_version(use)} (the model's {use.opset_text}), older than "
            f"ONNX Runtime supports (opset {OLDEST_OPSET} and later, where {op} is "
            f"{op}-{since_version(use, OLDEST_OPSET)}): convert the model to opset {OLDEST_OPSET} or later "
            "(onnx.version_converter.convert_version), or re-export it"
        )


def sessions_in_creation() -> list[Creating]:
    """The sessions ONNX Runtime is creating now (compiles, probes), on any thread, the longest-running
    first: each says what it is (``doing``) and for how many ``seconds``."""
    return in_creation()
