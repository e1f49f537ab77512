"""Benchmark: what ``hetero benchmark`` measures and writes, in benchmark_app's conventions.

    shapes, notes = benchmark.data_shapes(model, shape="[1,1,32,32]")
    feeds = benchmark.input_sets(model, shapes, files={}, count=4)        # seeded random data
    result = benchmark.measure(compiled, feeds, nireq=4, api="async", niter=None, duration_s=10)
    print(result.latency_median_ms, result.throughput_fps)

One job per module: shapes (the -shape / -data_shape grammar, each input's concrete shape, the data's
size), inputs (-i files, images, random tensors, one input set per request), measure (the sync and async
loops), counters (performance counters averaged and tabled), reports (the CSV / JSON reports). This
package exports the names the CLI uses.
"""

from __future__ import annotations

from ...errors import BenchmarkError
from .counters import SORT_MODES, average_counters, sorted_counters
from .inputs import check_random_data, image_dims, input_sets, parse_input_files
from .measure import measure, planned_iterations
from .reports import REPORT_TYPES, config_document, configuration_setup, write_reports
from .shapes import batch_size, data_shapes

__all__ = [
    "REPORT_TYPES",
    "SORT_MODES",
    "BenchmarkError",
    "average_counters",
    "batch_size",
    "check_random_data",
    "config_document",
    "configuration_setup",
    "data_shapes",
    "image_dims",
    "input_sets",
    "measure",
    "parse_input_files",
    "planned_iterations",
    "sorted_counters",
    "write_reports",
]
