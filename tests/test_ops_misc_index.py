"""Trilu, OneHot, CumSum, ArgMax/ArgMin, TopK, Compress, ReverseSequence, Shape, Size,
ConstantOfShape, Range, EyeLike against onnx.reference."""
import ml_dtypes
import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

import onnxc
from test_ops_gather import check, data, op_model, rng

I64 = np.int64


# ---- Trilu ----------------------------------------------------------------------------------
@pytest.mark.parametrize("upper", [0, 1])
@pytest.mark.parametrize("k", [None, 0, 2, -1, -10, 10])
@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.int64, np.bool_])
def test_trilu(upper, k, dtype):
    x = data((2, 4, 5), dtype)
    feeds = {"x": x} if k is None else {"x": x, "k": np.array(k, I64)}
    check(op_model("Trilu", feeds, attrs={"upper": upper}, opset=14), feeds)


def test_trilu_symbolic():
    x = data((2, 3, 3))
    m = op_model("Trilu", {"x": x}, shapes={"x": ["B", "R", "C"]}, opset=14)
    check(m, {"x": x}, symbolic=True, more=[{"x": data((1, 5, 2))}])


# ---- OneHot ---------------------------------------------------------------------------------
@pytest.mark.parametrize("axis", [-1, 0, 1, -2])
@pytest.mark.parametrize("itype", [np.int64, np.int32, np.float32])
def test_onehot(axis, itype):
    i = np.array([[0, -1, 7, 3], [2, -5, 1, -4]]).astype(itype)
    check(op_model("OneHot", {"i": i}, {"d": np.array(5, I64), "v": np.array([-1.5, 3], np.float32)},
                   attrs={"axis": axis}, opset=11), {"i": i})


def test_onehot_runtime_values_int_output():
    i, v = np.array([1, 0, 2], I64), np.array([0, 9], np.int32)
    check(op_model("OneHot", {"i": i, "v": v}, {"d": np.array(3.0, np.float32)}, order=["i", "d", "v"]),
          {"i": i, "v": v})


# ---- CumSum ---------------------------------------------------------------------------------
@pytest.mark.parametrize("exclusive", [0, 1])
@pytest.mark.parametrize("reverse", [0, 1])
@pytest.mark.parametrize("axis", [0, 1, -1])
def test_cumsum(exclusive, reverse, axis):
    x = data((3, 4, 5))
    check(op_model("CumSum", {"x": x}, {"a": np.array(axis, np.int32)}, attrs={"exclusive": exclusive,
                                                                              "reverse": reverse}), {"x": x})


@pytest.mark.parametrize("dtype", [np.float64, np.int32, np.int64, np.uint32, np.uint64])
def test_cumsum_dtypes(dtype):
    x = data((4, 6), dtype)
    check(op_model("CumSum", {"x": x}, {"a": np.array(1, I64)}), {"x": x})


def test_cumsum_runtime_axis():
    x = data((3, 4))
    m = op_model("CumSum", {"x": x, "a": np.array(0, I64)}, attrs={"reverse": 1})
    check(m, {"x": x, "a": np.array(0, I64)}, more=[{"x": x, "a": np.array(-1, I64)}])


# ---- ArgMax / ArgMin ------------------------------------------------------------------------
@pytest.mark.parametrize("op", ["ArgMax", "ArgMin"])
@pytest.mark.parametrize("axis,keepdims", [(0, 1), (1, 0), (-1, 1), (2, 0)])
@pytest.mark.parametrize("last", [0, 1])
@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.int32, np.uint8])
def test_argminmax(op, axis, keepdims, last, dtype):
    x = rng.integers(0, 4, (3, 4, 5)).astype(dtype)   # many ties
    if np.dtype(dtype).kind == "f":
        x.reshape(-1)[[3, 17, 18, 40]] = np.nan
    check(op_model(op, {"x": x}, attrs={"axis": axis, "keepdims": keepdims, "select_last_index": last}, opset=13),
          {"x": x})


def test_argmax_symbolic():
    x = data((2, 5))
    m = op_model("ArgMax", {"x": x}, attrs={"axis": 1}, shapes={"x": ["N", 5]}, opset=13)
    check(m, {"x": x}, symbolic=True, more=[{"x": data((7, 5))}])


# ---- TopK -----------------------------------------------------------------------------------
@pytest.mark.parametrize("largest", [0, 1])
@pytest.mark.parametrize("k", [0, 1, 3, 6])
@pytest.mark.parametrize("axis", [0, 1, -1])
def test_topk(largest, k, axis):
    x = rng.integers(0, 5, (6, 6, 7)).astype(np.float32)  # ties resolve to the lower index
    x.reshape(-1)[[5, 50, 51]] = np.nan
    check(op_model("TopK", {"x": x}, {"k": np.array([k], I64)}, attrs={"axis": axis, "largest": largest},
                   n_out=2, opset=11), {"x": x})


@pytest.mark.parametrize("dtype", [np.float64, np.int32, np.int64, np.uint8])
def test_topk_dtypes(dtype):
    x = rng.integers(0, 50, (4, 40)).astype(dtype)
    check(op_model("TopK", {"x": x}, {"k": np.array([13], I64)}, n_out=2), {"x": x})


def test_topk_opset1_and_symbolic():
    x = data((3, 8))
    check(op_model("TopK", {"x": x}, attrs={"k": 3}, n_out=2, opset=1), {"x": x})
    m = op_model("TopK", {"x": x}, {"k": np.array([2], I64)}, n_out=2, shapes={"x": ["N", 8]})
    check(m, {"x": x}, symbolic=True, more=[{"x": data((5, 8))}])


def test_topk_k_too_large_rejected():
    x = data((3, 4))
    m = op_model("TopK", {"x": x}, {"k": np.array([5], I64)}, n_out=2)
    for vi in m.graph.output:
        vi.CopyFrom(helper.make_tensor_value_info(vi.name, TensorProto.FLOAT, [None, None]))
    with pytest.raises(onnxc.InvalidGraph, match="K=5"):
        onnxc.InferenceSession(m.SerializeToString())


# ---- Compress / ReverseSequence -------------------------------------------------------------
@pytest.mark.parametrize("axis", [None, 0, 1, -1])
def test_compress(axis):
    x = data((3, 4), np.float16)
    cond = np.array([1, 0, 1], bool) if axis in (None, 0) else np.array([0, 1, 1], bool)
    attrs = {} if axis is None else {"axis": axis}
    check(op_model("Compress", {"x": x}, {"c": cond}, attrs=attrs), {"x": x})


def test_compress_nothing_selected():
    x = data((3, 4))
    check(op_model("Compress", {"x": x}, {"c": np.zeros(2, bool)}, attrs={"axis": 1}), {"x": x})


@pytest.mark.parametrize("time_axis,batch_axis", [(0, 1), (1, 0)])
@pytest.mark.parametrize("dtype", [np.float32, ml_dtypes.bfloat16, np.int8])
def test_reverse_sequence(time_axis, batch_axis, dtype):
    x = data((4, 5, 3) if time_axis == 0 else (5, 4, 3), dtype)
    lens = np.array([1, 4, 0, 2, 3], I64)
    feeds = {"x": x, "l": lens}
    check(op_model("ReverseSequence", feeds, attrs={"time_axis": time_axis, "batch_axis": batch_axis}), feeds)


def test_reverse_sequence_lengths_clamp():
    x = data((3, 2))
    feeds = {"x": x, "l": np.array([3, 3], I64)}
    check(op_model("ReverseSequence", feeds, attrs={"time_axis": 0, "batch_axis": 1}), feeds)


# ---- Shape / Size / ConstantOfShape / Range / EyeLike ---------------------------------------
@pytest.mark.parametrize("start,end", [(None, None), (1, None), (-1, None), (0, -1), (2, 1), (-10, 10)])
def test_shape(start, end):
    x = data((2, 3, 4))
    attrs = {k: v for k, v in (("start", start), ("end", end)) if v is not None}
    check(op_model("Shape", {"x": x}, attrs=attrs, opset=15), {"x": x})


def test_shape_size_symbolic():
    x = data((2, 3, 4))
    for op in ("Shape", "Size"):
        m = op_model(op, {"x": x}, shapes={"x": ["N", 3, "W"]})
        check(m, {"x": x}, symbolic=True, more=[{"x": data((5, 3, 1))}, {"x": data((0, 3, 7))}])


@pytest.mark.parametrize("value", [None, np.array([7], np.int32), np.array([-2.5], np.float64),
                                   np.array([True]), np.array([1.5], np.float16)])
def test_constant_of_shape(value):
    attrs = {} if value is None else {"value": numpy_helper.from_array(value)}
    check(op_model("ConstantOfShape", {}, {"s": np.array([2, 3, 0][:2], I64)}, attrs=attrs), {})


@pytest.mark.parametrize("dtype,vals", [(np.float32, (1.5, 7.3, 0.7)), (np.int32, (10, -3, -4)),
                                        (np.float64, (0, 1, 0.1)), (np.int64, (5, 5, 1)), (np.int16, (0, 9, 4))])
def test_range(dtype, vals):
    inits = {n: np.array(v, dtype) for n, v in zip("abc", vals)}
    check(op_model("Range", {}, inits), {})


@pytest.mark.parametrize("k", [0, 2, -1, 7])
@pytest.mark.parametrize("dtype", [None, TensorProto.INT32, TensorProto.BOOL])
def test_eyelike(k, dtype):
    x = data((3, 5))
    attrs = {"k": k, **({"dtype": dtype} if dtype is not None else {})}
    check(op_model("EyeLike", {"x": x}, attrs=attrs), {"x": x})
