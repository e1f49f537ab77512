"""The runtime layer: a plan compiled into ONNX Runtime sessions, inference requests over them, the
pipeline that overlaps requests across devices, and performance counters. Layers above (core, app, cli)
import these names from here, not from the modules inside.
"""

from .artifacts.importing import is_export
from .async_queue import AsyncInferQueue
from .compiled import Compiled
from .compiled_model import CompiledModel
from .compiled_subgraph import CompiledSubgraph
from .compiler import compile_plan, compile_with_fallback
from .environment import (
    Creating,
    check_loadable,
    interrupt_ends_process,
    runtime_versions,
    sessions_in_creation,
    set_log_level,
)
from .fallback import Fallback
from .infer_request import InferRequest
from .inputs import unfeedable
from .pipeline import Pipeline
from .profiling import (
    NOT_RUN,
    ProfilingInfo,
    Span,
    SubgraphSummary,
    Timeline,
    counter_tables,
    format_counters,
    subgraph_summaries,
)
from .revision import Move, Revision
from .tap import tap

__all__ = [
    "NOT_RUN",
    "AsyncInferQueue",
    "Compiled",
    "CompiledModel",
    "CompiledSubgraph",
    "Creating",
    "Fallback",
    "InferRequest",
    "Move",
    "Pipeline",
    "ProfilingInfo",
    "Revision",
    "Span",
    "SubgraphSummary",
    "Timeline",
    "check_loadable",
    "compile_plan",
    "compile_with_fallback",
    "counter_tables",
    "format_counters",
    "interrupt_ends_process",
    "is_export",
    "runtime_versions",
    "sessions_in_creation",
    "set_log_level",
    "subgraph_summaries",
    "tap",
    "unfeedable",
]
