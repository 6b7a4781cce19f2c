"""ai.onnx.ml encoders and map ops (LabelEncoder 1/2/4, CategoryMapper, OneHotEncoder, FeatureVectorizer,
DictVectorizer, CastMap) against onnxruntime on the same inputs, or onnx.reference where onnxruntime has
no kernel (LabelEncoder 4 on int16/int32) or cannot take the input from Python (maps of strings)."""
from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto as TP, helper as h, numpy_helper as nh
from onnx.reference import ReferenceEvaluator

import onnxc
from onnxc.errors import Fail, InvalidArgument, InvalidGraph

ort = pytest.importorskip("onnxruntime")

NP = {TP.STRING: object, TP.INT64: np.int64, TP.FLOAT: np.float32, TP.DOUBLE: np.float64,
      TP.INT32: np.int32, TP.INT16: np.int16}
NAN = float("nan")
WEIRD = ["a", "é", "ü\u4e2d", "*/ \"q\" ??=", "\\", ""]      # non-ASCII, C-comment and escape characters


def _model(op, in_types, ot, ml=2, **attrs):
    """One ai.onnx.ml node. in_types: one (elem type, rank) per tensor input, or a map type proto."""
    ins = []
    for i, t in enumerate(in_types):
        name = "X" if len(in_types) == 1 else f"X{i}"
        if isinstance(t, tuple):
            ins.append(h.make_tensor_value_info(name, t[0], [f"d{i}_{k}" for k in range(t[1])]))
        else:
            ins.append(h.make_value_info(name, t))
    node = h.make_node(op, [v.name for v in ins], ["Y"], domain="ai.onnx.ml", **attrs)
    g = h.make_graph([node], "g", ins, [h.make_tensor_value_info("Y", ot, None)])
    m = h.make_model(g, opset_imports=[h.make_opsetid("", 17), h.make_opsetid("ai.onnx.ml", ml)])
    m.ir_version = 9
    return m


def _same(got, ref):
    ref = np.asarray(ref)
    if ref.dtype.kind in "US":
        ref = ref.astype(object)
    assert got.shape == ref.shape, (got.shape, ref.shape)
    assert got.dtype == ref.dtype, (got.dtype, ref.dtype)
    if ref.dtype.kind == "f":
        np.testing.assert_array_equal(got, ref)              # NaN equal to NaN, exact values
        assert (np.signbit(got) == np.signbit(ref)).all()
    else:
        assert got.tolist() == ref.tolist()


def _check(model, feed, tmp_path, against="ort"):
    got = onnxc.InferenceSession(model.SerializeToString(), cache_dir=tmp_path).run(None, feed)[0]
    if against == "ort":
        ref = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feed)[0]
    else:
        ref = ReferenceEvaluator(model).run(None, feed)[0]
    _same(got, ref)
    return got


def t(a):
    return nh.from_array(np.asarray(a))


# (ml opset, input type, output type, x, attributes, reference)
LABEL_CASES = {
    "v1_str_int": (1, TP.STRING, TP.INT64, WEIRD + ["zz"], dict(classes_strings=WEIRD + ["a"]), "ort"),
    "v1_int_str": (1, TP.INT64, TP.STRING, [[0, 1, 2], [6, -1, 99]],
                   dict(classes_strings=WEIRD + ["a"], default_string="dflt"), "ort"),
    "v2_float_int": (2, TP.FLOAT, TP.INT64, [1.0, NAN, 0.0, -0.0, 3, np.inf],
                     dict(keys_floats=[NAN, 0.0, 1.0, 1.0, np.inf], values_int64s=[7, 8, 9, 10, 11]), "ort"),
    "v2_str_str_dup": (2, TP.STRING, TP.STRING, WEIRD + ["x"],
                       dict(keys_strings=WEIRD + ["a"], values_strings=[s + "!" for s in WEIRD] + ["dup"]), "ort"),
    "v2_str_float": (2, TP.STRING, TP.FLOAT, [["a", "z"], ["é", ""]],
                     dict(keys_strings=["a", "é"], values_floats=[1.5, 0.1]), "ort"),
    "v2_int_float_default": (2, TP.INT64, TP.FLOAT, [1, 2, -2**63, 2**63 - 1],
                             dict(keys_int64s=[1, -2**63, 2**63 - 1], values_floats=[1.5, 2.5, 3.5],
                                  default_float=7.0), "ort"),
    "v2_int_int": (2, TP.INT64, TP.INT64, [[1, 2], [3, 4]], dict(keys_int64s=[1, 3], values_int64s=[10, 30],
                                                             default_int64=-5), "ort"),
    "v2_float_str": (2, TP.FLOAT, TP.STRING, [0.5, 1.5], dict(keys_floats=[0.5], values_strings=["ü"]), "ort"),
    "v4_float_nan": (4, TP.FLOAT, TP.INT64, [1.0, NAN, 0.0, -0.0, 3],
                     dict(keys_floats=[NAN, -0.0, 1.0, 1.0], values_int64s=[7, 8, 9, 10]), "ort"),
    "v4_double_tensors": (4, TP.DOUBLE, TP.DOUBLE, [1.0, NAN, 0.0, 3, 0.1],
                          dict(keys_tensor=t(np.array([NAN, 1.0, 0.1])),
                               values_tensor=t(np.array([5.0, 6.0, -0.25]))), "ort"),
    "v4_double_default": (4, TP.DOUBLE, TP.INT64, [1.0, 2.0],
                          dict(keys_tensor=t(np.array([1.0])), values_tensor=t(np.array([4], np.int64)),
                               default_tensor=t(np.array([-9], np.int64))), "ort"),
    "v4_int_str_default": (4, TP.INT64, TP.STRING, [[1, 2, 3]],
                           dict(keys_int64s=[1, 2], values_strings=["x", "ü"],
                                default_tensor=t(np.array(["dd"], object))), "ort"),
    "v4_int32_int16": (4, TP.INT32, TP.INT16, [1, 2, 3],
                       dict(keys_tensor=t(np.array([1, 2], np.int32)), values_tensor=t(np.array([5, 6], np.int16)),
                            default_tensor=t(np.array([42], np.int16))), "ref"),
}


@pytest.mark.parametrize("case", sorted(LABEL_CASES))
def test_label_encoder(case, tmp_path):
    ml, it, ot, x, attrs, against = LABEL_CASES[case]
    x = np.array(x, dtype=NP[it])
    _check(_model("LabelEncoder", [(it, x.ndim)], ot, ml, **attrs), {"X": x}, tmp_path, against)


def test_label_encoder_large_parallel(tmp_path):
    rng = np.random.default_rng(0)
    keys = [f"k{i}é" for i in range(500)]
    x = np.array(rng.choice(keys + ["nope"], 50000), dtype=object)
    m = _model("LabelEncoder", [(TP.STRING, 1)], TP.INT64, 2, keys_strings=keys, values_int64s=list(range(500)))
    _check(m, {"X": x}, tmp_path)


def test_category_mapper(tmp_path):
    cats = dict(cats_strings=WEIRD + ["a"], cats_int64s=[1, 2, 3, 4, 5, 6, 1], default_string="D",
                default_int64=-7)
    x = np.array([WEIRD, ["q"] * len(WEIRD)], dtype=object)
    _check(_model("CategoryMapper", [(TP.STRING, 2)], TP.INT64, **cats), {"X": x}, tmp_path)
    x = np.array([1, 2, 3, 4, 5, 6, 0, -1], np.int64)
    _check(_model("CategoryMapper", [(TP.INT64, 1)], TP.STRING, **cats), {"X": x}, tmp_path)


@pytest.mark.parametrize("et", [TP.STRING, TP.INT64, TP.FLOAT, TP.DOUBLE])
@pytest.mark.parametrize("zeros", [0, 1])
def test_one_hot_encoder(et, zeros, tmp_path):
    if et == TP.STRING:
        attrs, x = dict(cats_strings=WEIRD + ["a"]), np.array([["a", "é"], ["", "*/ \"q\" ??="]], object)
    else:
        attrs = dict(cats_int64s=[1, 3, -2**63, 2, 3])
        x = np.array([1.7, 3, NAN, 2.2, 2] if et != TP.INT64 else [1, 3, -2**63, 2, 2], NP[et])
    m = _model("OneHotEncoder", [(et, x.ndim)], TP.FLOAT, 1, zeros=zeros, **attrs)
    _check(m, {"X": x}, tmp_path)
    unknown = np.array(["zz"] if et == TP.STRING else [5], NP[et]).reshape((1,) * x.ndim)
    if zeros:
        _check(m, {"X": unknown}, tmp_path)
    else:
        with pytest.raises(Fail):
            onnxc.InferenceSession(m.SerializeToString(), cache_dir=tmp_path).run(None, {"X": unknown})


@pytest.mark.parametrize("et", [TP.FLOAT, TP.DOUBLE, TP.INT64, TP.INT32])
def test_feature_vectorizer(et, tmp_path):
    dt = NP[et]
    feeds = {"X0": (np.arange(6) * 1.5).astype(dt).reshape(2, 3), "X1": np.array([[1, 2], [3, 4]], dt),
             "X2": (np.arange(8) / 3).astype(dt).reshape(2, 2, 2), "X3": np.array([[7], [8]], dt)}
    # X0 truncated to 2, X1 padded to 4, X2 flattened per row (4 values, 3 kept), X3 as is
    m = _model("FeatureVectorizer", [(et, a.ndim) for a in feeds.values()], TP.FLOAT, 1, inputdimensions=[2, 4, 3, 1])
    assert _check(m, feeds, tmp_path).shape == (2, 10)
    m = _model("FeatureVectorizer", [(et, 1), (et, 1)], TP.FLOAT, 1, inputdimensions=[2, 3])
    _check(m, {"X0": np.array([1.5, 2.5, 3.5], dt), "X1": np.array([4, 5], dt)}, tmp_path)


def test_feature_vectorizer_mixed_types(tmp_path):
    """Inputs of different numeric types (onnx's schema binds one T1; onnxc converts each)."""
    feeds = {"X0": np.array([[0.5, 1.5, 9], [2.5, 3.5, 9]], np.float32), "X1": np.array([[1], [2]], np.int64),
             "X2": np.array([[0.25], [-1e300]], np.float64), "X3": np.array([[7, 8], [9, 10]], np.int32)}
    types = [(TP.FLOAT, 2), (TP.INT64, 2), (TP.DOUBLE, 2), (TP.INT32, 2)]
    m = _model("FeatureVectorizer", types, TP.FLOAT, 1, inputdimensions=[2, 2, 1, 2])
    got = onnxc.InferenceSession(m.SerializeToString(), cache_dir=tmp_path).run(None, feeds)[0]
    _same(got, np.array([[0.5, 1.5, 1, 0, 0.25, 7, 8], [2.5, 3.5, 2, 0, -np.inf, 9, 10]], np.float32))


def _map(kt, vt):
    return h.make_map_type_proto(kt, h.make_tensor_type_proto(vt, None))


DICT_CASES = {   # key type, value type, vocabulary attribute, feed, reference
    "str_float": (TP.STRING, TP.FLOAT, dict(string_vocabulary=["a", "b"] + WEIRD[1:] + ["a"]),
                  {"a": 1.0, "é": 3.0, "*/ \"q\" ??=": -2, "zz": 5}, "ort"),
    "int_float": (TP.INT64, TP.FLOAT, dict(int64_vocabulary=[3, 1, 7, -5, 1]), {1: 2.5, 7: 1.0, -5: 4, 100: 1}, "ort"),
    "str_double": (TP.STRING, TP.DOUBLE, dict(string_vocabulary=["a", "b"]), {"b": 0.1}, [[0.0, 0.1]]),
    "str_int": (TP.STRING, TP.INT64, dict(string_vocabulary=["a", "b"]), {"b": 2**40}, [[0, 2**40]]),
    "int_double": (TP.INT64, TP.DOUBLE, dict(int64_vocabulary=[2, 9]), {9: -1.25, 4: 3.0}, [[0.0, -1.25]]),
    "int_str": (TP.INT64, TP.STRING, dict(int64_vocabulary=[3, 1, 7]), {1: "ü", 7: "x"}, [["", "ü", "x"]]),
}


@pytest.mark.parametrize("case", sorted(DICT_CASES))
def test_dict_vectorizer(case, tmp_path):
    kt, vt, attrs, feed, ref = DICT_CASES[case]
    m = _model("DictVectorizer", [_map(kt, vt)], vt, 1, **attrs)
    if ref == "ort":
        _check(m, {"X": feed}, tmp_path)
        return
    sess = onnxc.InferenceSession(m.SerializeToString(), cache_dir=tmp_path)
    _same(sess.run(None, {"X": feed})[0], np.array(ref, dtype=NP[vt]))


def test_map_input_api(tmp_path):
    m = _model("DictVectorizer", [_map(TP.STRING, TP.FLOAT)], TP.FLOAT, 1, string_vocabulary=["a", "b"])
    sess = onnxc.InferenceSession(m.SerializeToString(), cache_dir=tmp_path)
    ref = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    assert [(i.name, i.type, i.shape) for i in sess.get_inputs()] == \
        [(i.name, i.type, i.shape) for i in ref.get_inputs()]
    _same(sess.run(None, {"X": {}})[0], np.zeros((1, 2), np.float32))       # onnxruntime refuses {}
    with pytest.raises(InvalidArgument, match="map"):
        sess.run(None, {"X": {1: 2.0}})
    with pytest.raises(InvalidArgument):
        sess.run(None, {"X": np.zeros(2, np.float32)})
    with pytest.raises(InvalidArgument):
        sess.run(None, {"X": {"a": "x"}})
    with pytest.raises(InvalidArgument):
        sess.run(None, {})


@pytest.mark.parametrize("cast_to", ["TO_FLOAT", "TO_INT64", "TO_STRING"])
@pytest.mark.parametrize("form", ["DENSE", "SPARSE"])
def test_cast_map(cast_to, form, tmp_path):
    ot = {"TO_FLOAT": TP.FLOAT, "TO_INT64": TP.INT64, "TO_STRING": TP.STRING}[cast_to]
    if cast_to != "TO_STRING":   # float values: onnxruntime takes these from Python
        m = _model("CastMap", [_map(TP.INT64, TP.FLOAT)], ot, 1, cast_to=cast_to, map_form=form, max_map=5)
        _check(m, {"X": {5: 2.5, 1: -1.7, 3: NAN, 0: 1e30}}, tmp_path)
    m = _model("CastMap", [_map(TP.INT64, TP.STRING)], ot, 1, cast_to=cast_to, map_form=form, max_map=5)
    sess = onnxc.InferenceSession(m.SerializeToString(), cache_dir=tmp_path)
    vals = {5: "2.5", 1: " -17e-1", 3: "4x", 0: "9"}                   # std::stof / std::stoll readings
    conv = {"TO_FLOAT": lambda s: {"2.5": 2.5, " -17e-1": -1.7, "4x": 4.0, "9": 9.0}[s],
            "TO_INT64": lambda s: {"2.5": 2, " -17e-1": -17, "4x": 4, "9": 9}[s], "TO_STRING": lambda s: s}[cast_to]
    pad = "0.f" if cast_to == "TO_STRING" else 0
    exp = [conv(vals[k]) for k in sorted(vals)] if form == "DENSE" else \
        [conv(vals[k]) if k in vals else pad for k in range(5)]
    _same(sess.run(None, {"X": vals})[0], np.array([exp], dtype=NP[ot]))
    if cast_to != "TO_STRING":
        with pytest.raises(Fail):
            sess.run(None, {"X": {1: "abc"}})


def test_cast_map_sparse_negative_key(tmp_path):
    m = _model("CastMap", [_map(TP.INT64, TP.FLOAT)], TP.FLOAT, 1, map_form="SPARSE", max_map=3)
    with pytest.raises(Fail):
        onnxc.InferenceSession(m.SerializeToString(), cache_dir=tmp_path).run(None, {"X": {-1: 2.0, 1: 3.0}})


@pytest.mark.parametrize("op, attrs, why", [
    ("LabelEncoder", dict(keys_int64s=[1, 2], values_int64s=[1]), "entries"),
    ("LabelEncoder", dict(keys_int64s=[1], keys_strings=["a"], values_int64s=[1]), "exactly one keys"),
    ("LabelEncoder", dict(keys_floats=[1.0], values_int64s=[1]), "does not match"),
    ("OneHotEncoder", dict(cats_strings=["a"]), "numeric input needs cats_int64s"),
    ("FeatureVectorizer", dict(inputdimensions=[1, 2]), "inputdimensions"),
])
def test_errors_name_the_node(op, attrs, why, tmp_path):
    m = _model(op, [(TP.INT64, 1)], TP.INT64 if op == "LabelEncoder" else TP.FLOAT, 2 if op == "LabelEncoder" else 1,
               **attrs)
    with pytest.raises(InvalidGraph, match=why):
        onnxc.InferenceSession(m.SerializeToString(), cache_dir=tmp_path)
