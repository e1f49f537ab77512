"""hetero_cli.app.image: reading pictures and shaping them for a model's image input."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, numpy_helper
from onnx import helper as h
from PIL import Image

import hetero_cli as hc
from hetero_cli.app import image

ROOT = Path(__file__).resolve().parents[2]
DIGITS = ROOT / "models" / "digits.onnx"
SAMPLES = ROOT / "samples" / "images"


def image_model(
    shape,
    elem=TensorProto.FLOAT,
    *,
    metadata: dict[str, str] | None = None,
    normalise: tuple[float, float] | None = None,
    mul: float | None = None,
    extra_inputs: int = 0,
) -> hc.Model:
    """x -> [Sub mean -> Div scale | Mul] -> Identity -> y, with optional metadata_props."""
    nodes, inits, current = [], [], "x"
    if normalise is not None:
        inits += [
            numpy_helper.from_array(np.array(normalise[0], np.float32), "mean"),
            numpy_helper.from_array(np.array(normalise[1], np.float32), "scale"),
        ]
        nodes += [
            h.make_node("Sub", ["x", "mean"], ["c"], name="sub"),
            h.make_node("Div", ["c", "scale"], ["n"], name="div"),
        ]
        current = "n"
    if mul is not None:
        inits.append(numpy_helper.from_array(np.array(mul, np.float32), "factor"))
        nodes.append(h.make_node("Mul", [current, "factor"], ["m"], name="mul"))
        current = "m"
    nodes.append(h.make_node("Identity", [current], ["y"], name="out"))
    inputs = [h.make_tensor_value_info("x", elem, list(shape))]
    inputs += [h.make_tensor_value_info(f"x{k}", TensorProto.FLOAT, [1]) for k in range(extra_inputs)]
    graph = h.make_graph(nodes, "img", inputs, [h.make_tensor_value_info("y", elem, list(shape))], inits)
    model = h.make_model(graph, ir_version=9, opset_imports=[h.make_opsetid("", 17)])
    if metadata:
        h.set_model_props(model, metadata)
    return hc.Model(model)


def test_default_model_gets_raw_pixels():
    # the model normalises in its own graph, so its metadata asks for no mean/scale
    model = hc.Core().read_model(DIGITS)
    prep = image.preprocessing(model)
    assert prep.input.layout == "NCHW" and prep.input.channels == 1 and prep.color == "GRAY"
    assert not prep.normalise
    x = image.load(SAMPLES / "digit_3.png", prep)
    assert x.shape == (1, 1, 32, 32) and x.dtype == np.float32
    assert 200 <= x.max() <= 255 and x.min() >= 0


def test_metadata_mean_scale_apply_when_the_graph_does_not_normalise(tmp_path):
    model = image_model(["N", 1, 4, 4], metadata={"mean": "127.5", "scale": "127.5"})
    prep = image.preprocessing(model)
    assert prep.normalise
    path = tmp_path / "g.png"
    Image.fromarray(np.array([[0, 255, 0, 255]] * 4, np.uint8), "L").save(path)
    x = image.load(path, prep)
    np.testing.assert_allclose(np.unique(x), [-1.0, 1.0])


def test_explicit_mean_and_scale_always_apply(tmp_path):
    model = hc.Core().read_model(DIGITS)
    prep = image.preprocessing(model, mean="10", scale="2")
    assert prep.normalise
    path = tmp_path / "white.png"
    Image.new("L", (32, 32), 30).save(path)
    x = image.load(path, replace_invert(prep, False))
    np.testing.assert_allclose(x, 10.0)


def replace_invert(prep: image.Preprocess, invert: bool | None) -> image.Preprocess:
    from dataclasses import replace

    return replace(prep, invert=invert)


def test_no_metadata_means_no_normalisation_and_rgb(tmp_path):
    model = image_model([1, 3, 2, 2])
    prep = image.preprocessing(model)
    assert not prep.normalise and prep.color == "RGB" and prep.foreground is None
    path = tmp_path / "red.bmp"
    Image.new("RGB", (5, 5), (255, 0, 0)).save(path)
    x = image.load(path, prep)
    assert x.shape == (1, 3, 2, 2)
    np.testing.assert_array_equal(x[0, :, 0, 0], [255, 0, 0])


def test_nhwc_uint8_and_bgr(tmp_path):
    model = image_model([1, 6, 6, 3], TensorProto.UINT8, metadata={"color": "BGR"})
    prep = image.preprocessing(model)
    assert prep.input.layout == "NHWC" and prep.input.dtype == np.uint8
    path = tmp_path / "red.png"
    Image.new("RGB", (12, 12), (255, 0, 0)).save(path)
    x = image.load(path, prep)
    assert x.shape == (1, 6, 6, 3) and x.dtype == np.uint8
    np.testing.assert_array_equal(x[0, 0, 0], [0, 0, 255])


def test_uint8_input_refuses_explicit_mean():
    model = image_model([1, 6, 6, 3], TensorProto.UINT8)
    with pytest.raises(image.ImageError, match="uint8"):
        image.preprocessing(model, mean="1")


def test_dynamic_height_and_width_take_the_image_size(tmp_path):
    model = image_model(["N", 3, "H", "W"])
    prep = image.preprocessing(model)
    path = tmp_path / "a.jpg"
    Image.new("RGB", (7, 5), (10, 20, 30)).save(path)
    assert image.load(path, prep).shape == (1, 3, 5, 7)


def test_grey_into_three_channels_and_rank_three(tmp_path):
    model = image_model([4, 4, 3])
    prep = image.preprocessing(model)
    assert prep.input.layout == "NHWC" and not prep.input.has_batch
    path = tmp_path / "g.png"
    Image.new("L", (4, 4), 77).save(path)
    x = image.load(path, prep)
    assert x.shape == (4, 4, 3)
    np.testing.assert_array_equal(x, 77)


@pytest.mark.parametrize("mode", ["1", "L", "P", "LA", "RGB", "RGBA", "CMYK", "I;16", "I", "F"])
def test_pillow_modes(tmp_path, mode):
    base = Image.new("RGB", (8, 8), (200, 200, 200))
    img = base.convert(mode) if mode not in ("I;16", "I", "F") else base.convert("L").convert(mode)
    suffix = ".tiff" if mode in ("CMYK", "I;16", "I", "F") else ".png"
    path = tmp_path / f"m{suffix}"
    img.save(path)
    model = image_model([1, 3, 8, 8])
    x = image.load(path, image.preprocessing(model))
    assert x.shape == (1, 3, 8, 8)
    assert x.min() >= 0 and x.max() <= 255


def test_transparent_pixels_take_the_background_of_the_foreground_convention(tmp_path):
    path = tmp_path / "t.png"
    Image.new("RGBA", (4, 4), (255, 255, 255, 0)).save(path)
    light = image.preprocessing(image_model([1, 1, 4, 4], metadata={"foreground": "light"}))
    assert float(image.load(path, replace_invert(light, False)).max()) == 0.0  # composited over black
    plain = image.preprocessing(image_model([1, 1, 4, 4]))
    assert float(image.load(path, plain).min()) == 255.0  # over white


def test_light_background_is_inverted_for_a_light_foreground_model(tmp_path):
    model = hc.Core().read_model(DIGITS)
    prep = image.preprocessing(model)
    original = Image.open(SAMPLES / "digit_0.png")
    negative = Image.fromarray(255 - np.asarray(original.convert("L")), "L")
    path = tmp_path / "negative.png"
    negative.save(path)
    assert image.inverted(negative, prep) and not image.inverted(original, prep)
    np.testing.assert_allclose(image.load(path, prep), image.load(SAMPLES / "digit_0.png", prep), atol=1)
    assert not image.inverted(negative, replace_invert(prep, False))


@pytest.mark.parametrize(
    ("model", "match"),
    [
        (lambda: image_model([1, 1, 4, 4], extra_inputs=1), "2 inputs"),
        (lambda: image_model([2, 4]), "rank 2"),
        (lambda: image_model([1, 5, 4, 4]), "no channel dimension"),
        (lambda: image_model([1, 4, 4, 5]), "no channel dimension"),
        (lambda: image_model([1, 1, 4, 4], TensorProto.INT64), "not an image"),
    ],
)
def test_models_that_cannot_take_an_image(model, match):
    with pytest.raises(image.ImageError, match=match):
        image.preprocessing(model())


@pytest.mark.parametrize(
    ("options", "match"),
    [
        ({"scale": "0"}, "divide by zero"),
        ({"mean": "1,2,3"}, "3 values"),
        ({"mean": "abc"}, "bad mean"),
        ({"layout": "CHWN"}, "unknown layout"),
        ({"color": "CMYK"}, "unknown colour"),
    ],
)
def test_bad_preprocessing_options(options, match):
    with pytest.raises(image.ImageError, match=match):
        image.preprocessing(image_model([1, 1, 4, 4]), **options)


def test_unreadable_images(tmp_path):
    good = (SAMPLES / "digit_3.png").read_bytes()
    cases = {
        "missing.png": None,
        "empty.png": b"",
        "truncated.png": good[:300],
        "text.jpg": b"not an image at all",
    }
    for name, data in cases.items():
        path = tmp_path / name
        if data is not None:
            path.write_bytes(data)
        with pytest.raises(image.ImageError) as info:
            image.read(path)
        assert name in str(info.value)
    with pytest.raises(image.ImageError, match="is a folder, not a file"):
        image.read(tmp_path)


def test_every_sample_image_is_classified_as_its_digit():
    import onnxruntime as ort

    model = hc.Core().read_model(DIGITS)
    prep = image.preprocessing(model)
    session = ort.InferenceSession(str(DIGITS), providers=["CPUExecutionProvider"])
    for path in sorted(SAMPLES.glob("digit_*.*")):
        probs = session.run(None, {"image": image.load(path, prep)})[0]
        assert int(probs.argmax()) == int(path.stem.split("_")[1]), path.name


def test_onnx_model_bytes_roundtrip_keeps_metadata(tmp_path):
    proto = image_model([1, 1, 4, 4], metadata={"layout": "NCHW"}).proto
    path = tmp_path / "m.onnx"
    onnx.save(proto, path)
    assert image.metadata(hc.Core().read_model(path)) == {"layout": "NCHW"}
