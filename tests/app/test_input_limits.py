"""Inputs too big for memory, fixed 0 dimensions, and the -i / --color / --mean / image-size messages.

Oversized inputs must be refused with one clear error (exit 2) before anything is resized or allocated:
none of these tests allocates the sizes it names. The command-line runs that would allocate them if the
check regressed run as subprocesses under an address-space limit, so a regression fails (MemoryError)
instead of eating the machine.
"""

from __future__ import annotations

import os
import resource
import shutil
import struct
import subprocess
import sys
import tracemalloc
import zlib
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto
from onnx import helper as h
from PIL import Image
from support.robust import invoke, nothing_left_behind, one_error_line

import hetero_cli as hc
from hetero_cli import cli
from hetero_cli.app import benchmark as bench
from hetero_cli.app import image, limits
from hetero_cli.app.benchmark import shapes as bench_shapes
from hetero_cli.app.benchmark.inputs import random_tensor
from hetero_cli.app.benchmark.shapes import parse_shapes

ROOT = Path(__file__).resolve().parents[2]
DIGITS = ROOT / "models" / "digits.onnx"
DIGIT = ROOT / "samples" / "images" / "digit_3.png"
HUGE = [1, 3, 100_000, 100_000]  # 111.8 GiB as float32, 10^10 pixels


def identity_model(shape, elem=TensorProto.FLOAT, **metadata: str) -> onnx.ModelProto:
    """x -> Identity -> y, both of ``shape`` (ints fixed, strings dynamic)."""
    graph = h.make_graph(
        [h.make_node("Identity", ["x"], ["y"], name="out")],
        "limits",
        [h.make_tensor_value_info("x", elem, list(shape))],
        [h.make_tensor_value_info("y", elem, list(shape))],
    )
    proto = h.make_model(graph, ir_version=10, opset_imports=[h.make_opsetid("", 17)])
    if metadata:
        h.set_model_props(proto, metadata)
    return proto


def saved(tmp_path: Path, proto: onnx.ModelProto, name: str = "m.onnx") -> Path:
    path = tmp_path / name
    onnx.save(proto, path)
    return path


def limited(script: str, *args, cwd: Path) -> subprocess.CompletedProcess[str]:
    """A console script as a subprocess with 4 GiB of address space and two minutes: an input that is
    allocated instead of refused fails with MemoryError (exit 1) rather than taking the machine's memory."""
    path = Path(sys.executable).parent / script
    exe = str(path) if path.exists() else shutil.which(script)
    if exe is None:
        pytest.skip(f"console script {script} is not installed (pip install -e . installs it)")

    def cap() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (4 * 2**30, 4 * 2**30))

    env = {k: v for k, v in os.environ.items() if k not in ("OPENVINO_HETERO_VISUALIZE", "HETERO_DEBUG")}
    return subprocess.run(
        [exe, *map(str, args)],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        preexec_fn=cap,
    )


def one_error_line_of(proc: subprocess.CompletedProcess[str]) -> str:
    assert "Traceback" not in proc.stderr and "internal error" not in proc.stderr, proc.stderr
    errors = [line for line in proc.stderr.splitlines() if line.startswith("[ ERROR ] ")]
    assert len(errors) == 1, proc.stderr
    return errors[0]


# --- 1. an image input too big to resize to ---------------------------------------------------------------


def test_a_huge_fixed_image_input_is_refused_before_any_image_is_read():
    with pytest.raises(image.ImageError) as err:
        image.preprocessing(hc.Model(identity_model(HUGE)))
    text = str(err.value)
    assert "'x'" in text and "[1,3,100000,100000]" in text
    assert "10000000000 pixels" in text and "111.8 GiB" in text and str(Image.MAX_IMAGE_PIXELS) in text


def test_classify_resizes_no_bigger_than_the_pixel_limit_for_images(tmp_path, monkeypatch):
    # the same limit as for the images read (Pillow's MAX_IMAGE_PIXELS), here lowered to 1000 pixels
    monkeypatch.setattr(Image, "MAX_IMAGE_PIXELS", 1000)
    model = saved(tmp_path, identity_model([1, 1, 64, 64]))
    with nothing_left_behind(tmp_path):
        result = invoke(cli.classify, model, DIGIT, "CPU")
    assert result.exit_code == 2
    line = one_error_line(result)
    assert (
        "'x'" in line and "[1,1,64,64]" in line and "4096 pixels" in line and "limit of 1000 pixels" in line
    )


def test_to_tensor_checks_the_size_it_resizes_to(monkeypatch):
    monkeypatch.setattr(Image, "MAX_IMAGE_PIXELS", 1000)
    prep = image.preprocessing(hc.Model(identity_model(["N", 3, "H", "W"])))
    assert image.to_tensor(Image.new("RGB", (30, 30)), prep).shape == (1, 3, 30, 30)
    from dataclasses import replace

    big = replace(prep, input=replace(prep.input, height=40, width=40))
    with pytest.raises(image.ImageError, match="1600 pixels"):
        image.to_tensor(Image.new("RGB", (30, 30)), big)


def test_an_image_tensor_over_the_memory_limit_is_refused(monkeypatch):
    monkeypatch.setattr(limits, "memory_limit", lambda: 1000)
    with pytest.raises(image.ImageError, match=r"\[1,3,32,32\] float32 tensor of 12\.0 KiB, over the limit"):
        image.preprocessing(hc.Model(identity_model([1, 3, 32, 32])))


def test_classify_a_huge_fixed_input_is_one_error_and_no_memory_error(tmp_path):
    model = saved(tmp_path, identity_model(HUGE), "huge.onnx")
    proc = limited("hetero", "classify", "-m", model, "-i", DIGIT, "-d", "CPU", cwd=tmp_path)
    assert proc.returncode == 2, proc.stderr
    line = one_error_line_of(proc)
    assert "'x'" in line and "[1,3,100000,100000]" in line and "pixels" in line


# --- 2. benchmark data too big for memory -----------------------------------------------------------------


def test_memory_limit_is_half_the_machine():
    limit = limits.memory_limit()
    assert 2**28 <= limit <= 2**50
    if hasattr(os, "sysconf"):
        assert limit <= os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE") // 2


@pytest.mark.parametrize(
    ("v2", "v1", "expected"),
    [
        ("max", None, None),  # cgroup v2 without a limit: the machine's memory
        (str(2**31), None, 2**30),  # v2 limit of 2 GiB
        (None, str(2**31), 2**30),  # cgroup v1 limit of 2 GiB
        (None, str(2**63 - 4096), None),  # v1's "no limit" is a huge number: the machine's memory
    ],
    ids=["v2-max", "v2-limit", "v1-limit", "v1-unlimited"],
)
def test_memory_limit_reads_a_containers_cgroup_limit(tmp_path, monkeypatch, v2, v1, expected):
    files = []
    for name, text in (("memory.max", v2), ("memory.limit_in_bytes", v1)):
        if text is not None:
            (tmp_path / name).write_text(text + "\n")
        files.append(str(tmp_path / name))
    machine = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE") // 2
    monkeypatch.setattr(limits, "_CGROUP_LIMITS", tuple(files))
    limits.memory_limit.cache_clear()
    try:
        assert limits.memory_limit() == (expected or machine)
    finally:
        limits.memory_limit.cache_clear()


@pytest.mark.parametrize(
    ("proto", "shape", "data_shape", "expected"),
    [
        (None, "[99999999999,1,32,32]", None, ["'image'", "[99999999999,1,32,32]", "372.5 TiB", "-shape"]),
        (identity_model(HUGE), None, None, ["'x'", "[1,3,100000,100000]", "111.8 GiB", "fixed"]),
        (identity_model(["N", 3, "H", "W"]), None, "[100000,3,1000,1000]", ["'x'", "1.1 TiB", "-data_shape"]),
    ],
    ids=["shape", "fixed", "data_shape"],
)
def test_benchmark_data_over_the_memory_limit_is_refused_before_allocating(
    proto, shape, data_shape, expected
):
    model = hc.Model(proto) if proto is not None else hc.Core().read_model(DIGITS)
    with pytest.raises(bench.BenchmarkError) as err:
        bench.data_shapes(model, shape, data_shape)
    text = str(err.value)
    assert all(e in text for e in expected), text
    assert "over the limit of" in text and "memory" in text


@pytest.mark.parametrize(
    ("model", "args", "expected"),
    [
        (None, ["-shape", "[99999999999,1,32,32]"], "372.5 TiB"),
        (identity_model(HUGE), [], "111.8 GiB"),
        (identity_model(["N", 3, "H", "W"]), ["-data_shape", "[100000,3,1000,1000]"], "1.1 TiB"),
    ],
    ids=["shape", "fixed", "data_shape"],
)
def test_benchmark_command_refuses_data_over_the_memory_limit(tmp_path, model, args, expected):
    path = DIGITS if model is None else saved(tmp_path, model)
    proc = limited("hetero", "benchmark", "-m", path, "-d", "CPU", "-niter", "2", *args, cwd=tmp_path)
    assert proc.returncode == 2, proc.stderr
    line = one_error_line_of(proc)
    assert expected in line and "smaller" in line
    assert sorted(os.listdir(tmp_path)) == ([] if model is None else ["m.onnx"])


def test_input_sets_refuses_the_data_of_every_request_together(monkeypatch):
    model = hc.Core().read_model(DIGITS)
    shapes = {"image": (4, 1, 32, 32)}  # 16 KiB a request
    monkeypatch.setattr(limits, "memory_limit", lambda: 40 * 1024)
    monkeypatch.setattr(limits, "available_memory", lambda: None)
    monkeypatch.setattr(bench_shapes, "activation_peak", lambda model, shapes: 0)  # the input data alone
    assert len(bench.input_sets(model, shapes, {}, 2)) == 2
    with pytest.raises(bench.BenchmarkError, match=r"3 infer requests .*\(-nireq\)"):
        bench.input_sets(model, shapes, {}, 3)
    with pytest.raises(bench.BenchmarkError, match="over the limit"):
        random_tensor(np.random.default_rng(0), np.float32, (100, 1, 32, 32))


@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.int32, np.int8, np.uint8, np.bool_])
def test_random_data_is_made_in_its_own_type_without_a_wider_copy(dtype):
    shape = (250, 1, 64, 64)  # about a million elements
    want = np.dtype(dtype).itemsize * 250 * 64 * 64
    rng = np.random.default_rng(0)
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        x = random_tensor(rng, dtype, shape)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert x.dtype == dtype and x.shape == shape
    # float16 is made as float32 (numpy's Generator has no float16): at most the float32 array beside it
    allowed = want + (4 * x.size if dtype == np.float16 else 0) + 64 * 1024
    assert peak <= allowed, (peak, want)


def test_random_data_stays_seeded_and_in_range():
    model = hc.Core().read_model(DIGITS)
    a = bench.input_sets(model, {"image": (2, 1, 32, 32)}, {}, 2)
    b = bench.input_sets(model, {"image": (2, 1, 32, 32)}, {}, 2)
    for x, y in zip(a, b, strict=True):
        np.testing.assert_array_equal(x["image"], y["image"])
    assert not np.array_equal(a[0]["image"], a[1]["image"])
    assert a[0]["image"].dtype == np.float32 and a[0]["image"].min() >= 0 and a[0]["image"].max() < 255
    ints = random_tensor(np.random.default_rng(1), np.int64, (1000,))
    assert ints.dtype == np.int64 and ints.min() >= 0 and ints.max() <= 9


# --- 3. a fixed 0 dimension is fixed ----------------------------------------------------------------------


def test_a_zero_dimension_is_fixed_not_dynamic():
    model = hc.Model(identity_model([0, 3, 8, 8]))
    shapes, notes = bench.data_shapes(model)
    assert shapes == {"x": (0, 3, 8, 8)} and notes == []
    dynamic = hc.Model(identity_model(["N", 0, 8, 8]))
    shapes, notes = bench.data_shapes(dynamic, "[2,?,8,8]")
    assert shapes == {"x": (2, 0, 8, 8)} and notes == []
    with pytest.raises(bench.BenchmarkError, match="fixed at 0"):
        bench.data_shapes(model, None, "[2,3,8,8]")


def test_benchmark_runs_a_model_with_a_zero_dimension(tmp_path):
    path = saved(tmp_path, identity_model([0, 3, 8, 8]))
    result = invoke(cli.benchmark, "-m", path, "-d", "CPU", "-niter", "2", "-api", "sync")
    assert result.exit_code == 0, result.stderr
    assert "dynamic dimensions" not in result.stdout and "[ ERROR ]" not in result.stderr
    assert "x: data [0,3,8,8]" in result.stdout


def test_an_image_input_with_a_zero_dimension_is_refused():
    with pytest.raises(image.ImageError, match=r"\[0,1,8,8\]: a dimension fixed at 0"):
        image.preprocessing(hc.Model(identity_model([0, 1, 8, 8])))


# --- 4. --color against a grey input ----------------------------------------------------------------------


@pytest.mark.parametrize("color", ["rgb", "BGR"])
def test_color_with_three_channels_on_a_grey_model_is_a_usage_error(color):
    result = invoke(cli.classify, DIGITS, DIGIT, "CPU", "--color", color)
    assert result.exit_code == 2
    line = one_error_line(result)
    assert f"--color {color.upper()}" in line and "takes 1 (grey)" in line and "--color GRAY" in line


def test_colour_metadata_on_a_grey_input_is_refused_naming_the_metadata():
    with pytest.raises(image.ImageError, match=r"metadata \(color RGB\).*\[1,1,8,8\] takes 1"):
        image.preprocessing(hc.Model(identity_model([1, 1, 8, 8], color="RGB")))
    assert image.preprocessing(hc.Model(identity_model([1, 3, 8, 8])), color="GRAY").color == "GRAY"


# --- 5. -i NAME:FILE ------------------------------------------------------------------------------------


def test_input_file_for_a_name_the_model_does_not_have(tmp_path):
    data = tmp_path / "x.npy"
    np.save(data, np.zeros((1, 1, 32, 32), np.float32))
    with pytest.raises(bench.BenchmarkError) as err:
        bench.parse_input_files([f"foo:{data}"], ["image"])
    text = str(err.value)
    assert "'foo' is not an input of the model" in text and "image" in text and "no such file" not in text
    result = invoke(cli.benchmark, "-m", DIGITS, "-niter", "1", "-i", f"foo:{data}")
    assert result.exit_code == 2
    assert "'foo' is not an input of the model; its inputs are image" in one_error_line(result)
    with pytest.raises(bench.BenchmarkError, match=r"'b' is not an input.*a, c"):
        bench.parse_input_files([f"b:{data}"], ["a", "c"])


def test_input_name_with_no_file(tmp_path):
    with pytest.raises(bench.BenchmarkError, match="names no file"):
        bench.parse_input_files(["image:"], ["image"])
    result = invoke(cli.benchmark, "-m", DIGITS, "-niter", "1", "-i", "image:")
    assert result.exit_code == 2
    line = one_error_line(result)
    assert "'image:' names no file" in line and "folder holds no images" not in line


def test_input_files_still_accept_name_file_and_a_bare_file(tmp_path):
    data = tmp_path / "x.npy"
    np.save(data, np.zeros((1, 1, 32, 32), np.float32))
    assert bench.parse_input_files([f"image:{data}"], ["image"]) == {"image": [data]}
    assert bench.parse_input_files([str(data)], ["image"]) == {"image": [data]}


def test_a_path_without_a_name_goes_to_the_input_named_before_it(tmp_path):
    """benchmark_app's -i input_1:file_1,file_2,input_4:file_4 input_2:file_3."""
    f1, f2, f3, f4 = (tmp_path / f"{k}.npy" for k in range(1, 5))
    for f in (f1, f2, f3, f4):
        np.save(f, np.zeros((2, 3), np.float32))
    got = bench.parse_input_files([f"a:{f1},{f2},c:{f4}", f"b:{f3}"], ["a", "b", "c"])
    assert got == {"a": [f1, f2], "c": [f4], "b": [f3]}
    with pytest.raises(bench.BenchmarkError, match=r"the model has 3 inputs \(a, b, c\); write -i name:file"):
        bench.parse_input_files([str(f1)], ["a", "b", "c"])


def _relu_model(name: str) -> onnx.ModelProto:
    """``name``[1,3,8,8] -> Relu -> y, for input names as TensorFlow gives them (``input_1:0``)."""
    graph = h.make_graph(
        [h.make_node("Relu", [name], ["y"], name="r")],
        "colon",
        [h.make_tensor_value_info(name, TensorProto.FLOAT, [1, 3, 8, 8])],
        [h.make_tensor_value_info("y", TensorProto.FLOAT, [1, 3, 8, 8])],
    )
    return h.make_model(graph, ir_version=9, opset_imports=[h.make_opsetid("", 17)])


def test_input_names_with_a_colon_take_name_file_and_shapes(tmp_path):
    data = tmp_path / "x.npy"
    np.save(data, np.zeros((1, 3, 8, 8), np.float32))
    assert bench.parse_input_files([f"input_1:0:{data}"], ["input_1:0"]) == {"input_1:0": [data]}
    assert bench.parse_input_files([f"a:b:{data}"], ["a", "a:b"]) == {"a:b": [data]}  # the longest name
    assert bench.parse_input_files([f"a:{data}"], ["a", "a:b"]) == {"a": [data]}
    assert parse_shapes("input_1:0[1,3,8,8]", ["input_1:0"], "-shape") == {"input_1:0": [1, 3, 8, 8]}
    path = saved(tmp_path, _relu_model("input_1:0"))
    result = invoke(
        cli.benchmark, "-m", path, "-d", "CPU", "-niter", 1, "-api", "sync", "-i", f"input_1:0:{data}",
        "-data_shape", "input_1:0[1,3,8,8]",
    )  # fmt: skip
    assert result.exit_code == 0, result.stderr
    assert "input_1:0: data [1,3,8,8] from 1 file(s)" in result.stdout


def test_benchmark_takes_dynamic_height_and_width_from_the_image(tmp_path):
    """As classify does: an input [1,3,H,W] fed an image 12 wide and 10 high gets [1,3,10,12], not 1x1."""
    path = saved(tmp_path, identity_model([1, 3, "H", "W"]))
    picture = tmp_path / "p.png"
    Image.new("RGB", (12, 10), (200, 10, 10)).save(picture)
    model = hc.Core().read_model(path)
    assert bench.image_dims(model, {"x": [picture]}) == {"x": {1: 3, 2: 10, 3: 12}}
    assert bench.image_dims(model, {"x": [picture]}, "NHWC") == {"x": {3: 3, 1: 10, 2: 12}}
    assert bench.image_dims(hc.Core().read_model(DIGITS), {"image": [picture]}) == {}  # fixed 32x32
    result = invoke(cli.benchmark, "-m", path, "-d", "CPU", "-niter", 1, "-api", "sync", "-i", picture)
    assert result.exit_code == 0, result.stderr
    assert "x: data [1,3,10,12] from 1 file(s)" in result.stdout
    assert "taken from its first -i file" in result.stdout
    result = invoke(
        cli.benchmark,
        "-m",
        path,
        "-d",
        "CPU",
        "-niter",
        1,
        "-api",
        "sync",
        "-i",
        picture,
        "-data_shape",
        "[1,3,4,4]",
    )
    assert result.exit_code == 0, result.stderr
    assert "x: data [1,3,4,4] from 1 file(s)" in result.stdout
    result = invoke(
        cli.benchmark, "-m", path, "-d", "CPU", "-niter", 1, "-api", "sync", "-i", picture,
        "-data_shape", "[1,3,?,40]",
    )  # fmt: skip
    assert result.exit_code == 0, result.stderr
    assert "x: data [1,3,10,40] from 1 file(s)" in result.stdout  # the width as given, the height the image's
    assert (
        "is [1,3,H,W] ([1,3,H,40] as given): dimensions still dynamic taken from its first -i file"
        in result.stdout
    )


# --- 6. --mean on a grey input --------------------------------------------------------------------------


def test_mean_count_message_says_one_for_a_grey_model():
    result = invoke(cli.classify, DIGITS, DIGIT, "CPU", "--mean", "1,2")
    assert result.exit_code == 2
    line = one_error_line(result)
    assert "1 channel" in line and "(3)" not in line
    with pytest.raises(image.ImageError, match=r"one per channel \(3\)"):
        image.preprocessing(hc.Model(identity_model([1, 3, 8, 8])), mean="1,2")


# --- 7. the decompression-bomb limit ----------------------------------------------------------------------


def _chunk(kind: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))


def png_header(width: int, height: int) -> bytes:
    """A PNG that claims ``width`` x ``height`` (Pillow checks the size on opening, before decoding)."""
    header = struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0)
    body = zlib.compress(b"\x00" * (width + 1))
    return b"\x89PNG\r\n\x1a\n" + _chunk(b"IHDR", header) + _chunk(b"IDAT", body) + _chunk(b"IEND", b"")


@pytest.mark.parametrize("size", [(10_000, 10_000), (20_000, 20_000)], ids=["warned", "refused"])
def test_decompression_bomb_message_quotes_the_limit_that_applies(tmp_path, size):
    path = tmp_path / "bomb.png"
    path.write_bytes(png_header(*size))
    with pytest.raises(image.ImageError) as err:
        image.read(path)
    text = str(err.value)
    assert f"{size[0] * size[1]} pixels" in text
    assert str(Image.MAX_IMAGE_PIXELS) in text and str(2 * Image.MAX_IMAGE_PIXELS) not in text
