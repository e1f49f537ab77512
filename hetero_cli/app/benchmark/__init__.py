"""Benchmark: what ``hetero benchmark`` measures and writes, in benchmark_app's conventions.

    shapes, filled = benchmark.data_shapes(model, shape="[1,1,32,32]")
    feeds = benchmark.input_sets(model, shapes, files={}, count=4)        # seeded random data
    result = benchmark.measure(compiled, feeds, nireq=4, api="async", niter=None, duration_s=10)
    print(result.latency_median_ms, result.throughput_fps)

One job per module: shapes (the -shape / -data_shape grammar, each input's concrete shape, the data's
size), inputs (-i files, images, random tensors, one input set per request), int_ranges (the values
random integers are drawn from), measure (the sync and async
loops), counters (performance counters averaged and tabled), reports (the CSV / JSON reports), settings
(hint, API, requests and per-device values from benchmark_app's options), summary (--json, -exec_graph_path). This
package exports the names the CLI uses.
"""

from __future__ import annotations

from ...errors import BenchmarkError
from .counters import SORT_MODES, average_counters, sorted_counters
from .inputs import (
    check_random_data,
    data_dims,
    file_data_shapes,
    files_read,
    image_dims,
    input_sets,
    parse_input_files,
)
from .int_ranges import IntRange, integer_ranges, parse_int_ranges, range_text
from .measure import Measurement, measure, planned_iterations
from .reports import REPORT_TYPES, config_document, configuration_setup, write_reports
from .settings import RunMode, check_image_values, element_types, per_device, per_input_values, run_mode
from .shapes import FilledDims, batch_size, data_shapes, input_dims
from .summary import compile_summary, exec_graph, summary

__all__ = [
    "REPORT_TYPES",
    "SORT_MODES",
    "BenchmarkError",
    "FilledDims",
    "IntRange",
    "Measurement",
    "RunMode",
    "average_counters",
    "batch_size",
    "check_image_values",
    "check_random_data",
    "compile_summary",
    "config_document",
    "configuration_setup",
    "data_dims",
    "data_shapes",
    "element_types",
    "exec_graph",
    "file_data_shapes",
    "files_read",
    "image_dims",
    "input_dims",
    "input_sets",
    "integer_ranges",
    "measure",
    "parse_input_files",
    "parse_int_ranges",
    "per_device",
    "per_input_values",
    "planned_iterations",
    "range_text",
    "run_mode",
    "sorted_counters",
    "summary",
    "write_reports",
]
