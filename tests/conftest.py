"""pytest's hooks for the whole suite; shared helpers live in tests/support/ (the one support package)."""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.helpers import HAS_OPENVINO, requires_openvino

#: the environment variables hetero-cli reads (hetero --help lists them): a test sets the ones it needs
HETERO_ENVIRONMENT = ("OPENVINO_HETERO_VISUALIZE", "HETERO_DEBUG")


def pytest_collection_modifyitems(config, items):
    """Tests marked ``@pytest.mark.openvino`` skip cleanly where the OpenVINO EP is missing."""
    if HAS_OPENVINO:
        return
    for item in items:
        if item.get_closest_marker("openvino") is not None:
            item.add_marker(requires_openvino)


@pytest.fixture(autouse=True)
def own_places(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """Every test runs in places of its own: a temporary folder (tempfile's and TMPDIR, which subprocesses
    inherit), a current directory, and none of hetero-cli's environment variables from the caller's shell.

    The system's temporary folder and the repository root (where pytest starts) are shared with every
    other process: a test that checks what is left there (support.robust.nothing_left_behind, the
    profiler's folders) would see what another test or program writes there at the same time, as under
    ``pytest -n`` (pytest-xdist), and a file a test leaves in its current directory would land in the
    source tree. Yields the folder holding both (``temp/`` and ``cwd/``); neither is the test's tmp_path,
    so a test may still expect its tmp_path to hold only what it wrote.
    """
    own = Path(tempfile.mkdtemp(prefix="own-", dir=tmp_path_factory.getbasetemp()))
    (own / "temp").mkdir()
    (own / "cwd").mkdir()
    monkeypatch.setenv("TMPDIR", str(own / "temp"))
    monkeypatch.setattr(tempfile, "tempdir", str(own / "temp"))
    monkeypatch.chdir(own / "cwd")
    for name in HETERO_ENVIRONMENT:
        monkeypatch.delenv(name, raising=False)
    yield own
