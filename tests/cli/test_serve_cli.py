"""``hetero serve --engine local`` as a user runs it, in a subprocess: it serves a real split until SIGTERM
or Ctrl-C, answering the requests in flight before it exits 0; a port in use or a bad --name is one line
and exit 2, with nothing compiled and nothing left running."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import pytest
from support.helpers import ROOT
from support.serving import chain_model, client, in_flight, infer, reference, wait_until

START_S = 240.0


def _command(*args: object) -> list[str]:
    return [sys.executable, "-c", "from hetero_cli.cli import hetero; hetero()", "serve", *map(str, args)]


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("OPENVINO_HETERO_VISUALIZE", "HETERO_DEBUG")}
    env["PYTHONPATH"] = str(ROOT)
    return env


class Server:
    """A ``hetero serve`` process: its URL once it listens, its output lines so far."""

    def __init__(self, *args: object) -> None:
        self.process = subprocess.Popen(
            _command(*args, "--port", 0),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=_env(),
        )
        self.lines: list[str] = []
        self.errors: list[str] = []
        self._readers = [
            threading.Thread(target=self._read, args=(self.process.stdout, self.lines), daemon=True),
            threading.Thread(target=self._read, args=(self.process.stderr, self.errors), daemon=True),
        ]
        for reader in self._readers:
            reader.start()
        assert wait_until(lambda: self.url is not None or self.process.poll() is not None, START_S), (
            "no start"
        )
        assert self.url is not None, (self.lines, self.errors)

    @staticmethod
    def _read(stream, into: list[str]) -> None:
        for line in stream:
            into.append(line.rstrip("\n"))

    @property
    def url(self) -> str | None:
        found = next((re.search(r"at (http://\S+):", line) for line in self.lines if "Serving" in line), None)
        return found[1] if found else None

    def stop(self, sig: int) -> int:
        """Send ``sig``; the exit status once it has exited."""
        self.process.send_signal(sig)
        code = self.process.wait(120)
        for reader in self._readers:
            reader.join(10)
        return code


@contextmanager
def running(*args: object) -> Iterator[Server]:
    server = Server(*args)
    try:
        yield server
    finally:
        if server.process.poll() is None:
            server.process.kill()
            server.process.wait(30)


@pytest.mark.slow
@pytest.mark.openvino
def test_sigterm_during_a_request_answers_it_then_exits_0(tmp_path):
    path = chain_model(tmp_path / "chain.onnx", width=256, layers=8)
    x = np.random.default_rng(0).standard_normal((4096, 256)).astype(np.float32)
    with running("-m", path, "-d", "HETERO:OPENVINO,CPU", "--name", "chain-1") as server:
        url = server.url
        meta = client(url).get_model_metadata("chain-1")
        assert meta["inputs"] == [{"name": "x", "datatype": "FP32", "shape": [-1, 256]}]
        answer: list[np.ndarray] = []
        request = threading.Thread(target=lambda: answer.append(infer(url, "chain-1", x)))
        request.start()
        assert wait_until(lambda: in_flight(url) >= 1)
        code = server.stop(signal.SIGTERM)
        request.join(120)
    assert code == 0, server.errors
    assert len(answer) == 1
    np.testing.assert_allclose(answer[0], reference(path, x), rtol=1e-4, atol=1e-5)
    assert not [e for e in server.errors if "Traceback" in e or "ERROR" in e], server.errors
    assert any("Stopped" in line for line in server.lines)


@pytest.mark.slow
@pytest.mark.openvino
def test_ctrl_c_stops_the_default_model_served_under_its_stem():
    with running("-d", "HETERO:OPENVINO,CPU") as server:
        text = "\n".join(server.lines)
        assert "/v2/models/digits/infer" in text
        assert "PERFORMANCE_HINT=THROUGHPUT" in text  # a session per subgraph: the pipeline's stages
        assert client(server.url).get_model_metadata("digits")["inputs"][0]["name"] == "image"
        assert server.stop(signal.SIGINT) == 0, server.errors
    assert not server.errors, server.errors


def _one_error(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode == 2, (result.stdout, result.stderr)
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("[ ERROR ] "), result.stderr
    return lines[0]


def test_a_port_in_use_is_one_line_exit_2_and_nothing_compiled(tmp_path):
    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen(1)
    port = taken.getsockname()[1]
    try:
        result = subprocess.run(
            _command("-d", "CPU", "--port", port),
            capture_output=True, text=True, timeout=300, env=_env(), cwd=tmp_path,
        )  # fmt: skip
    finally:
        taken.close()
    line = _one_error(result)
    assert f"port {port} on 127.0.0.1 is in use" in line and "give another --port" in line
    assert "subgraph" not in result.stdout  # refused before the compile
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--name", "a/b"], "--name 'a/b' cannot name a model in a URL"),
        (["--engine", "nope"], "Invalid value for '--engine'"),
        (["--port", "70000"], "--port 70000 is no TCP port"),
        (["-shape", "[1,2]"], "-shape gives 'image' the shape [1, 2]"),
    ],
)
def test_bad_options_are_one_line_and_exit_2(tmp_path, args, says):
    result = subprocess.run(
        _command("-d", "CPU", *args),
        capture_output=True,
        text=True,
        timeout=300,
        env=_env(),
        cwd=tmp_path,
    )
    assert says in _one_error(result)
    assert list(Path(tmp_path).iterdir()) == []


@pytest.mark.slow
@pytest.mark.openvino
def test_an_exported_split_is_served_as_its_onnx_is(tmp_path):
    """A production node serves `hetero compile`'s file: no probe, no partition, the same answers."""
    import hetero_cli as hc

    path = chain_model(tmp_path / "chain.onnx", width=64, layers=4)
    core = hc.Core()
    model = core.read_model(path)
    model.set_affinities(
        {n.friendly_name: ("CPU" if i % 2 else "OPENVINO") for i, n in enumerate(model.get_ops())}
    )
    exported = tmp_path / "chain.hetero"
    core.compile_model(model, "HETERO:OPENVINO,CPU").export_model(exported)
    x = np.random.default_rng(1).standard_normal((8, 64)).astype(np.float32)
    with running("-m", exported, "-d", "HETERO:OPENVINO,CPU") as server:
        assert "/v2/models/chain/infer" in "\n".join(server.lines)
        np.testing.assert_allclose(infer(server.url, "chain", x), reference(path, x), rtol=1e-4, atol=1e-5)
        assert server.stop(signal.SIGTERM) == 0, server.errors
    assert not [e for e in server.errors if "Traceback" in e or "ERROR" in e], server.errors
