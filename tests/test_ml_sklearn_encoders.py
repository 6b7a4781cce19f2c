"""scikit-learn pipelines with categorical encoders, converted by skl2onnx, run by onnxc and onnxruntime on
the same inputs (the classic-ML matrix of test_ml_sklearn.py, for OneHotEncoder / OrdinalEncoder /
LabelEncoder / DictVectorizer models): labels and encodings equal, probabilities within 1e-4."""
from __future__ import annotations

import warnings

import numpy as np
import pytest

sklearn = pytest.importorskip("sklearn")
skl2onnx = pytest.importorskip("skl2onnx")
ort = pytest.importorskip("onnxruntime")

from skl2onnx.common.data_types import (DictionaryType, FloatTensorType, Int64TensorType,  # noqa: E402
                                        StringTensorType)
from sklearn import compose, ensemble, feature_extraction, linear_model as lm, pipeline, preprocessing  # noqa: E402

import onnxc  # noqa: E402
from onnxc.errors import NotImplemented as OrtNotImplemented  # noqa: E402
from test_ml_sklearn import _outputs_equal  # noqa: E402

COLORS = np.array(["red", "green", "blue", "grün", "*/ \"x\""], dtype=object)


def _table(n=240, seed=0):
    """A small mixed table: two string columns, one int64 column, two float columns, a label."""
    rng = np.random.default_rng(seed)
    s1 = rng.choice(COLORS, n)
    s2 = rng.choice(np.array(["a", "b", "c"], dtype=object), n)
    i1 = rng.integers(0, 4, n).astype(np.int64)
    f = rng.normal(0, 1, (n, 2)).astype(np.float32)
    y = ((s1 == "red") + (i1 == 2) + (f[:, 0] > 0.3)).astype(np.int64)
    return s1, s2, i1, f, y


def _session(model, tmp_path):
    try:
        return onnxc.InferenceSession(model.SerializeToString(), cache_dir=tmp_path)
    except OrtNotImplemented as e:
        if "ai.onnx.ml" in str(e):
            raise
        pytest.skip(f"needs an ai.onnx operator onnxc lacks: {e}")


def _compare(model, feeds, tmp_path):
    sess = _session(model, tmp_path)
    ref = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    for feed in feeds:
        _outputs_equal("", sess.run(None, feed), ref.run(None, feed))
    assert [(o.name, o.type) for o in sess.get_outputs()] == [(o.name, o.type) for o in ref.get_outputs()]
    assert [(o.name, o.type) for o in sess.get_inputs()] == [(o.name, o.type) for o in ref.get_inputs()]


def _batches(cols: dict, unseen: dict | None = None):
    """Full batch, one row, and rows with categories the encoders never saw (handle_unknown='ignore')."""
    out = [cols, {k: v[:1] for k, v in cols.items()}]
    if unseen:
        out.append({k: unseen.get(k, v[:len(next(iter(unseen.values())))]) for k, v in cols.items()})
    return out


def _fit_convert(est, X, y, initial_types):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        est.fit(X) if y is None else est.fit(X, y)
        return skl2onnx.convert_sklearn(est, initial_types=initial_types, target_opset={"": 17, "ai.onnx.ml": 3})


def test_column_transformer_onehot_logreg(tmp_path):
    """String columns: two one-hot encoded, one ordinal encoded, then LogisticRegression (ZipMap)."""
    s1, s2, i1, f, y = _table()
    X = np.stack([s1, s2, np.array(["lo", "mid", "hi"], object)[i1 % 3]], axis=1)
    ct = compose.ColumnTransformer([("cat", preprocessing.OneHotEncoder(handle_unknown="ignore"), [0, 1]),
                                    ("ord", preprocessing.OrdinalEncoder(), [2])])
    est = pipeline.make_pipeline(ct, lm.LogisticRegression(max_iter=500))
    model = _fit_convert(est, X, y, [("X", StringTensorType([None, 3]))])
    Xu = np.array([["purple", "zz", "lo"], ["red", "é", "hi"]], dtype=object)
    _compare(model, [{"X": X}, {"X": X[:1]}, {"X": Xu}], tmp_path)


def test_onehot_int_random_forest(tmp_path):
    """int64 categories one-hot encoded next to floats, into a random forest."""
    s1, s2, i1, f, y = _table(seed=1)
    X = np.concatenate([i1.reshape(-1, 1).astype(np.float32), f], axis=1)
    ct = compose.ColumnTransformer([("cat", preprocessing.OneHotEncoder(handle_unknown="ignore"), [0])],
                                   remainder="passthrough")
    est = pipeline.make_pipeline(ct, ensemble.RandomForestClassifier(10, max_depth=5, random_state=0))
    model = _fit_convert(est, X, y, [("X", FloatTensorType([None, 3]))])
    Xu = X[:5].copy()
    Xu[:, 0] = [7, -1, 2, 0.5, 3]
    _compare(model, [{"X": X}, {"X": X[:1]}, {"X": Xu}], tmp_path)


def test_onehot_strings_alone(tmp_path):
    s1, s2, i1, f, y = _table(seed=2)
    X = np.stack([s1, s2], axis=1)
    enc = preprocessing.OneHotEncoder(handle_unknown="ignore")
    model = _fit_convert(enc, X, None, [("X", StringTensorType([None, 2]))])
    Xu = np.array([["red", "zz"], ["nope", "a"]], dtype=object)
    _compare(model, [{"X": X}, {"X": X[:1]}, {"X": Xu}], tmp_path)


def test_ordinal_encoder_linear_regression(tmp_path):
    s1, s2, i1, f, y = _table(seed=3)
    X = np.stack([s1, s2], axis=1)
    est = pipeline.make_pipeline(preprocessing.OrdinalEncoder(), lm.LinearRegression())
    model = _fit_convert(est, X, y.astype(np.float32), [("X", StringTensorType([None, 2]))])
    _compare(model, [{"X": X}, {"X": X[:1]}], tmp_path)


def test_label_encoder_strings(tmp_path):
    s1, *_ = _table(seed=4)
    enc = preprocessing.LabelEncoder()
    model = _fit_convert(enc, s1, None, [("X", StringTensorType([None]))])
    _compare(model, [{"X": s1}, {"X": s1[:1]}, {"X": np.array(["red", "unknown"], object)}], tmp_path)


def test_label_encoder_ints(tmp_path):
    vals = np.array([10, 3, 7, 3, 10, -2], np.int64)
    enc = preprocessing.LabelEncoder()
    model = _fit_convert(enc, vals, None, [("X", Int64TensorType([None]))])
    _compare(model, [{"X": vals}, {"X": np.array([7, 11], np.int64)}], tmp_path)


def test_dict_vectorizer_logreg(tmp_path):
    """DictVectorizer (map(string, float) input, one dict a call) + LogisticRegression."""
    rng = np.random.default_rng(5)
    words = ["alpha", "beta", "gamma", "délta", "eps"]
    dicts = [{w: float(rng.normal()) for w in rng.choice(words, 3, replace=False)} for _ in range(120)]
    y = np.array([int(d.get("alpha", 0) + d.get("délta", 0) > 0) for d in dicts])
    est = pipeline.make_pipeline(feature_extraction.DictVectorizer(sparse=False), lm.LogisticRegression())
    model = _fit_convert(est, dicts, y, [("X", DictionaryType(StringTensorType([1]), FloatTensorType([1])))])
    feeds = [{"X": d} for d in dicts[:10]] + [{"X": {"alpha": 2.0, "unseen": 1.0}}]
    _compare(model, feeds, tmp_path)


def test_dict_vectorizer_int_keys_regression(tmp_path):
    rng = np.random.default_rng(6)
    dicts = [{int(k): float(rng.normal()) for k in rng.choice(8, 4, replace=False)} for _ in range(80)]
    y = np.array([d.get(1, 0) - d.get(5, 0) for d in dicts])
    est = pipeline.make_pipeline(feature_extraction.DictVectorizer(sparse=False), lm.Ridge())
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        est.fit([{str(k): v for k, v in d.items()} for d in dicts], y)   # sklearn needs str feature names
    est_int = pipeline.make_pipeline(feature_extraction.DictVectorizer(sparse=False), lm.Ridge())
    try:
        model = _fit_convert(est_int, dicts, y, [("X", DictionaryType(Int64TensorType([1]), FloatTensorType([1])))])
    except Exception as e:  # noqa: BLE001 - converter version dependent
        pytest.skip(f"skl2onnx cannot convert int-keyed DictVectorizer here: {e}")
    _compare(model, [{"X": d} for d in dicts[:10]], tmp_path)
