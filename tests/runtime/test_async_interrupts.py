"""Ctrl-C (a KeyboardInterrupt) wherever it lands in start_async: a request is given back to its
AsyncInferQueue exactly once, by whoever owns it at that point, so wait_all always returns (issue 29).

The interrupt is raised by a stand-in at each step of a start, once; every wait here runs on a thread
joined with a timeout: a hang guard, not a timing assertion.
"""

from __future__ import annotations

import threading

import pytest
from support.helpers import chain_model, cpu_split, make_model, seeded, vi

import hetero_cli as hc
from hetero_cli.runtime.pipeline import in_flight

HANG_GUARD_S = 30


def returns(fn) -> BaseException | None:
    """Run ``fn`` on a thread: assert that it returns (hang guard); what it raised, or None."""
    raised: list[BaseException] = []

    def body() -> None:
        try:
            fn()
        except BaseException as exc:  # handed to the test
            raised.append(exc)

    thread = threading.Thread(target=body, daemon=True)
    thread.start()
    thread.join(HANG_GUARD_S)
    assert not thread.is_alive(), f"{getattr(fn, '__name__', fn)} never returned"
    return raised[0] if raised else None


def interrupt_once(original):
    """``original`` that raises KeyboardInterrupt on its first call."""
    calls = []

    def stand_in(*args, **kwargs):
        calls.append(args)
        if len(calls) == 1:
            raise KeyboardInterrupt
        return original(*args, **kwargs)

    return stand_in


def interrupt_after_once(original):
    """``original`` that, on its first call, does its work and then raises KeyboardInterrupt (an interrupt
    landing right after the step)."""
    calls = []

    def stand_in(*args, **kwargs):
        calls.append(args)
        result = original(*args, **kwargs)
        if len(calls) == 1:
            raise KeyboardInterrupt
        return result

    return stand_in


@pytest.fixture(scope="module")
def compiled():
    return cpu_split(chain_model(shape=(4, 8)))


# where the interrupt lands: (what is patched, how); the request's inputs checked, the run accepted,
# its buffers taken, its inputs prepared (the case), its job queued on a lane, and just after that
STEPS = {
    "checking the inputs": lambda r, p: ("_inputs", "owned", interrupt_once),
    "in_flight.begin": lambda r, p: (in_flight, "begin", interrupt_after_once),
    "refreshing the subgraphs": lambda r, p: ("_executor", "refresh", interrupt_once),
    "taking the buffers": lambda r, p: (r._executor.course.pool, "take", interrupt_once),
    "preparing the inputs": lambda r, p: (r._executor.course.walk, "values", interrupt_once),
    "queueing the job": lambda r, p: (p, "submit", interrupt_once),
    "right after queueing the job": lambda r, p: (p, "submit", interrupt_after_once),
}


def patch_step(monkeypatch, request: hc.InferRequest, step: str) -> None:
    pipeline = request._pipeline
    owner, name, wrap = STEPS[step](request, pipeline)
    if isinstance(owner, str):
        owner = getattr(request, owner)
    monkeypatch.setattr(owner, name, wrap(getattr(owner, name)))


@pytest.mark.parametrize("jobs", [1, 2])
@pytest.mark.parametrize("step", list(STEPS))
def test_ctrl_c_in_start_async_gives_the_request_back_exactly_once(compiled, monkeypatch, step, jobs):
    queue = hc.AsyncInferQueue(compiled, jobs)
    done = []
    queue.set_callback(lambda request, userdata: done.append(userdata))
    x = seeded((4, 8))
    if jobs == 2:
        queue.start_async({"x": x}, userdata="before")  # request 0 busy or done: the interrupt hits request 1
    k = queue.get_idle_request_id()
    patch_step(monkeypatch, queue[k], step)
    with pytest.raises(KeyboardInterrupt):
        queue.start_async({"x": x}, userdata="interrupted")
    raised = returns(queue.wait_all)
    assert raised is None or isinstance(raised, hc.InferenceError), raised  # the job's recorded failure
    assert sorted(queue._idle) == list(range(jobs))  # each request once: the issue's [0, 0] hung
    assert "interrupted" not in done
    monkeypatch.undo()
    done.clear()
    for n in range(3 * jobs):
        queue.start_async({"x": x}, userdata=n)
    assert returns(queue.wait_all) is None
    assert sorted(done) == list(range(3 * jobs))
    assert in_flight.count == 0


def test_ctrl_c_while_the_queue_waits_for_an_idle_request_takes_none(compiled, monkeypatch):
    queue = hc.AsyncInferQueue(compiled, 1)
    release = threading.Event()
    pipeline = compiled.pipeline
    monkeypatch.setattr(pipeline, "observer", lambda *event: release.wait(HANG_GUARD_S))
    queue.start_async({"x": seeded((4, 8))})
    monkeypatch.setattr(queue._cond, "wait_for", interrupt_once(queue._cond.wait_for))
    with pytest.raises(KeyboardInterrupt):
        queue.start_async({"x": seeded((4, 8))})
    release.set()
    assert returns(queue.wait_all) is None
    assert list(queue._idle) == [0]


def test_an_interrupted_start_that_was_never_accepted_leaves_the_request_as_it_was(compiled, monkeypatch):
    request = compiled.create_infer_request()
    monkeypatch.setattr(in_flight, "begin", interrupt_after_once(in_flight.begin))
    with pytest.raises(KeyboardInterrupt):
        request.start_async({"x": seeded((4, 8))})
    assert returns(request.wait) is None  # nothing was started: nothing to wait for, no failure
    assert in_flight.count == 0  # the exit would have waited for it
    monkeypatch.undo()
    request.start_async({"x": seeded((4, 8))})
    assert returns(request.wait) is None


def test_a_completion_interrupted_on_the_callers_thread_still_frees_the_request(monkeypatch):
    """A model with nothing to run completes in start_async itself: an interrupt there (the request's own
    callback raising it) still calls the queue's hook, so the request is idle again."""
    proto = make_model([], [vi("x", (2,))], [vi("x", (2,))], name="passthrough")
    compiled = hc.Core().compile_model(proto, "CPU")
    queue = hc.AsyncInferQueue(compiled, 1)
    original = type(queue[0])._call_back

    def interrupted_callback(self, run, callback, userdata):
        raise KeyboardInterrupt

    monkeypatch.setattr(type(queue[0]), "_call_back", interrupted_callback)
    queue[0].set_callback(lambda userdata: None)
    with pytest.raises(KeyboardInterrupt):
        queue.start_async({"x": seeded((2,))})
    monkeypatch.setattr(type(queue[0]), "_call_back", original)
    assert returns(queue.wait_all) is None
    assert list(queue._idle) == [0]
    queue.start_async({"x": seeded((2,))})
    assert returns(queue.wait_all) is None
