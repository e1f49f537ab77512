#!/usr/bin/env python3
"""Build hetero-cli's embedded default model, its labels and the sample images.

Trains a small CNN on scikit-learn's bundled handwritten digits (1,797 8x8 images, shipped inside the
scikit-learn wheel, so no download) with a hand-written numpy forward/backward pass, then writes:

* ``models/digits.onnx``: opset 17, IR version 9, graph "digits". Input ``image`` float32 NCHW
  ``[batch, 1, 32, 32]``, grey 0..255 with bright strokes on a dark background; output ``probabilities``
  float32 ``[batch, 10]`` (softmax). The graph first replaces NaN/Inf pixels by 0 (IsNaN/IsInf, which the
  OpenVINO execution provider refuses, so they fall to the CPU EP), then normalises ``(x - mean) / scale``
  and runs Conv-Relu-MaxPool x2, Flatten, Gemm-Relu-Gemm, Softmax. ``metadata_props`` record the
  preprocessing callers need (``layout``, ``color``, ``foreground``; no ``mean``/``scale``, since the graph
  normalises by itself) and the ``labels``.
* ``models/digits.labels``: one class name per line ("zero" .. "nine").
* ``samples/images/digit_<n>.<ext>``: one held-out (never trained on) digit per class, in several file
  formats and pixel modes (grey, RGB, RGBA; PNG, BMP, JPEG; 32x32, 48x48, 64x64), plus a README.

The script then checks the ONNX model (onnx.checker, CPU EP predictions equal the numpy ones, the OpenVINO
EP claims everything except the sanitiser nodes, the sample images are classified correctly).

Build-time only dependencies: scikit-learn (the digits data) and Pillow (writing and re-reading the sample
images). hetero-cli itself needs neither; install them into the venv before running::

    .venv/bin/pip install scikit-learn pillow
    .venv/bin/python models/build_default_model.py

Deterministic: fixed seeds, and the same numpy on the same machine gives the same bytes.
"""

from __future__ import annotations

import argparse
import io
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import numpy.typing as npt
import onnx
from numpy.lib.stride_tricks import sliding_window_view
from onnx import TensorProto, helper, numpy_helper

Array = npt.NDArray[np.float32]
IntArray = npt.NDArray[np.int64]
Params = dict[str, Array]

SEED = 0
IMAGE_SIZE = 32  # model input is IMAGE_SIZE x IMAGE_SIZE
SOURCE_SIZE = 8  # sklearn digits are 8x8
SOURCE_MAX = 16.0  # sklearn digits pixel range is 0..16
PIXEL_MAX = 255.0
MEAN = 0.0
SCALE = 255.0
OPSET = 17
IR_VERSION = 9
LABELS = ("zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine")
CONV1_CHANNELS = 8
CONV2_CHANNELS = 16
HIDDEN = 64
FLAT = CONV2_CHANNELS * (IMAGE_SIZE // 4) ** 2

ROOT = Path(__file__).resolve().parent.parent
OPENVINO_EP = "OpenVINOExecutionProvider"
CPU_EP = "CPUExecutionProvider"
SANITISER_OPS = {"IsNaN", "IsInf"}


# --------------------------------------------------------------------------------------------- data


def interpolation_matrices(
    count: int, out_size: int, in_size: int, scale: npt.NDArray[np.float64], shift: npt.NDArray[np.float64]
) -> npt.NDArray[np.float64]:
    """Bilinear resampling matrices, shape ``(count, out_size, in_size)``.

    Row ``o`` of matrix ``n`` holds the weights of the source pixels for output pixel ``o`` (pixel centres
    aligned, i.e. ``align_corners=False``), after zooming by ``scale[n]`` about the image centre and moving
    by ``shift[n]`` source pixels. Source pixels outside the image count as 0 (background).
    """
    centre = (in_size - 1) / 2.0
    src = (np.arange(out_size) + 0.5) * in_size / out_size - 0.5  # (out,)
    src = (src[None, :] - centre) / scale[:, None] + centre - shift[:, None]  # (count, out)
    low = np.floor(src).astype(np.int64)
    frac = src - low
    # Padded columns: 0 stands for source pixel -1 and in_size + 1 for source pixel in_size (both dropped).
    mats = np.zeros((count, out_size, in_size + 2))
    rows, cols = np.indices((count, out_size))
    mats[rows, cols, np.clip(low + 1, 0, in_size + 1)] += 1.0 - frac
    mats[rows, cols, np.clip(low + 2, 0, in_size + 1)] += frac
    return mats[:, :, 1 : in_size + 1]


def render(
    digits: npt.NDArray[np.float64],
    size: int = IMAGE_SIZE,
    rng: np.random.Generator | None = None,
) -> Array:
    """Resample 8x8 digits (0..16) to ``size`` x ``size`` grey images (0..255), shape ``(n, 1, size, size)``.

    With ``rng``, each image gets a random zoom (0.85..1.15 per axis), shift (up to 0.8 source pixel, i.e.
    3 pixels at 32x32) and contrast (0.75..1.1): the augmentation used in training.
    """
    n = len(digits)
    ones, zeros = np.ones(n), np.zeros(n)
    if rng is None:
        sy = sx = ones
        ty = tx = zeros
        gain = ones
    else:
        sy, sx = rng.uniform(0.85, 1.15, n), rng.uniform(0.85, 1.15, n)
        ty, tx = rng.uniform(-0.8, 0.8, n), rng.uniform(-0.8, 0.8, n)
        gain = rng.uniform(0.75, 1.1, n)
    my = interpolation_matrices(n, size, SOURCE_SIZE, sy, ty)
    mx = interpolation_matrices(n, size, SOURCE_SIZE, sx, tx)
    src = digits.reshape(n, SOURCE_SIZE, SOURCE_SIZE) * (PIXEL_MAX / SOURCE_MAX)
    out = np.einsum("noi,nij,npj->nop", my, src, mx) * gain[:, None, None]
    return np.clip(out, 0.0, PIXEL_MAX).astype(np.float32)[:, None, :, :]


def to_uint8(images: Array) -> npt.NDArray[np.uint8]:
    """Round 0..255 float images to uint8, as an image file stores them."""
    return np.clip(np.rint(images), 0, 255).astype(np.uint8)


# -------------------------------------------------------------------------------------------- model


def init_params(rng: np.random.Generator) -> Params:
    """He-initialised weights, biases at 0. Layouts follow ONNX (Conv OIHW, Gemm weights ``(out, in)``)."""

    def he(shape: tuple[int, ...], fan_in: int) -> Array:
        return (rng.standard_normal(shape) * np.sqrt(2.0 / fan_in)).astype(np.float32)

    return {
        "conv1.weight": he((CONV1_CHANNELS, 1, 3, 3), 9),
        "conv1.bias": np.zeros(CONV1_CHANNELS, np.float32),
        "conv2.weight": he((CONV2_CHANNELS, CONV1_CHANNELS, 3, 3), CONV1_CHANNELS * 9),
        "conv2.bias": np.zeros(CONV2_CHANNELS, np.float32),
        "fc1.weight": he((HIDDEN, FLAT), FLAT),
        "fc1.bias": np.zeros(HIDDEN, np.float32),
        "fc2.weight": he((len(LABELS), HIDDEN), HIDDEN),
        "fc2.bias": np.zeros(len(LABELS), np.float32),
    }


def conv3x3_forward(x: Array, w: Array, b: Array) -> tuple[Array, Array]:
    """3x3 convolution (cross-correlation, as ONNX Conv), stride 1, padding 1. Returns output and im2col."""
    n, c, h, wd = x.shape
    o = w.shape[0]
    padded = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))
    windows = sliding_window_view(padded, (3, 3), axis=(2, 3))  # (n, c, h, w, 3, 3)
    cols = np.ascontiguousarray(windows.transpose(0, 2, 3, 1, 4, 5)).reshape(n * h * wd, c * 9)
    out = cols @ w.reshape(o, -1).T + b
    return np.ascontiguousarray(out.reshape(n, h, wd, o).transpose(0, 3, 1, 2)), cols


def conv3x3_backward(
    dout: Array, cols: Array, x_shape: tuple[int, ...], w: Array, need_dx: bool = True
) -> tuple[Array | None, Array, Array]:
    """Gradients of :func:`conv3x3_forward` with respect to input (optional), weight and bias."""
    n, c, h, wd = x_shape
    o = w.shape[0]
    d = dout.transpose(0, 2, 3, 1).reshape(-1, o)
    dw = (d.T @ cols).reshape(w.shape)
    db = d.sum(axis=0)
    if not need_dx:
        return None, dw, db
    dcols = (d @ w.reshape(o, -1)).reshape(n, h, wd, c, 3, 3)
    dpadded = np.zeros((n, c, h + 2, wd + 2), np.float32)
    for i in range(3):
        for j in range(3):
            dpadded[:, :, i : i + h, j : j + wd] += dcols[..., i, j].transpose(0, 3, 1, 2)
    return dpadded[:, :, 1:-1, 1:-1], dw, db


def maxpool2_forward(x: Array) -> tuple[Array, IntArray]:
    """2x2 max pooling, stride 2. Returns output and the argmax inside each window."""
    n, c, h, w = x.shape
    win = x.reshape(n, c, h // 2, 2, w // 2, 2).transpose(0, 1, 2, 4, 3, 5).reshape(n, c, h // 2, w // 2, 4)
    arg = win.argmax(axis=-1)
    return np.take_along_axis(win, arg[..., None], axis=-1)[..., 0], arg


def maxpool2_backward(dout: Array, arg: IntArray, x_shape: tuple[int, ...]) -> Array:
    """Gradient of :func:`maxpool2_forward`: routes each output gradient to its window's maximum."""
    n, c, h, w = x_shape
    dwin = np.zeros((n, c, h // 2, w // 2, 4), np.float32)
    np.put_along_axis(dwin, arg[..., None], dout[..., None], axis=-1)
    return dwin.reshape(n, c, h // 2, w // 2, 2, 2).transpose(0, 1, 2, 4, 3, 5).reshape(x_shape)


def softmax(logits: Array) -> Array:
    """Row-wise softmax."""
    e = np.exp(logits - logits.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


@dataclass
class Cache:
    """What the backward pass needs from the forward pass."""

    x: Array
    cols1: Array
    a1: Array
    arg1: IntArray
    p1: Array
    cols2: Array
    a2: Array
    arg2: IntArray
    flat: Array
    h: Array


def forward(params: Params, images: Array) -> tuple[Array, Cache]:
    """The network on raw 0..255 images, exactly as the ONNX graph computes it. Returns probabilities."""
    x = np.where(np.isfinite(images), images, np.float32(0.0))
    x = ((x - np.float32(MEAN)) / np.float32(SCALE)).astype(np.float32)
    z1, cols1 = conv3x3_forward(x, params["conv1.weight"], params["conv1.bias"])
    a1 = np.maximum(z1, 0.0)
    p1, arg1 = maxpool2_forward(a1)
    z2, cols2 = conv3x3_forward(p1, params["conv2.weight"], params["conv2.bias"])
    a2 = np.maximum(z2, 0.0)
    p2, arg2 = maxpool2_forward(a2)
    flat = p2.reshape(len(p2), -1)
    h = np.maximum(flat @ params["fc1.weight"].T + params["fc1.bias"], 0.0)
    logits = h @ params["fc2.weight"].T + params["fc2.bias"]
    return softmax(logits), Cache(x, cols1, a1, arg1, p1, cols2, a2, arg2, flat, h)


def backward(params: Params, cache: Cache, probs: Array, labels: IntArray) -> Params:
    """Gradients of the mean cross-entropy loss with respect to every parameter."""
    n = len(labels)
    dlogits = probs.copy()
    dlogits[np.arange(n), labels] -= 1.0
    dlogits /= n
    grads: Params = {
        "fc2.weight": dlogits.T @ cache.h,
        "fc2.bias": dlogits.sum(axis=0),
    }
    dh = (dlogits @ params["fc2.weight"]) * (cache.h > 0)
    grads["fc1.weight"] = dh.T @ cache.flat
    grads["fc1.bias"] = dh.sum(axis=0)
    dp2 = (dh @ params["fc1.weight"]).reshape(n, CONV2_CHANNELS, IMAGE_SIZE // 4, IMAGE_SIZE // 4)
    da2 = maxpool2_backward(dp2, cache.arg2, cache.a2.shape) * (cache.a2 > 0)
    dp1, grads["conv2.weight"], grads["conv2.bias"] = conv3x3_backward(
        da2, cache.cols2, cache.p1.shape, params["conv2.weight"]
    )
    assert dp1 is not None
    da1 = maxpool2_backward(dp1, cache.arg1, cache.a1.shape) * (cache.a1 > 0)
    _, grads["conv1.weight"], grads["conv1.bias"] = conv3x3_backward(
        da1, cache.cols1, cache.x.shape, params["conv1.weight"], need_dx=False
    )
    return {k: v.astype(np.float32) for k, v in grads.items()}


def predict(params: Params, images: Array, batch: int = 256) -> Array:
    """Probabilities for many images, in batches."""
    return np.concatenate([forward(params, images[i : i + batch])[0] for i in range(0, len(images), batch)])


def minibatches(n: int, batch: int, rng: np.random.Generator) -> Iterator[IntArray]:
    """Shuffled index batches covering ``range(n)`` once."""
    order = rng.permutation(n)
    for i in range(0, n, batch):
        yield order[i : i + batch]


def train(
    train_digits: npt.NDArray[np.float64],
    train_labels: IntArray,
    test_images: Array,
    test_labels: IntArray,
    epochs: int,
    rng: np.random.Generator,
) -> Params:
    """Adam with a cosine learning-rate decay and light weight decay, fresh augmentation every epoch."""
    params = init_params(rng)
    m = {k: np.zeros_like(v) for k, v in params.items()}
    v = {k: np.zeros_like(p) for k, p in params.items()}
    beta1, beta2, eps, base_lr, weight_decay, batch = 0.9, 0.999, 1e-8, 2e-3, 1e-4, 64
    step = 0
    steps_per_epoch = -(-len(train_labels) // batch)
    total = epochs * steps_per_epoch
    for epoch in range(epochs):
        started = time.perf_counter()
        images = render(train_digits, rng=rng)
        loss_sum, correct = 0.0, 0
        for idx in minibatches(len(train_labels), batch, rng):
            probs, cache = forward(params, images[idx])
            labels = train_labels[idx]
            loss_sum += float(-np.log(probs[np.arange(len(idx)), labels] + 1e-12).sum())
            correct += int((probs.argmax(axis=1) == labels).sum())
            grads = backward(params, cache, probs, labels)
            step += 1
            lr = base_lr * 0.5 * (1.0 + np.cos(np.pi * (step - 1) / total))
            for k in params:
                g = grads[k] + (weight_decay * params[k] if k.endswith("weight") else 0.0)
                m[k] = beta1 * m[k] + (1 - beta1) * g
                v[k] = beta2 * v[k] + (1 - beta2) * g * g
                m_hat = m[k] / (1 - beta1**step)
                v_hat = v[k] / (1 - beta2**step)
                params[k] = (params[k] - lr * m_hat / (np.sqrt(v_hat) + eps)).astype(np.float32)
        test_acc = float((predict(params, test_images).argmax(axis=1) == test_labels).mean())
        print(
            f"epoch {epoch + 1:2d}/{epochs}: loss {loss_sum / len(train_labels):.4f}, "
            f"train acc (augmented) {correct / len(train_labels):.4f}, test acc {test_acc:.4f} "
            f"({time.perf_counter() - started:.1f}s)"
        )
    return params


# --------------------------------------------------------------------------------------------- onnx


def build_onnx(params: Params, test_accuracy: float) -> onnx.ModelProto:
    """The ONNX model: sanitiser (IsNaN/IsInf/Or/Where), normalisation (Sub/Div), CNN, Softmax."""
    f = TensorProto.FLOAT
    initializers = [numpy_helper.from_array(v, name=k) for k, v in params.items()]
    initializers += [
        numpy_helper.from_array(np.array(0.0, np.float32), name="sanitize.zero"),
        numpy_helper.from_array(np.array(MEAN, np.float32), name="preprocess.mean"),
        numpy_helper.from_array(np.array(SCALE, np.float32), name="preprocess.scale"),
    ]
    nodes = [
        helper.make_node("IsNaN", ["image"], ["image_is_nan"], name="sanitize_isnan"),
        helper.make_node("IsInf", ["image"], ["image_is_inf"], name="sanitize_isinf"),
        helper.make_node("Or", ["image_is_nan", "image_is_inf"], ["image_not_finite"], name="sanitize_or"),
        helper.make_node(
            "Where", ["image_not_finite", "sanitize.zero", "image"], ["image_finite"], name="sanitize_where"
        ),
        helper.make_node(
            "Sub", ["image_finite", "preprocess.mean"], ["image_centered"], name="preprocess_sub_mean"
        ),
        helper.make_node(
            "Div", ["image_centered", "preprocess.scale"], ["image_normalized"], name="preprocess_div_scale"
        ),
        helper.make_node(
            "Conv",
            ["image_normalized", "conv1.weight", "conv1.bias"],
            ["conv1_out"],
            name="conv1",
            kernel_shape=[3, 3],
            pads=[1, 1, 1, 1],
            strides=[1, 1],
        ),
        helper.make_node("Relu", ["conv1_out"], ["relu1_out"], name="relu1"),
        helper.make_node(
            "MaxPool", ["relu1_out"], ["pool1_out"], name="pool1", kernel_shape=[2, 2], strides=[2, 2]
        ),
        helper.make_node(
            "Conv",
            ["pool1_out", "conv2.weight", "conv2.bias"],
            ["conv2_out"],
            name="conv2",
            kernel_shape=[3, 3],
            pads=[1, 1, 1, 1],
            strides=[1, 1],
        ),
        helper.make_node("Relu", ["conv2_out"], ["relu2_out"], name="relu2"),
        helper.make_node(
            "MaxPool", ["relu2_out"], ["pool2_out"], name="pool2", kernel_shape=[2, 2], strides=[2, 2]
        ),
        helper.make_node("Flatten", ["pool2_out"], ["flatten_out"], name="flatten", axis=1),
        helper.make_node(
            "Gemm", ["flatten_out", "fc1.weight", "fc1.bias"], ["fc1_out"], name="fc1", transB=1
        ),
        helper.make_node("Relu", ["fc1_out"], ["relu3_out"], name="relu3"),
        helper.make_node("Gemm", ["relu3_out", "fc2.weight", "fc2.bias"], ["logits"], name="fc2", transB=1),
        helper.make_node("Softmax", ["logits"], ["probabilities"], name="softmax", axis=1),
    ]
    graph = helper.make_graph(
        nodes,
        "digits",
        [helper.make_tensor_value_info("image", f, ["batch", 1, IMAGE_SIZE, IMAGE_SIZE])],
        [helper.make_tensor_value_info("probabilities", f, ["batch", len(LABELS)])],
        initializers,
        doc_string=(
            "Handwritten digit classifier (scikit-learn digits, upsampled to 32x32). Input: grey 0..255, "
            "NCHW, bright strokes on a dark background; NaN/Inf pixels are replaced by 0. "
            "Output: softmax over the 10 classes zero..nine."
        ),
    )
    model = helper.make_model(
        graph,
        opset_imports=[helper.make_opsetid("", OPSET)],
        ir_version=IR_VERSION,
        producer_name="hetero-cli models/build_default_model.py",
        producer_version="1",
        model_version=1,
        doc_string="hetero-cli's embedded default model: a small CNN trained on scikit-learn's digits.",
    )
    helper.set_model_props(
        model,
        {
            # no "mean"/"scale": the graph itself normalises (x - MEAN) / SCALE, so callers feed raw pixels
            "layout": "NCHW",
            "color": "GRAY",
            "foreground": "light",
            "labels": ",".join(LABELS),
            "test_accuracy": f"{test_accuracy:.4f}",
        },
    )
    model = onnx.shape_inference.infer_shapes(model, check_type=True, strict_mode=True, data_prop=True)
    onnx.checker.check_model(model, full_check=True)
    return model


# ---------------------------------------------------------------------------------------- checks


def require(condition: bool, message: str) -> None:
    """Fail the build (not an ``assert``: it must hold under ``python -O`` too)."""
    if not condition:
        raise RuntimeError(message)


def make_session(model_bytes: bytes, providers: list[str], record: bool = False) -> object:
    """An onnxruntime session; ``record`` keeps ORT's per-EP node assignment (graph optimisations off)."""
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.log_severity_level = 3
    if record:
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
        options.add_session_config_entry("session.record_ep_graph_assignment_info", "1")
    return ort.InferenceSession(model_bytes, options, providers=providers)


def run_session(session: object, images: Array) -> Array:
    """Probabilities from an onnxruntime session."""
    return session.run(["probabilities"], {"image": images})[0]  # type: ignore[attr-defined]


def check_cpu(model_bytes: bytes, params: Params, images: Array) -> None:
    """The CPU EP gives the numpy predictions, handles any batch size and sanitises NaN/Inf."""
    session = make_session(model_bytes, [CPU_EP])
    ort_probs = run_session(session, images)
    np_probs = predict(params, images)
    same = int((ort_probs.argmax(axis=1) == np_probs.argmax(axis=1)).sum())
    diff = float(np.abs(ort_probs - np_probs).max())
    print(f"CPU EP vs numpy on {len(images)} test images: {same} same predictions, max |dp| = {diff:.2e}")
    require(same == len(images) and diff < 1e-4, "onnxruntime CPU EP disagrees with the numpy forward pass")
    require(run_session(session, images[:1]).shape == (1, len(LABELS)), "batch of 1 fails")
    dirty = images[:4].copy()
    dirty[:, :, :2, :] = np.nan
    dirty[:, :, -2:, :] = np.inf
    dirty[:, :, :, :2] = -np.inf
    clean = np.where(np.isfinite(dirty), dirty, np.float32(0.0))
    dirty_probs = run_session(session, dirty)
    require(bool(np.isfinite(dirty_probs).all()), "NaN/Inf pixels leaked through the sanitiser")
    require(np.allclose(dirty_probs, run_session(session, clean), atol=1e-6), "sanitiser is not a zero fill")
    print("CPU EP: NaN/+Inf/-Inf pixels are replaced by 0 (finite probabilities, same as zeroed pixels)")


def check_assignment(model_bytes: bytes, model: onnx.ModelProto, images: Array) -> dict[str, str]:
    """With the OpenVINO EP first, it claims every node but the sanitiser's IsNaN/IsInf (CPU EP)."""
    import onnxruntime as ort

    if OPENVINO_EP not in ort.get_available_providers():
        print(f"{OPENVINO_EP} not available (onnxruntime {ort.__version__}): assignment check skipped")
        return {}
    session = make_session(model_bytes, [OPENVINO_EP, CPU_EP], record=True)
    claimed: dict[str, str] = {}
    for assignment in session.get_provider_graph_assignment_info():  # type: ignore[attr-defined]
        for node in assignment.get_nodes():
            claimed[node.name] = assignment.ep_name
    print(f"node assignment with providers [{OPENVINO_EP}, {CPU_EP}]:")
    for node in model.graph.node:
        print(f"  {node.name:22s} {node.op_type:8s} -> {claimed.get(node.name, '?')}")
    for node in model.graph.node:
        want = CPU_EP if node.op_type in SANITISER_OPS else OPENVINO_EP
        require(
            claimed.get(node.name) == want, f"{node.name} ({node.op_type}) went to {claimed.get(node.name)}"
        )
    ov_probs = run_session(session, images)
    cpu_probs = run_session(make_session(model_bytes, [CPU_EP]), images)
    same = int((ov_probs.argmax(axis=1) == cpu_probs.argmax(axis=1)).sum())
    print(
        f"OpenVINO+CPU vs CPU only: {same}/{len(images)} same predictions, "
        f"max |dp| = {float(np.abs(ov_probs - cpu_probs).max()):.2e}"
    )
    require(same >= len(images) - 1, "OpenVINO EP predictions differ from the CPU EP")
    return claimed


# ---------------------------------------------------------------------------------------- samples


@dataclass(frozen=True)
class SampleSpec:
    """One sample image: its digit, file name, Pillow mode, side length and file format."""

    digit: int
    mode: str
    size: int
    ext: str

    @property
    def name(self) -> str:
        """File name, ``digit_<n>.<ext>``."""
        return f"digit_{self.digit}.{self.ext}"

    @property
    def format(self) -> str:
        """Pillow format name."""
        return {"png": "PNG", "bmp": "BMP", "jpg": "JPEG"}[self.ext]


SAMPLES = (
    SampleSpec(0, "L", 32, "png"),
    SampleSpec(1, "L", 32, "bmp"),
    SampleSpec(2, "RGB", 64, "jpg"),
    SampleSpec(3, "L", 64, "png"),
    SampleSpec(4, "RGB", 32, "bmp"),
    SampleSpec(5, "RGB", 32, "png"),
    SampleSpec(6, "L", 32, "jpg"),
    SampleSpec(7, "RGBA", 32, "png"),
    SampleSpec(8, "RGBA", 64, "png"),
    SampleSpec(9, "L", 48, "png"),
)
MODE_TEXT = {"L": "8-bit grey", "RGB": "RGB, R=G=B", "RGBA": "RGBA, R=G=B, opaque (alpha 255)"}


def encode_sample(spec: SampleSpec, digit_image: npt.NDArray[np.float64]) -> bytes:
    """The file bytes of one sample: the 8x8 digit rendered at ``spec.size`` in ``spec.mode``."""
    from PIL import Image

    grey = to_uint8(render(digit_image[None], size=spec.size))[0, 0]
    if spec.mode == "L":
        pixels = grey
    elif spec.mode == "RGB":
        pixels = np.stack([grey] * 3, axis=-1)
    else:
        pixels = np.stack([grey] * 3 + [np.full_like(grey, 255)], axis=-1)
    buffer = io.BytesIO()
    options = {"quality": 95, "subsampling": 0} if spec.format == "JPEG" else {}
    Image.fromarray(pixels).save(buffer, format=spec.format, **options)
    return buffer.getvalue()


def decode_variants(data: bytes) -> list[Array]:
    """The ways an image loader might turn a sample file into a 1x1x32x32 model input."""
    from PIL import Image

    image = Image.open(io.BytesIO(data))
    image.load()
    rgb = np.asarray(image.convert("RGB"), np.float32)
    greys = [image.convert("L"), Image.fromarray(to_uint8(rgb.mean(axis=-1)))]
    out = []
    for grey in greys:
        for resample in (
            Image.Resampling.BILINEAR,
            Image.Resampling.NEAREST,
            Image.Resampling.BOX,
            Image.Resampling.LANCZOS,
            Image.Resampling.BICUBIC,
        ):
            resized = (
                grey
                if grey.size == (IMAGE_SIZE, IMAGE_SIZE)
                else grey.resize((IMAGE_SIZE, IMAGE_SIZE), resample)
            )
            out.append(np.asarray(resized, np.float32)[None, None])
    return out


def write_samples(
    session: object,
    test_digits: npt.NDArray[np.float64],
    test_labels: IntArray,
    test_indices: IntArray,
    out_dir: Path,
) -> list[tuple[SampleSpec, int, float]]:
    """For each spec, the first held-out digit of its class that every decoding variant classifies right."""
    out_dir.mkdir(parents=True, exist_ok=True)
    written = []
    for spec in SAMPLES:
        for i in np.flatnonzero(test_labels == spec.digit):
            data = encode_sample(spec, test_digits[i])
            probs = run_session(session, np.concatenate(decode_variants(data)))
            if (probs.argmax(axis=1) == spec.digit).all() and probs[:, spec.digit].min() > 0.9:
                (out_dir / spec.name).write_bytes(data)
                written.append((spec, int(test_indices[i]), float(probs[0, spec.digit])))
                break
        else:
            raise RuntimeError(f"no held-out {spec.digit} survives {spec.name}'s encoding")
    return written


def write_samples_readme(path: Path, written: list[tuple[SampleSpec, int, float]]) -> None:
    """``samples/images/README.md``: what each image shows and how it was made."""
    lines = [
        "# Sample images",
        "",
        "Written by `models/build_default_model.py` from held-out test digits of scikit-learn's bundled",
        "digits dataset (never used in training). Each 8x8 digit (0..16) was resampled bilinearly to the",
        "size below and scaled to 0..255: bright strokes on a black background, like the model's input.",
        "The file name holds the true digit; the default model (`models/digits.onnx`) classifies each one",
        "correctly, whether the loader converts to grey by luma or channel mean and resizes to 32x32 with",
        "any common filter.",
        "",
        "| file | digit | pixels | size | format | dataset index | p(digit) |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for spec, index, prob in written:
        lines.append(
            f"| `{spec.name}` | {spec.digit} ({LABELS[spec.digit]}) | {MODE_TEXT[spec.mode]} | "
            f"{spec.size}x{spec.size} | {spec.format} | {index} | {prob:.3f} |"
        )
    path.write_text("\n".join(lines) + "\n")


# ------------------------------------------------------------------------------------------- main


def main(argv: list[str] | None = None) -> int:
    """Train, export, verify, write the artefacts."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=20, help="training epochs (default: 20)")
    parser.add_argument("--models-dir", type=Path, default=ROOT / "models")
    parser.add_argument("--samples-dir", type=Path, default=ROOT / "samples" / "images")
    args = parser.parse_args(argv)

    try:
        from sklearn.datasets import load_digits
        from sklearn.model_selection import train_test_split
    except ImportError:
        print(
            "scikit-learn is needed to build the model: .venv/bin/pip install scikit-learn pillow",
            file=sys.stderr,
        )
        return 2

    rng = np.random.default_rng(SEED)
    digits = load_digits()
    data = digits.data.astype(np.float64)
    labels = digits.target.astype(np.int64)
    indices = np.arange(len(labels))
    tr_x, te_x, tr_y, te_y, _, te_idx = train_test_split(
        data, labels, indices, test_size=0.25, random_state=SEED, stratify=labels
    )
    print(
        f"digits: {len(tr_y)} training, {len(te_y)} held-out test images ({SOURCE_SIZE}x{SOURCE_SIZE} -> "
        f"{IMAGE_SIZE}x{IMAGE_SIZE})"
    )
    test_images = render(te_x)
    params = train(tr_x, tr_y, test_images, te_y, args.epochs, rng)
    test_accuracy = float((predict(params, test_images).argmax(axis=1) == te_y).mean())
    print(f"held-out test accuracy: {test_accuracy:.4f} ({round(test_accuracy * len(te_y))}/{len(te_y)})")
    require(test_accuracy >= 0.95, f"test accuracy {test_accuracy:.4f} is below 0.95")

    model = build_onnx(params, test_accuracy)
    model_bytes = model.SerializeToString()
    check_cpu(model_bytes, params, test_images)
    check_assignment(model_bytes, model, test_images)

    args.models_dir.mkdir(parents=True, exist_ok=True)
    model_path = args.models_dir / "digits.onnx"
    model_path.write_bytes(model_bytes)
    labels_path = args.models_dir / "digits.labels"
    labels_path.write_text("\n".join(LABELS) + "\n")
    print(f"wrote {model_path} ({len(model_bytes):,} bytes), {labels_path}")

    written = write_samples(make_session(model_bytes, [CPU_EP]), te_x, te_y, te_idx, args.samples_dir)
    write_samples_readme(args.samples_dir / "README.md", written)
    for spec, index, prob in written:
        size = (args.samples_dir / spec.name).stat().st_size
        print(
            f"wrote {args.samples_dir / spec.name} ({MODE_TEXT[spec.mode]}, {spec.size}x{spec.size}, "
            f"{size} bytes, dataset index {index}, p={prob:.3f})"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
