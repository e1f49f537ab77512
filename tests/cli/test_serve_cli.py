"""``hetero serve --engine local`` as a user runs it, in a subprocess: it serves a real split until SIGTERM
or Ctrl-C, answering the requests in flight before it exits 0; a port in use or a bad --name is one line
and exit 2, with nothing compiled and nothing left running."""

from __future__ import annotations

import http.client
import json
import os
import re
import select
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import urlparse

import numpy as np
import pytest
import tritonclient.http as httpclient
from support.helpers import ROOT
from support.serving import chain_model, client, in_flight, infer, post, reference, wait_until

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


def _stalled_client(url: str) -> socket.socket:
    """A client that sends its headers (Content-Length 5000) and 12 bytes of body, then nothing."""
    parts = urlparse(url)
    sock = socket.create_connection((parts.hostname, parts.port), timeout=START_S)
    sock.sendall(
        f"POST /v2/models/digits/infer HTTP/1.1\r\nHost: {parts.netloc}\r\nContent-Length: 5000\r\n\r\n".encode()
        + b'{"inputs": [',
    )
    return sock


def _answer(sock: socket.socket) -> bytes:
    answer = b""
    while chunk := sock.recv(65536):
        answer += chunk
    return answer


@pytest.mark.openvino
def test_sigterm_cuts_a_client_stalled_mid_body_and_exits_0_saying_so():
    with running("-d", "HETERO:OPENVINO,CPU") as server:
        stalled = _stalled_client(server.url)
        assert wait_until(lambda: in_flight(server.url) >= 1)
        code = server.stop(signal.SIGTERM)  # waits (120 s at most) for the exit
        answer = _answer(stalled)
        stalled.close()
    assert code == 0, server.errors
    assert answer.startswith(b"HTTP/1.1 503") and b"the server is stopping" in answer, answer
    assert not [e for e in server.errors if "Traceback" in e or "ERROR" in e], server.errors
    assert "Stopped: of the 1 request(s) in flight, 0 answered, 1 cut" in "\n".join(server.lines)
    assert not any("every request in flight was answered" in line for line in server.lines)


def _entry(*args: object) -> list[str]:
    """``hetero serve`` as the console script runs it (hetero_cli.entry: SIGTERM is taken from the start)."""
    return [sys.executable, "-c", "from hetero_cli.entry import hetero; hetero()", "serve", *map(str, args)]


def _lines_until(process: subprocess.Popen, text: str, timeout_s: float) -> list[str]:
    """The child's stdout up to a line holding ``text``, read from its pipe as it comes (no buffer of the
    file object's, which communicate() reads after); AssertionError, the child killed, where no such line
    comes within ``timeout_s`` (a test that fails, never one that hangs the suite)."""
    assert process.stdout is not None
    fd = process.stdout.fileno()
    deadline = time.monotonic() + timeout_s
    got = b""
    while text.encode() not in got:
        ready, _, _ = select.select([fd], [], [], max(deadline - time.monotonic(), 0.0))
        chunk = os.read(fd, 65536) if ready else b""
        if not chunk:  # the deadline passed, or the child closed its stdout (it ended)
            process.kill()
            raise AssertionError(
                f"no line with {text!r} within {timeout_s:g} s: {got.decode(errors='replace')!r}"
            )
        got += chunk
    return got.decode(errors="replace").splitlines(keepends=True)


def _importing(pid: int) -> bool:
    """Whether process ``pid`` has begun to import the command line (numpy's core is mapped)."""
    try:
        with open(f"/proc/{pid}/maps", encoding="ascii", errors="replace") as maps:
            return "_multiarray_umath" in maps.read()
    except FileNotFoundError:  # it has exited already: the assertions after say how
        return True


@pytest.mark.openvino
@pytest.mark.parametrize("when", ["importing", "Reading the model", "subgraph2", "Serving"])
def test_sigterm_at_any_moment_of_start_up_exits_0(when):
    """SIGTERM while the console script imports the command line, once it reads the model, once it has
    compiled, once it serves: each exits 0 with a line that says it stopped, no traceback."""
    if when == "importing" and not Path("/proc/self/maps").exists():
        pytest.fail("this case needs /proc to see the process import; run it on Linux")
    process = subprocess.Popen(
        _entry("-d", "HETERO:OPENVINO,CPU", "--port", 0),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=_env(),
    )
    lines: list[str] = []
    if when == "importing":
        assert wait_until(lambda: _importing(process.pid), START_S)
    else:
        lines = _lines_until(process, when, START_S)
    process.send_signal(signal.SIGTERM)
    out, err = process.communicate(timeout=START_S)
    lines += out.splitlines()
    assert process.returncode == 0, (lines, err)
    assert "Traceback" not in err and "ERROR" not in err, err
    assert "Stopped" in lines[-1], lines


@pytest.mark.openvino
def test_a_zero_batch_is_a_400_and_the_next_requests_are_answered():
    good = np.random.default_rng(5).random((1, 1, 32, 32), dtype=np.float32)
    with running("-d", "HETERO:OPENVINO,CPU") as server:
        want = _digits(server.url, good)
        zero = {"inputs": [{"name": "image", "shape": [0, 1, 32, 32], "datatype": "FP32", "data": []}]}
        status, doc = post(server.url, "/v2/models/digits/infer", json.dumps(zero).encode())
        assert status == 400 and "has no element (dimension 0 is 0)" in doc["error"], doc
        for _ in range(2):
            np.testing.assert_array_equal(_digits(server.url, good), want)
        assert server.stop(signal.SIGTERM) == 0


def _digits(url: str, image: np.ndarray) -> np.ndarray:
    given = httpclient.InferInput("image", list(image.shape), "FP32")
    given.set_data_from_numpy(image)
    return client(url).infer("digits", [given]).as_numpy("probabilities")


def _rss_mib(pid: int) -> float:
    with open(f"/proc/{pid}/status", encoding="ascii") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS")


@pytest.mark.slow
@pytest.mark.openvino
@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="reads the server's memory from /proc")
def test_a_large_json_body_leaves_the_server_answering_and_gives_its_memory_back():
    """A 48 MiB JSON body of numbers (refused: too many for its shape) is parsed while the health checks
    go on being answered (json.loads of it whole held the event loop, and the GIL, for seconds: none was
    answered between the body sent and its answer); once refused, the server's memory is back near what
    it was after a small request (the reference)."""
    count = 12 << 20
    body = (
        '{"inputs": [{"name": "image", "shape": [1, 1, 32, 32], "datatype": "FP32", "data": ['
        + "0.5," * (count - 1)
        + "0.5]}]}"
    ).encode()
    good = np.random.default_rng(6).random((1, 1, 32, 32), dtype=np.float32)
    with running("-d", "HETERO:OPENVINO,CPU") as server:
        _digits(server.url, good)
        reference = _rss_mib(server.process.pid)
        answered: list[float] = []
        done = threading.Event()

        def health() -> None:
            while not done.is_set():
                connection = http.client.HTTPConnection(urlparse(server.url).netloc, timeout=START_S)
                connection.request("GET", "/v2/health/live")
                connection.getresponse().read()
                connection.close()
                answered.append(time.monotonic())

        checker = threading.Thread(target=health)
        checker.start()
        try:
            connection = http.client.HTTPConnection(urlparse(server.url).netloc, timeout=START_S)
            connection.putrequest("POST", "/v2/models/digits/infer")
            connection.putheader("Content-Length", str(len(body)))
            connection.endheaders(body)
            sent = time.monotonic()  # the body is sent (the server reads what the sockets still hold at once)
            response = connection.getresponse()
            status, doc = response.status, json.loads(response.read())
            came = time.monotonic()
            connection.close()
        finally:
            done.set()
            checker.join(START_S)
        assert status == 400 and f"{count} value(s) in data" in doc["error"], doc
        # the second half of the time from the body sent to its answer: parsing (the socket's tail is read
        # at once); json.loads on the event loop answered none there
        during = [t for t in answered if (sent + came) / 2 < t < came]
        assert len(during) >= 3, f"{len(during)} health checks answered while the body was parsed"
        _digits(server.url, good)
        bound = reference + len(body) / 2**20 / 2  # half the body: the 6-fold peak has gone back
        assert wait_until(lambda: _rss_mib(server.process.pid) < bound), (
            reference,
            _rss_mib(server.process.pid),
        )
        assert server.stop(signal.SIGTERM) == 0
