"""The command line, in OpenVINO's sample conventions, over hetero-cli's public API.

    hetero classify | benchmark | query | validate | tune | serve | devices
    hello_classification MODEL IMAGE DEVICE        (= hetero classify)
    hello_query_device                             (= hetero devices)

Errors print one line on stderr, ``[ ERROR ] what is wrong: what would fix it``, and exit with 2 for usage
errors (bad option or file argument, malformed device string, unknown device, config key or affinity; a
model or image that cannot be read or used) or 1 for failures at run time (no listed device available here,
a subgraph that does not compile or run, a file that cannot be written). ``--debug`` adds the traceback.
Warnings from the library (logger "hetero_cli") print as ``[ WARNING ] ...`` on stderr, once each.

Modules: runner (errors -> exit codes, warning lines, files removed on failure), output, options, setup,
files, commands/ (one module per command), scripts (the group and the console scripts).
"""

from __future__ import annotations

from .commands.benchmark import benchmark
from .commands.classify import classify
from .commands.devices import devices
from .commands.query import query
from .commands.serve import serve
from .scripts import hello_classification, hello_query_device, hetero, main

__all__ = [
    "benchmark",
    "classify",
    "devices",
    "hello_classification",
    "hello_query_device",
    "hetero",
    "main",
    "query",
    "serve",
]
