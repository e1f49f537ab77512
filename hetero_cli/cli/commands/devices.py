"""``hetero devices`` (console script ``hello_query_device``): every available device with its properties in
OpenVINO's hello_query_device layout, then the known devices this machine lacks and how to get each."""

from __future__ import annotations

from typing import Any

import click

from ...core import DEVICE_READ_ONLY, SUPPORTED_PROPERTIES, Core
from ...errors import HeteroError
from ...placement import config as cfg
from ...placement import devices as registry
from ..options import debug_option
from ..output import info
from ..runner import CONTEXT, Command


def _value_text(value: Any) -> str:
    """A property's value as hello_query_device prints it (YES/NO, lists comma-separated)."""
    if value is None:
        return "(not set)"
    if isinstance(value, bool):
        return "YES" if value else "NO"
    if isinstance(value, list | tuple):
        return ", ".join(str(v) for v in value)
    return str(value)


@click.command(
    cls=Command,
    context_settings=CONTEXT,
    short_help="List devices, like hello_query_device.",
)
@debug_option
def devices(debug: bool) -> None:
    """Every available device with its execution provider, full name and properties (OpenVINO's
    hello_query_device layout), then the known devices this machine lacks and how to get each.

    \b
      hello_query_device
      hetero devices | grep -A3 OPENVINO
      hetero devices | grep -A8 "not available here"     (what another ONNX Runtime flavour would add)
    """
    core = Core()
    info("Available devices:")
    for name in core.available_devices:
        info(f"{name} :")
        info(f"\t{SUPPORTED_PROPERTIES}:")
        for key in DEVICE_READ_ONLY:
            info(f"\t\t{key}: {core.get_property(name, key)}")
        for key in core.get_property(name, SUPPORTED_PROPERTIES):
            try:
                value = _value_text(core.get_property(name, key))
            except HeteroError:
                value = "UNSUPPORTED"
            info(f"\t\t{key}: {value}")
        info()
    missing = registry.unavailable_known_devices()
    if missing:
        info("Known devices not available here:")
        for name, reason in missing:
            info(f"{name} : {reason}")
        info()
    info(f"HETERO : combines the devices above, e.g. -d HETERO:{','.join(core.available_devices[::-1])}")
    info(f"\t{SUPPORTED_PROPERTIES}: {', '.join(cfg.HETERO_KEYS)}")
