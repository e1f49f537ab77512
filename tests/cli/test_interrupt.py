"""Ctrl-C while ONNX Runtime compiles (issue 29, item 6).

The main thread is never inside a native compile (a session is created on a thread of its own, waited for
in short slices), so where ORT lets Python's GIL go while it compiles, a command stops at once with the
Ctrl-C status (130) and ``[ ERROR ] interrupted``, leaving nothing behind. The in-process tests check that
with a compile stand-in: an observe_sessions callback that blocks on an Event where the session is created
(a wait a Ctrl-C cannot break, as ORT's native compile), and ``_thread.interrupt_main`` as the Ctrl-C,
which, like a signal, is taken only when the main thread runs Python.

ORT 1.24 holds the GIL for a whole compile, so no Python code runs until it returns: the command line
(the process is the command) lets SIGINT end the process at once while a session is created instead; the
subprocess test checks that on a real compile of minutes. Every wait has a hang guard; no assertion is a
timing.
"""

from __future__ import annotations

import _thread
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import onnx
import pytest
from support.helpers import chain_model, needs_openvino
from support.robust import nothing_left_behind

from hetero_cli import cli
from hetero_cli.cli import progress
from hetero_cli.ort.session import PROBE, SUBGRAPH, SessionRequest, native_work, observe_sessions
from hetero_cli.runtime import interrupt_ends_process, sessions_in_creation

DIGITS = Path(__file__).resolve().parents[2] / "models" / "digits.onnx"
HANG_GUARD_S = 60


class BlockedCompile:
    """While in effect, sessions for ``purpose`` block until ``release`` is set (a hang guard sets it
    after HANG_GUARD_S); ``entered`` is set once one blocks."""

    def __init__(self, purpose: str):
        self.purpose = purpose
        self.entered = threading.Event()
        self.release = threading.Event()
        self.guard = threading.Timer(HANG_GUARD_S, self.release.set)

    def __call__(self, request: SessionRequest) -> None:
        if request.purpose == self.purpose:
            self.entered.set()
            self.release.wait()

    def __enter__(self) -> BlockedCompile:
        self.guard.start()
        self._observing = observe_sessions(self)
        self._observing.__enter__()
        return self

    def __exit__(self, *exc) -> None:
        self._observing.__exit__(*exc)
        self.release.set()
        self.guard.cancel()
        deadline = time.monotonic() + HANG_GUARD_S  # the abandoned compile ends before the next test
        while sessions_in_creation() and time.monotonic() < deadline:
            time.sleep(0.05)


def interrupt_when(entered: threading.Event) -> threading.Thread:
    """Ctrl-C the main thread once ``entered`` is set (a thread, started)."""

    def interrupt() -> None:
        if entered.wait(HANG_GUARD_S):
            _thread.interrupt_main()

    thread = threading.Thread(target=interrupt, daemon=True)
    thread.start()
    return thread


COMMANDS = [
    pytest.param(["benchmark", "-m", DIGITS, "-d", "CPU", "-b", "1", "-niter", "1"], SUBGRAPH, id="benchmark"),
    pytest.param(["validate", "-m", DIGITS, "-d", "HETERO:CPU", "-shape", "[1,1,32,32]"], SUBGRAPH, id="validate"),
    pytest.param(["query", "-m", DIGITS, "-d", "HETERO:OPENVINO,CPU"], PROBE, id="query", marks=pytest.mark.openvino),
]  # fmt: skip


@pytest.mark.parametrize(("args", "purpose"), COMMANDS)
def test_ctrl_c_during_a_compile_stops_the_command_at_once(tmp_path, capsys, monkeypatch, args, purpose):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))  # not the machine's /tmp, which others write to
    with nothing_left_behind(tmp_path), BlockedCompile(purpose) as compile_:
        interrupt_when(compile_.entered)
        code = cli.hetero.main([str(a) for a in args], standalone_mode=False)
        still_compiling = not compile_.release.is_set()
    assert compile_.entered.is_set()
    assert code == 130
    assert still_compiling, "the command returned only once the compile did"
    err = capsys.readouterr().err
    assert "[ ERROR ] interrupted" in err and "Traceback" not in err


def spinner_text_while_blocked(long_s: float) -> str:
    """progress.still("Compiling the model") while a compile (on another thread) has been blocked for
    under a second, with LONG_S ``long_s``."""
    with BlockedCompile(SUBGRAPH) as compile_:
        args = ["benchmark", "-m", str(DIGITS), "-d", "CPU", "-niter", "0"]
        side = threading.Thread(target=cli.hetero.main, args=(args,), kwargs={"standalone_mode": False})
        side.start()
        assert compile_.entered.wait(HANG_GUARD_S)
        original, progress.LONG_S = progress.LONG_S, long_s
        try:
            text = progress.still("Compiling the model")
        finally:
            progress.LONG_S = original
    side.join(HANG_GUARD_S)
    return text


def test_the_spinner_names_a_long_compile_and_the_way_out():
    text = spinner_text_while_blocked(0.0)
    assert text.startswith("Compiling the model: still compiling subgraph")
    assert text.endswith(" on CPU (0 s); Ctrl-C stops")


def test_a_short_compile_or_none_leaves_the_spinner_text_alone():
    assert progress.still("Compiling the model") == "Compiling the model"  # nothing being created
    assert spinner_text_while_blocked(HANG_GUARD_S) == "Compiling the model"  # under LONG_S so far


@pytest.mark.parametrize("as_the_program", [True, False])
def test_the_command_line_lets_ctrl_c_end_the_process_while_a_session_is_created(monkeypatch, as_the_program):
    """Run as the program (arguments from sys.argv), SIGINT takes its default action while ORT creates a
    session; called with arguments (a test, a caller in Python), signals are left alone."""
    seen = []
    args = ["benchmark", "-m", str(DIGITS), "-d", "CPU", "-niter", "0"]
    monkeypatch.setattr(sys, "argv", ["hetero", *args])
    with observe_sessions(lambda request: seen.append(signal.getsignal(signal.SIGINT))):
        code = cli.hetero.main(None if as_the_program else args, standalone_mode=False)
    assert code == 0 and seen
    assert all(h == (signal.SIG_DFL if as_the_program else signal.default_int_handler) for h in seen)
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # Python's again afterwards


def test_signals_are_left_alone_by_default_and_off_the_main_thread():
    with native_work():
        assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    interrupt_ends_process(True)
    try:
        inside = []
        side = threading.Thread(target=lambda: inside.append(_handler_in_native_work()))
        side.start()
        side.join(HANG_GUARD_S)
        assert inside == [signal.default_int_handler]
        assert _handler_in_native_work() == signal.SIG_DFL
    finally:
        interrupt_ends_process(False)
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def _handler_in_native_work():
    with native_work():
        return signal.getsignal(signal.SIGINT)


# a chain the OpenVINO EP compiles for minutes on a machine of two cores (1,500 nodes: two minutes; the
# time grows faster than the length), so an exit within EXIT_BOUND_S of Ctrl-C did not wait for it
LONG_CHAIN = 3000
EXIT_BOUND_S = 30


@needs_openvino
@pytest.mark.slow
def test_ctrl_c_stops_hetero_benchmark_during_a_long_openvino_compile(tmp_path):
    ops = ("Relu", "Neg", "Abs", "Sigmoid")
    model = tmp_path / "chain.onnx"
    onnx.save(chain_model([ops[i % 4] for i in range(LONG_CHAIN)], shape=(1, 16)), model)
    temp = tmp_path / "tmp"
    temp.mkdir()
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "TMPDIR": str(temp)}
    hetero = Path(sys.executable).with_name("hetero")
    process = subprocess.Popen(
        [hetero, "benchmark", "-m", model, "-d", "OPENVINO", "-niter", "1", "-exec_graph_path", "plan.json"],
        cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        for line in process.stdout:
            if "Loading the model to the device" in line:  # step 7: the compile starts
                break
        time.sleep(2)  # well inside the compile (minutes on the OpenVINO EP of ORT 1.24, two cores)
        if process.poll() is not None:  # the premise, a property of the EP and the machine, not of the code
            pytest.skip("the OpenVINO EP compiled the 3,000-node chain in under 2 s here: no compile to stop")
        process.send_signal(signal.SIGINT)
        _, err = process.communicate(timeout=EXIT_BOUND_S)
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()
    # ended by the SIGINT itself, as an unhandled Ctrl-C ends a program: the shell's status 130
    assert process.returncode == -signal.SIGINT, err
    assert "Traceback" not in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["chain.onnx", "tmp"]
    assert list(temp.iterdir()) == []


_CTRL_C_WHILE_LOADING = """
import sys
class CtrlC:  # Ctrl-C arriving while Python loads the command line (ONNX Runtime, onnx, numpy with it)
    def find_spec(self, name, path=None, target=None):
        if name == "hetero_cli.cli":
            raise KeyboardInterrupt
        return None
import hetero_cli.entry as entry
assert not {"onnxruntime", "onnx", "numpy"} & set(sys.modules), "the console script loaded them first"
sys.meta_path.insert(0, CtrlC())
getattr(entry, sys.argv[1])()
"""


@pytest.mark.parametrize("script", ["hetero", "hello_classification", "hello_query_device"])
def test_ctrl_c_while_a_console_script_loads_is_one_line_not_a_traceback(script):
    from support.helpers import PYTHON

    run = subprocess.run(
        [PYTHON, "-c", _CTRL_C_WHILE_LOADING, script], capture_output=True, text=True, timeout=HANG_GUARD_S
    )
    assert run.returncode == 130, run.stderr
    assert run.stderr == "[ ERROR ] interrupted\n"


def test_importing_the_package_loads_its_names_when_asked():
    """``import hetero_cli`` loads no ONNX Runtime (the window Ctrl-C had no answer for); its public names
    come on first use, and a name it lacks is an AttributeError."""
    from support.helpers import PYTHON

    code = (
        "import sys, hetero_cli as hc; loaded = 'onnxruntime' in sys.modules; "
        "print(loaded, hc.Core.__name__, hc.ArtifactError.__module__, hc.hint.__name__, 'onnxruntime' in sys.modules); "
        "hc.no_such_name"
    )
    run = subprocess.run([PYTHON, "-c", code], capture_output=True, text=True, timeout=HANG_GUARD_S)
    assert run.stdout.split() == ["False", "Core", "hetero_cli.errors", "hetero_cli.hint", "True"]
    assert "AttributeError: module 'hetero_cli' has no attribute 'no_such_name'" in run.stderr
