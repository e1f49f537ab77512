"""pytest's hooks for the whole suite; shared helpers live in tests/support/ (the one support package)."""

from __future__ import annotations

from support.helpers import HAS_OPENVINO, requires_openvino


def pytest_collection_modifyitems(config, items):
    """Tests marked ``@pytest.mark.openvino`` skip cleanly where the OpenVINO EP is missing."""
    if HAS_OPENVINO:
        return
    for item in items:
        if item.get_closest_marker("openvino") is not None:
            item.add_marker(requires_openvino)
