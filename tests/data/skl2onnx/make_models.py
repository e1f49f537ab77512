"""Make the scikit-learn models in this folder: small, deterministic, converted by skl2onnx.

They are real converter output of the kind hetero-cli must split: ZipMap (a sequence of maps), string
class labels, a string input beside float inputs, TreeEnsemble and other ai.onnx.ml operators, a text
model (StringNormalizer, com.microsoft's Tokenizer, TfIdfVectorizer). Each ``NAME.onnx`` comes with
``NAME.npz``: example inputs by input name (strings as numpy unicode arrays), so the test
(tests/integration/test_skl2onnx_models.py) needs neither scikit-learn nor skl2onnx.

Rerun it in a venv of its own (never in the project's .venv, whose onnxruntime-openvino pip would
replace):

    python3 -m venv /tmp/skvenv
    /tmp/skvenv/bin/pip install scikit-learn==1.9.1 skl2onnx==1.20.0 onnx==1.23.2 numpy==2.4.6
    /tmp/skvenv/bin/python tests/data/skl2onnx/make_models.py

Versions used for the committed files: scikit-learn 1.9.1, skl2onnx 1.20.0, onnx 1.23.2, numpy 2.4.6
(scipy 1.17.1). Opsets ai.onnx 17 and ai.onnx.ml 3, IR version 8: ONNX Runtime 1.24 loads them all.
"""

from __future__ import annotations

import io
import zipfile
from pathlib import Path

import numpy as np
import onnx
from skl2onnx import to_onnx
from skl2onnx.common.data_types import FloatTensorType, StringTensorType
from sklearn.compose import ColumnTransformer
from sklearn.datasets import load_diabetes, load_iris
from sklearn.decomposition import PCA
from sklearn.ensemble import GradientBoostingRegressor, RandomForestClassifier
from sklearn.feature_extraction.text import TfidfVectorizer
from sklearn.linear_model import LogisticRegression, Ridge
from sklearn.neural_network import MLPClassifier
from sklearn.pipeline import Pipeline
from sklearn.preprocessing import OneHotEncoder, StandardScaler

HERE = Path(__file__).resolve().parent
OPSETS = {"": 17, "ai.onnx.ml": 3}
IR_VERSION = 8  # what opset 17 needs; ORT 1.24 reads up to 11


def save(name: str, model: onnx.ModelProto, inputs: dict[str, np.ndarray]) -> None:
    model.ir_version = IR_VERSION
    model.producer_version = ""  # the file does not change with skl2onnx's patch version
    model.doc_string = ""
    # skl2onnx lists the opsets in set order (it changes with PYTHONHASHSEED) and sometimes lists ai.onnx
    # twice: sorted and once each, the files are the same on every run
    opsets = sorted({(o.domain, o.version) for o in model.opset_import})
    del model.opset_import[:]
    model.opset_import.extend(onnx.helper.make_opsetid(d, v) for d, v in opsets)
    onnx.checker.check_model(model, full_check=True)
    names = [i.name for i in model.graph.input]
    assert sorted(names) == sorted(inputs), (name, names, list(inputs))
    onnx.save(model, HERE / f"{name}.onnx")
    write_npz(HERE / f"{name}.npz", inputs)
    print(f"{name}.onnx: {(HERE / f'{name}.onnx').stat().st_size} bytes, inputs {names}")


def write_npz(path: Path, arrays: dict[str, np.ndarray]) -> None:
    """np.savez's format, with a fixed date in the zip entries so the bytes do not change between runs."""
    with zipfile.ZipFile(path, "w", zipfile.ZIP_STORED) as z:
        for key, value in arrays.items():
            assert value.dtype != object, key  # unicode arrays, so np.load needs no pickle
            buffer = io.BytesIO()
            np.lib.format.write_array(buffer, value, allow_pickle=False)
            z.writestr(zipfile.ZipInfo(f"{key}.npy", date_time=(1980, 1, 1, 0, 0, 0)), buffer.getvalue())


def iris() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    data = load_iris()
    return data.data.astype(np.float32), data.target, np.asarray(data.target_names)[data.target]


def rows(x: np.ndarray) -> np.ndarray:
    """A few rows of every class (iris is sorted by class), including one near a class border."""
    return np.ascontiguousarray(x[[0, 1, 50, 70, 77, 100, 133, 149]])


def logreg_zipmap() -> None:
    """LogisticRegression on iris: int64 labels, probabilities as ZipMap's seq(map(int64, float))."""
    x, y, _ = iris()
    clf = LogisticRegression(max_iter=500, random_state=0).fit(x, y)
    model = to_onnx(clf, initial_types=[("X", FloatTensorType([None, 4]))], target_opset=OPSETS)
    save("logreg_zipmap", model, {"X": rows(x)})


def mlp_string_labels() -> None:
    """MLPClassifier with the iris species as labels: tensor(string) labels, seq(map(string, float))."""
    x, _, names = iris()
    clf = MLPClassifier(hidden_layer_sizes=(8,), max_iter=3000, random_state=0).fit(x, names)
    model = to_onnx(clf, initial_types=[("X", FloatTensorType([None, 4]))], target_opset=OPSETS)
    save("mlp_string_labels", model, {"X": rows(x)})


def column_transformer() -> None:
    """Pipeline(ColumnTransformer(OneHotEncoder on a string column, StandardScaler on two float
    columns), LogisticRegression): three inputs, one of them tensor(string)."""
    rng = np.random.RandomState(0)
    n = 60
    color = rng.choice(["red", "green", "blue"], n)
    a = rng.normal(size=n).astype(np.float32)
    b = rng.normal(size=n).astype(np.float32)
    y = ((color == "red") ^ (a + 0.5 * b > 0)).astype(np.int64)
    columns = {"color": color.reshape(-1, 1), "a": a.reshape(-1, 1), "b": b.reshape(-1, 1)}
    # ColumnTransformer picks the columns by index: color is 0, a and b are 1 and 2
    table = np.empty((n, 3), dtype=object)
    table[:, 0], table[:, 1], table[:, 2] = color, a, b
    pipe = Pipeline(
        [
            (
                "columns",
                ColumnTransformer(
                    [
                        ("onehot", OneHotEncoder(handle_unknown="ignore"), [0]),
                        ("scale", StandardScaler(), [1, 2]),
                    ]
                ),
            ),
            ("clf", LogisticRegression(random_state=0)),
        ]
    ).fit(table, y)
    types = [
        ("color", StringTensorType([None, 1])),
        ("a", FloatTensorType([None, 1])),
        ("b", FloatTensorType([None, 1])),
    ]
    model = to_onnx(pipe, initial_types=types, target_opset=OPSETS)
    pick = [0, 1, 2, 3, 4, 5]
    inputs = {k: np.ascontiguousarray(v[pick]) for k, v in columns.items()}
    inputs["color"] = np.array([["red"], ["green"], ["blue"], ["red"], ["purple"], ["blue"]])  # one unseen
    save("column_transformer", model, inputs)


def random_forest() -> None:
    """RandomForestClassifier on iris: TreeEnsembleClassifier (ai.onnx.ml), ZipMap."""
    x, y, _ = iris()
    clf = RandomForestClassifier(n_estimators=5, max_depth=3, random_state=0).fit(x, y)
    model = to_onnx(clf, initial_types=[("X", FloatTensorType([None, 4]))], target_opset=OPSETS)
    save("random_forest", model, {"X": rows(x)})


def pca_gradient_boosting() -> None:
    """Pipeline(StandardScaler, PCA, GradientBoostingRegressor) on diabetes: Scaler (ai.onnx.ml), PCA's
    standard Sub and MatMul, then TreeEnsembleRegressor; a float output."""
    data = load_diabetes()
    x = data.data.astype(np.float32)
    pipe = Pipeline(
        [
            ("scale", StandardScaler()),
            ("pca", PCA(n_components=4, random_state=0)),
            ("gbr", GradientBoostingRegressor(n_estimators=10, max_depth=2, random_state=0)),
        ]
    ).fit(x, data.target)
    model = to_onnx(pipe, initial_types=[("X", FloatTensorType([None, 10]))], target_opset=OPSETS)
    save("pca_gradient_boosting", model, {"X": np.ascontiguousarray(x[:6])})


def scaled_ridge() -> None:
    """Pipeline(StandardScaler, Ridge) on diabetes: Scaler then the regression."""
    data = load_diabetes()
    x = data.data.astype(np.float32)
    pipe = Pipeline([("scale", StandardScaler()), ("ridge", Ridge(alpha=1.0))]).fit(x, data.target)
    model = to_onnx(pipe, initial_types=[("X", FloatTensorType([None, 10]))], target_opset=OPSETS)
    save("scaled_ridge", model, {"X": np.ascontiguousarray(x[:6])})


def tfidf_text() -> None:
    """Pipeline(TfidfVectorizer, LogisticRegression) with string labels: one tensor(string) input."""
    corpus = [
        "the cat sat on the mat",
        "a dog chased the cat",
        "dogs and cats are pets",
        "stocks fell sharply today",
        "the market rallied on earnings",
        "investors sold shares",
        "my cat sleeps all day",
        "bond yields rose again",
    ]
    labels = ["pets", "pets", "pets", "money", "money", "money", "pets", "money"]
    pipe = Pipeline([("tfidf", TfidfVectorizer()), ("clf", LogisticRegression(random_state=0))]).fit(
        corpus, labels
    )
    # StringNormalizer without a locale attribute uses en_US.UTF-8, which ORT fails to construct where that
    # locale is not installed (this machine has C, C.utf8, POSIX only); "C" exists everywhere and
    # lower-cases ASCII the same
    model = to_onnx(
        pipe,
        initial_types=[("text", StringTensorType([None, 1]))],
        target_opset=OPSETS,
        options={TfidfVectorizer: {"locale": "C"}},
    )
    texts = ["The cat sat", "stocks and bonds", "a dog", "earnings rallied today", "nothing known here"]
    save("tfidf_text", model, {"text": np.array(texts).reshape(-1, 1)})


if __name__ == "__main__":
    logreg_zipmap()
    mlp_string_labels()
    column_transformer()
    random_forest()
    pca_gradient_boosting()
    scaled_ridge()
    tfidf_text()
