"""Shape-setting inputs fed as graph inputs (run-time dims, onnxc.dynamic): Expand's shape, Tile's
repeats, ConstantOfShape's shape, OneHot's depth, Range's start/limit/delta, the window functions'
size, MelWeightMatrix's sizes and AffineGrid's size. One library per model, run with several
values against onnx.reference; bad values raise an onnxc error naming the node (no crash)."""
from __future__ import annotations

import warnings

import ml_dtypes
import numpy as np
import pytest
from onnx import helper
from onnx.reference import ReferenceEvaluator

import onnxc
from util import NP2ONNX, assert_close, make_node_model

BF16 = ml_dtypes.bfloat16


class Dyn:
    """One compiled model, checked against onnx.reference for many feeds."""

    def __init__(self, model, out_dtype):
        for vi in model.graph.output:   # rank and dims unknown: they follow from the data
            vi.CopyFrom(helper.make_tensor_value_info(vi.name, NP2ONNX[np.dtype(out_dtype)], None))
        self.ref = ReferenceEvaluator(model)
        self.sess = onnxc.InferenceSession(model.SerializeToString())

    def check(self, feeds, rtol=1e-5, atol=1e-6, ref_dtype=None):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            ref = self.ref.run(None, feeds)
        got = self.sess.run(None, feeds)
        if ref_dtype is not None:   # the reference computes in another type than onnx specifies
            assert all(g.dtype == ref_dtype for g in got)
            ref = [np.asarray(r, ref_dtype) for r in ref]
        assert_close(ref, got, rtol, atol)
        return got

    def bad(self, feeds, op):
        with pytest.raises(onnxc.Error, match=rf"node 0 \({op}"):
            self.sess.run(None, feeds)


def _rand(shape, dtype, rng):
    if dtype == np.bool_:
        return rng.random(shape) > 0.5
    if np.dtype(dtype).kind in "iu":
        return rng.integers(0, 100, shape).astype(dtype)
    return rng.standard_normal(shape).astype(dtype)


# ---- Expand -------------------------------------------------------------------------------
@pytest.mark.parametrize("opset", [8, 13])
@pytest.mark.parametrize("dtype", [np.float32, np.int64, np.bool_, np.float16])
def test_expand(opset, dtype):
    rng = np.random.default_rng(0)
    x = _rand((3, 1), dtype, rng)
    d = Dyn(make_node_model("Expand", {"x": x, "s": np.array([2, 1, 6], np.int64)}, opset=opset), dtype)
    for s in ([2, 1, 6], [1, 3, 1], [4, 3, 5], [2, 1, 0], [1, 1, 1], [3, 3, 1]):
        d.check({"x": x, "s": np.array(s, np.int64)})
    d.bad({"x": x, "s": np.array([2, 2, 6], np.int64)}, "Expand")     # 2 vs 3: cannot broadcast
    d.bad({"x": x, "s": np.array([-1, 1, 6], np.int64)}, "Expand")
    d.bad({"x": x, "s": np.array([1 << 30, 1, 1 << 20], np.int64)}, "Expand")   # too many elements
    d.check({"x": x, "s": np.array([2, 3, 2], np.int64)})             # still usable after errors


def test_expand_shorter_target_and_symbolic_dims():
    rng = np.random.default_rng(1)
    x = rng.standard_normal((2, 3, 1)).astype(np.float32)
    m = make_node_model("Expand", {"x": x, "s": np.array([1, 4], np.int64)},
                        input_shapes={"x": ["A", "B", 1]})
    d = Dyn(m, np.float32)
    for shape, s in [((2, 3, 1), [1, 4]), ((2, 1, 1), [5, 4]), ((1, 3, 1), [3, 1]), ((2, 1, 1), [1, 0]),
                     ((4, 6, 1), [6, 2])]:
        d.check({"x": rng.standard_normal(shape).astype(np.float32), "s": np.array(s, np.int64)})
    d.bad({"x": x, "s": np.array([2, 4], np.int64)}, "Expand")         # B = 3 vs 2


def test_expand_longer_target_over_symbolic_dim():
    rng = np.random.default_rng(2)
    x = rng.standard_normal((3, 2)).astype(np.float32)
    m = make_node_model("Expand", {"x": x, "s": np.array([2, 3, 2], np.int64)}, input_shapes={"x": ["N", 2]})
    d = Dyn(m, np.float32)
    for shape, s in [((3, 2), [2, 3, 2]), ((1, 2), [4, 5, 1]), ((3, 2), [1, 1, 2]), ((0, 2), [2, 1, 2]),
                     ((1, 2), [2, 0, 2])]:
        d.check({"x": rng.standard_normal(shape).astype(np.float32), "s": np.array(s, np.int64)})
    d.bad({"x": x, "s": np.array([2, 3, 3], np.int64)}, "Expand")
    d.bad({"x": x, "s": np.array([2, 4, 2], np.int64)}, "Expand")


# ---- Tile ---------------------------------------------------------------------------------
@pytest.mark.parametrize("opset", [6, 13])
@pytest.mark.parametrize("dtype", [np.float32, np.int32, np.bool_, BF16])
def test_tile(opset, dtype):
    rng = np.random.default_rng(3)
    x = _rand((2, 3), dtype, rng)
    d = Dyn(make_node_model("Tile", {"x": x, "r": np.array([2, 2], np.int64)}, opset=opset), dtype)
    for r in ([1, 1], [2, 3], [0, 4], [3, 1], [1, 0]):
        d.check({"x": x, "r": np.array(r, np.int64)})
    d.bad({"x": x, "r": np.array([-1, 1], np.int64)}, "Tile")
    d.bad({"x": x, "r": np.array([1 << 40, 1], np.int64)}, "Tile")
    d.bad({"x": x, "r": np.array([1 << 20, 1 << 20], np.int64)}, "Tile")


def test_tile_symbolic_input():
    rng = np.random.default_rng(4)
    x = rng.standard_normal((2, 3, 1)).astype(np.float32)
    d = Dyn(make_node_model("Tile", {"x": x, "r": np.array([1, 2, 3], np.int64)},
                            input_shapes={"x": ["N", 3, 1]}), np.float32)
    for n, r in ((2, [1, 2, 3]), (5, [2, 1, 1]), (0, [3, 3, 3]), (1, [1, 1, 7])):
        d.check({"x": rng.standard_normal((n, 3, 1)).astype(np.float32), "r": np.array(r, np.int64)})


# ---- ConstantOfShape ----------------------------------------------------------------------
@pytest.mark.parametrize("opset", [9, 20, 21, 23, 24, 25])
@pytest.mark.parametrize("value", [None, np.array([3.5], np.float32), np.array([7], np.int64),
                                   np.array([True]), np.array([1.5], np.float16), np.array([-2], np.int8)])
def test_constantofshape(opset, value):
    attrs = {} if value is None else {"value": helper.make_tensor("v", NP2ONNX[value.dtype], [1], value.tolist())}
    dtype = np.float32 if value is None else value.dtype
    d = Dyn(make_node_model("ConstantOfShape", {"s": np.array([2, 3], np.int64)}, attrs, opset=opset), dtype)
    for s in ([2, 3], [0, 5], [1, 1], [4, 7]):
        d.check({"s": np.array(s, np.int64)})
    d.bad({"s": np.array([-1, 3], np.int64)}, "ConstantOfShape")
    d.bad({"s": np.array([1 << 30, 1 << 30], np.int64)}, "ConstantOfShape")


def test_constantofshape_ranks():
    for s in ([], [5], [2, 1, 3, 1]):
        d = Dyn(make_node_model("ConstantOfShape", {"s": np.array(s, np.int64)}), np.float32)
        d.check({"s": np.array(s, np.int64)})


# ---- Range --------------------------------------------------------------------------------
RANGE_CASES = [(1, 10, 3), (10, 1, -3), (5, 5, 1), (0, 1, -1), (-7, 8, 2), (3, -7, -2)]
FLOAT_CASES = [(0.1, 1.0, 0.3), (1.0, -2.0, -0.7), (0.0, 1.0, 0.1), (-3.25, 4.0, 0.5), (2.0, 2.0, 1.0),
               (1e-3, 1.0, 1e-2), (0.0, -1.0, 0.5)]


@pytest.mark.parametrize("opset", [11, 27])
@pytest.mark.parametrize("dtype", [np.int16, np.int32, np.int64, np.float32, np.float64])
def test_range(opset, dtype):
    cases = FLOAT_CASES if np.dtype(dtype).kind == "f" else RANGE_CASES
    feeds = lambda c: {k: np.array(v, dtype) for k, v in zip("sld", c)}
    d = Dyn(make_node_model("Range", feeds(cases[0]), opset=opset), dtype)
    for c in cases:
        d.check(feeds(c))
    d.bad(feeds((0, 1, 0)), "Range")
    if np.dtype(dtype).kind == "f":
        for c in ((0, np.inf, 1), (np.nan, 1, 1), (0, 1e30, 1e-30)):
            d.bad(feeds(c), "Range")
    else:
        d.bad(feeds((np.iinfo(dtype).min, np.iinfo(dtype).max, 1)) if dtype == np.int64 else
              feeds((0, 1, 0)), "Range")


@pytest.mark.parametrize("dtype", [np.float16, BF16])
@pytest.mark.parametrize("stash", [1, 11])
def test_range_low_precision(dtype, stash):
    feeds = lambda c: {k: np.array(v, dtype) for k, v in zip("sld", c)}
    d = Dyn(make_node_model("Range", feeds(FLOAT_CASES[0]), {"stash_type": stash}, opset=27), dtype)
    for c in FLOAT_CASES[:4]:
        d.check(feeds(c), rtol=1e-2, atol=1e-2)
    d.bad(feeds((0, 1, 0)), "Range")


def test_range_int64_extremes():
    feeds = lambda c: {k: np.array(v, np.int64) for k, v in zip("sld", c)}
    d = Dyn(make_node_model("Range", feeds((0, 1, 1))), np.int64)
    big = 1 << 62
    for c in ((-big, big, 1 << 60), (big, -big, -(1 << 60)), (np.iinfo(np.int64).max - 5, np.iinfo(np.int64).max, 2)):
        d.check(feeds(c))
    d.bad(feeds((-big, big, 1)), "Range")


def test_range_mixed_constant_inputs():
    nodes = [helper.make_node("Range", ["s", "l", "d"], ["y0"])]
    from util import make_model_from_nodes
    m = make_model_from_nodes(nodes, {"l": np.array(10, np.int64)},
                              {"s": np.array(2, np.int64), "d": np.array(3, np.int64)}, ["y0"])
    d = Dyn(m, np.int64)
    for l in (10, 3, 2, -5, 100):
        d.check({"l": np.array(l, np.int64)})
    m = make_model_from_nodes(nodes, {"s": np.array(0.5, np.float32), "d": np.array(0.25, np.float32)},
                              {"l": np.array(3.0, np.float32)}, ["y0"])
    d = Dyn(m, np.float32)
    for s, dl in ((0.5, 0.25), (3.0, -0.5), (-1.0, 0.3)):
        d.check({"s": np.array(s, np.float32), "d": np.array(dl, np.float32)})


def test_range_static_count_in_input_type():
    """Constant inputs: the count too is computed in the inputs' type (float32 here)."""
    from util import check
    for c in FLOAT_CASES:
        inits = {k: np.array(v, np.float32) for k, v in zip("sld", c)}
        check(make_node_model("Range", {}, initializers=inits), {})


# ---- OneHot -------------------------------------------------------------------------------
@pytest.mark.parametrize("opset", [9, 11])
@pytest.mark.parametrize("ddtype", [np.float32, np.int64, np.int32, np.uint8, np.float16, np.float64])
def test_onehot(opset, ddtype):
    ind = np.array([[1, 5, -2], [0, 3, 9]], np.int64) if opset >= 11 else np.array([[1, 5, 2], [0, 3, 9]], np.int64)
    vals = np.array([2.0, 7.0], np.float32)
    d = Dyn(make_node_model("OneHot", {"i": ind, "d": np.array(4, ddtype), "v": vals}, {"axis": 1},
                            opset=opset), np.float32)
    for dep in (4, 10, 1, 3):
        d.check({"i": ind, "d": np.array(dep, ddtype), "v": vals})
    d.bad({"i": ind, "d": np.array(0, ddtype), "v": vals}, "OneHot")


@pytest.mark.parametrize("axis", [0, 1, 2, -1, -3])
def test_onehot_axes_and_fractional_depth(axis):
    ind = np.array([[1, 5, -2], [0, 3, 9]], np.float32)
    vals = np.array([0, 1], np.int32)
    d = Dyn(make_node_model("OneHot", {"i": ind, "d": np.array(4.0, np.float32), "v": vals},
                            {"axis": axis}, opset=11), np.int32)
    for dep in (4.0, 3.5, 1.0, 11.0, 6.25):
        d.check({"i": ind, "d": np.array(dep, np.float32), "v": vals})
    for dep in (0.5, -3.0, np.nan, np.inf, 1e30):
        d.bad({"i": ind, "d": np.array(dep, np.float32), "v": vals}, "OneHot")


def test_onehot_static_fractional_depth():
    from util import check, make_model_from_nodes
    ind = np.array([[1, 5, -2], [0, 3, 9]], np.int64)
    m = make_model_from_nodes([helper.make_node("OneHot", ["i", "d", "v"], ["y0"])], {"i": ind},
                              {"d": np.array(3.5, np.float32), "v": np.array([2.0, 7.0], np.float32)},
                              ["y0"], opset=11)
    check(m, {"i": ind})


# ---- window functions ---------------------------------------------------------------------
@pytest.mark.parametrize("op", ["HannWindow", "HammingWindow", "BlackmanWindow"])
@pytest.mark.parametrize("periodic", [0, 1])
@pytest.mark.parametrize("sdtype", [np.int32, np.int64])
@pytest.mark.parametrize("out", [1, 11, 7])   # float, double, int64
def test_window(op, periodic, sdtype, out):
    odt = {1: np.float32, 11: np.float64, 7: np.int64}[out]
    d = Dyn(make_node_model(op, {"n": np.array(5, sdtype)}, {"periodic": periodic, "output_datatype": out},
                            opset=17), odt)
    for n in (5, 1, 0, 16, 33, 100):
        if n == 1 and not periodic and out == 7:
            continue   # 0/0: the reference casts NaN to int64 (platform-defined)
        d.check({"n": np.array(n, sdtype)})
    d.bad({"n": np.array(-1, sdtype)}, op)


# ---- MelWeightMatrix ----------------------------------------------------------------------
def _mel_feeds(b, n, idt=np.int32):
    return {"b": np.array(b, idt), "n": np.array(n, idt), "sr": np.array(8192, idt),
            "lo": np.array(0, np.float32), "hi": np.array(4096, np.float32)}


@pytest.mark.parametrize("idt", [np.int32, np.int64])
def test_melweightmatrix(idt):
    d = Dyn(make_node_model("MelWeightMatrix", _mel_feeds(8, 16, idt), opset=17), np.float32)
    for b, n in ((8, 16), (4, 64), (10, 33), (1, 1024)):
        d.check(_mel_feeds(b, n, idt))
    d.bad(_mel_feeds(0, 16, idt), "MelWeightMatrix")
    d.bad(_mel_feeds(8, 0, idt), "MelWeightMatrix")
    d.bad(_mel_feeds(1 << 21, 16, idt), "MelWeightMatrix")


def test_melweightmatrix_one_size_constant():
    from util import make_model_from_nodes
    f = _mel_feeds(8, 16)
    nodes = [helper.make_node("MelWeightMatrix", ["b", "n", "sr", "lo", "hi"], ["y0"])]
    m = make_model_from_nodes(nodes, {k: v for k, v in f.items() if k != "b"}, {"b": f["b"]}, ["y0"])
    d = Dyn(m, np.float32)
    for n in (16, 64, 31):
        d.check({k: v for k, v in _mel_feeds(8, n).items() if k != "b"})


# ---- AffineGrid ---------------------------------------------------------------------------
@pytest.mark.parametrize("nd", [2, 3])
@pytest.mark.parametrize("align", [0, 1])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_affine_grid(nd, align, dtype):
    rng = np.random.default_rng(5)
    th = rng.standard_normal((2, nd, nd + 1)).astype(dtype)
    m = make_node_model("AffineGrid", {"t": th, "s": np.array([2, 3] + [4] * nd, np.int64)},
                        {"align_corners": align}, opset=20, input_shapes={"t": ["N", nd, nd + 1]})
    d = Dyn(m, dtype)
    for sz in ([2, 3] + [4] * nd, [2, 1] + [1] * nd, [3, 1] + list(range(2, 2 + nd)), [1, 5] + [7] * nd):
        th = rng.standard_normal((sz[0], nd, nd + 1)).astype(dtype)
        d.check({"t": th, "s": np.array(sz, np.int64)}, ref_dtype=dtype)   # reference: always float32
    d.bad({"t": th, "s": np.array([th.shape[0] + 1, 1] + [2] * nd, np.int64)}, "AffineGrid")   # N != theta's
    d.bad({"t": th, "s": np.array([th.shape[0], 1] + [-2] * nd, np.int64)}, "AffineGrid")
    d.bad({"t": th, "s": np.array([th.shape[0], 1] + [1 << 20] * nd, np.int64)}, "AffineGrid")


def test_shape_computed_from_inputs_and_from_run_time_counts():
    """A shape computed from a graph input is resolved before the run (dynamic.prelude); one that
    is Shape arithmetic on a count known only while the model runs (NonZero's) stays symbolic."""
    from util import make_model_from_nodes
    nodes = [helper.make_node("Abs", ["s"], ["a"]), helper.make_node("ConstantOfShape", ["a"], ["y0"])]
    m = make_model_from_nodes(nodes, {"s": np.array([2, 3], np.int64)}, {}, ["y0"])
    m.graph.output[0].CopyFrom(helper.make_tensor_value_info("y0", 1, None))
    sess = onnxc.InferenceSession(m.SerializeToString())
    assert sess.run(None, {"s": np.array([-2, 3], np.int64)})[0].shape == (2, 3)
    nodes = [helper.make_node("NonZero", ["b"], ["nz"]), helper.make_node("Shape", ["nz"], ["a"]),
             helper.make_node("ConstantOfShape", ["a"], ["y0"])]
    m = make_model_from_nodes(nodes, {"b": np.array([True, False, True])}, {}, ["y0"])
    m.graph.output[0].CopyFrom(helper.make_tensor_value_info("y0", 1, None))
    sess = onnxc.InferenceSession(m.SerializeToString())   # [1, count]: count known while running
    for b in ([True, False, True], [False] * 3, [True] * 3):
        assert sess.run(None, {"b": np.array(b)})[0].shape == (1, sum(b))
