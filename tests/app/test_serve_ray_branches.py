"""``hetero serve --engine ray`` overlaps a plan's branches (issue 45): the ingress hands each stage the
responses of the stages it reads from without awaiting them, so two stages that read only the model's
input run at the same time, each in its own replica. On a real local Ray instance: two CPU branches cut
apart (HETERO_CONCURRENCY=CONCURRENT) are two stages; one request's two stage runs overlap in wall-clock
time (StageReplica.where's spans), and the answer equals one plain ORT session's."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
import tritonclient.http as httpclient
from onnx import TensorProto, numpy_helper
from onnx import helper as h
from support.helpers import make_model
from support.ray_cluster import free_port
from support.serving import client

from hetero_cli import Core
from hetero_cli.app.serve.options import ServeOptions
from hetero_cli.placement.config import CONCURRENCY

NAME = "branches"
#: layers per branch and rows of x: one branch's run (about 0.1 s here) outlasts Ray's hand-over to the
#: second stage (milliseconds) many times over, on a far faster machine too
LAYERS, ROWS, WIDTH = 120, 256, 256
#: how long anything here may take before it counts as a hang, in seconds
GUARD_S = 300


def branches_model(path: Path) -> Path:
    """x [n, WIDTH] -> (MatMul, Tanh) x LAYERS -> a, and x -> (MatMul, Sigmoid) x LAYERS -> b: two branches
    that meet only at the model input, each one CPU stage once cut apart. Saved to ``path``."""
    rng = np.random.default_rng(0)
    weights = [
        numpy_helper.from_array((rng.standard_normal((WIDTH, WIDTH)) / np.sqrt(WIDTH)).astype(np.float32), w)
        for w in ("wa", "wb")
    ]
    nodes = []
    for branch, act in (("a", "Tanh"), ("b", "Sigmoid")):
        last = "x"
        for k in range(LAYERS):
            out = branch if k == LAYERS - 1 else f"{branch}{k}"
            nodes.append(
                h.make_node("MatMul", [last, f"w{branch}"], [f"{branch}m{k}"], name=f"{branch}mm{k}")
            )
            nodes.append(h.make_node(act, [f"{branch}m{k}"], [out], name=f"{branch}act{k}"))
            last = out
    spec = lambda name: h.make_tensor_value_info(name, TensorProto.FLOAT, ["n", WIDTH])  # noqa: E731
    onnx.save(make_model(nodes, [spec("x")], [spec("a"), spec("b")], weights, name=NAME), path)
    return path


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    """The two-branch model served on a local Ray instance (started and stopped by ray_serving)."""
    from hetero_cli.app.serve.ray_engine import ray_serving

    path = branches_model(tmp_path_factory.mktemp("ray") / f"{NAME}.onnx")
    core = Core()
    model = core.read_model(path)
    plan = core.plan(model, "HETERO:CPU", {CONCURRENCY: "CONCURRENT"})
    assert plan.branches and len(plan.subgraphs) == 2
    with ray_serving(model, plan, ServeOptions(name=NAME, port=free_port())) as url:
        yield url, path


def _spans(stage: str) -> list[tuple[float, float]]:
    """The wall-clock (start, end) of ``stage``'s replica's last runs (StageReplica.where), asked in an event
    loop of its own (Serve's handles answer only inside a running loop)."""
    from ray import serve

    async def ask() -> list[tuple[float, float]]:
        where = await serve.get_deployment_handle(stage, app_name=NAME).where.remote()
        return [tuple(span) for span in where["spans"]]

    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    try:
        return asyncio.run_coroutine_threadsafe(ask(), loop).result(GUARD_S)
    finally:
        loop.call_soon_threadsafe(loop.stop)
        thread.join(GUARD_S)


def test_two_branch_stages_of_one_request_run_at_the_same_time(served: tuple[str, Path]) -> None:
    url, path = served
    x = np.random.default_rng(1).standard_normal((ROWS, WIDTH)).astype(np.float32)
    given = httpclient.InferInput("x", list(x.shape), "FP32")
    given.set_data_from_numpy(x)
    wanted = [httpclient.InferRequestedOutput(name) for name in ("a", "b")]
    for _ in range(2):  # the first request of a replica pays its session's warm-up
        answer = client(url).infer(NAME, [given], outputs=wanted)
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    for name, want in zip(("a", "b"), session.run(["a", "b"], {"x": x}), strict=True):
        np.testing.assert_allclose(answer.as_numpy(name), want, rtol=1e-4, atol=1e-5)
    (a_start, a_end), (b_start, b_end) = _spans("subgraph1")[-1], _spans("subgraph2")[-1]
    assert a_start < b_end and b_start < a_end, "the two branches ran one after the other"
