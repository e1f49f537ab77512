"""Device property keys shaped like ``openvino.device``.

import hetero_cli.device as device
core.compile_model(model, "HETERO", {device.priorities: "OPENVINO,CPU"})

priorities (MULTI_DEVICE_PRIORITIES: the devices "HETERO" alone tries, highest first, as a string
"OPENVINO,CPU" or a list of names; ``dict([device.priorities("OPENVINO", "CPU")])`` is such a config);
properties (DEVICE_PROPERTIES: {device: {key: value}} in one config, or its JSON text); full_name
(FULL_DEVICE_NAME, read-only: get_property's). A value of another type is a ConfigError when it is set,
an unknown or repeated device a DeviceError when a compile reads the list.
"""

from __future__ import annotations

from .properties import Property

priorities = Property("MULTI_DEVICE_PRIORITIES")
properties = Property("DEVICE_PROPERTIES")
full_name = Property("FULL_DEVICE_NAME")
