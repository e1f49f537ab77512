"""Compiling a split (issue 6): subgraph sessions are created on a pool of threads (and on the calling
thread's behalf when the pool is busy) while the calling thread exports the next subgraphs, errors stay deterministic, and sessions of a split stop spinning between runs.

Whether creations really overlap in time depends on the ONNX Runtime binding (1.24 holds the GIL while a
session initialises, newer releases let it go), so these tests check the structure - which threads create
which sessions, how many exported models wait at once - never a timing.
"""

from __future__ import annotations

import threading

import onnxruntime as ort
import pytest
from onnx import helper as h
from support.helpers import assert_same, cpu_split, make_model, ort_run, seeded, vi

import hetero_cli as hc
from hetero_cli.errors import CompileError
from hetero_cli.ort.session import CHECK, SessionRequest, observe_sessions
from hetero_cli.runtime import compiler as compile_module
from hetero_cli.runtime import parallel


def chain(length: int = 8):
    ops = ("Relu", "Neg", "Abs", "Sigmoid")
    names = ["x", *[f"t{i}" for i in range(length - 1)], "y"]
    nodes = [h.make_node(ops[i % 4], [names[i]], [names[i + 1]], name=f"n{i}") for i in range(length)]
    return make_model(nodes, [vi("x", [2, 3])], [vi("y", [2, 3])], name="chain")


@pytest.fixture
def created(monkeypatch):
    """Every InferenceSession a compile creates: (thread name, its request), made (thread name,
    providers) by ``made``."""
    seen: list[tuple[str, SessionRequest]] = []
    lock = threading.Lock()

    def record(request: SessionRequest) -> None:
        with lock:
            seen.append((threading.current_thread().name, request))

    monkeypatch.setattr(parallel, "compile_workers", lambda n: max(1, min(n, 3)))
    with observe_sessions(record):
        yield seen


# a session the main thread asks for is created on a thread of its own, which the main thread waits for
# while it keeps taking Ctrl-C (ort.session.on_its_own_thread)
FOR_THE_CALLER = "hetero-session"


def made(created: list[tuple[str, SessionRequest]]) -> list[tuple[str, tuple[str, ...]]]:
    """(thread name, providers) of each session ``created`` recorded."""
    return [(name, tuple(request.session.get_providers())) for name, request in created]


def test_split_sessions_are_created_on_the_compile_pool(created):
    proto = chain()
    compiled = cpu_split(proto)
    assert len(compiled.subgraphs) == 8
    names = [name for name, _ in made(created)]
    assert len(names) == 8
    assert all(name.startswith("hetero-compile") or name == FOR_THE_CALLER for name in names)
    assert any(name.startswith("hetero-compile") for name in names)  # the pool takes what it can
    x = seeded((2, 3))
    assert_same(compiled({"x": x}), ort_run(proto, {"x": x}))
    assert [s.index for s in compiled.subgraphs] == list(range(8))  # in plan order, whatever finished first


def test_a_plan_of_one_subgraph_compiles_for_the_calling_thread_with_no_pool(created):
    compiled = hc.Core().compile_model(chain(), "HETERO:CPU")
    assert len(compiled.subgraphs) == 1
    # no probe before it (reading the model may check, once per process, that ORT loads its IR version)
    compiles = [(name, r) for name, r in created if r.purpose != CHECK]
    assert made(compiles) == [(FOR_THE_CALLER, ("CPUExecutionProvider",))]


def test_at_most_one_exported_model_per_worker_waits_or_compiles(monkeypatch):
    monkeypatch.setattr(parallel, "compile_workers", lambda n: 2)
    lock = threading.Lock()
    level = peak = 0
    real = compile_module.prepare_subgraph

    def counting(*args, **kwargs):
        nonlocal level, peak
        finish = real(*args, **kwargs)
        with lock:
            level += 1
            peak = max(peak, level)

        def done():
            nonlocal level
            try:
                return finish()
            finally:
                with lock:
                    level -= 1

        return done

    monkeypatch.setattr(compile_module, "prepare_subgraph", counting)
    cpu_split(chain(12))
    assert peak == 2


def test_the_error_is_the_first_failing_subgraphs_in_plan_order(monkeypatch):
    monkeypatch.setattr(parallel, "compile_workers", lambda n: 4)
    gate = threading.Event()

    def failing(request: SessionRequest) -> None:
        if request.subject == "subgraph2":
            gate.wait(5)  # the later failure comes first
            raise CompileError("subgraph2 failed")
        if request.subject == "subgraph4":
            gate.set()
            raise CompileError("subgraph4 failed")

    with observe_sessions(failing), pytest.raises(CompileError, match="subgraph2 failed"):
        cpu_split(chain(8))


def test_an_export_failure_stops_the_compile_after_the_sessions_already_started(monkeypatch):
    monkeypatch.setattr(parallel, "compile_workers", lambda n: 2)
    real = compile_module.prepare_subgraph
    prepared: list[int] = []

    def failing(model, subgraph, *args, **kwargs):
        if subgraph.index == 2:
            raise CompileError("cannot export subgraph3")
        prepared.append(subgraph.index)
        return real(model, subgraph, *args, **kwargs)

    monkeypatch.setattr(compile_module, "prepare_subgraph", failing)
    with pytest.raises(CompileError, match="cannot export subgraph3"):
        cpu_split(chain(8))
    assert prepared == [0, 1]


def spinning(session: ort.InferenceSession) -> str:
    return session.get_session_options().get_session_config_entry(compile_module.FORCE_SPINNING_STOP)


def test_sessions_of_a_split_stop_spinning_when_their_run_returns():
    compiled = cpu_split(chain(4))
    assert [spinning(s.session) for s in compiled.subgraphs] == ["1"] * 4


def test_a_plan_of_one_subgraph_keeps_ort_defaults():
    compiled = hc.Core().compile_model(chain(4), "HETERO:CPU")
    with pytest.raises(Exception, match="does not have configuration"):
        spinning(compiled.subgraphs[0].session)
