"""ScatterElements, ScatterND (every reduction), old Scatter against onnx.reference; duplicates
applied in order; out-of-range indices fail the run."""
import ml_dtypes
import numpy as np
import pytest
from onnx import TensorProto, helper

import onnxc
from test_ops_gather import check, data, op_model, rng

REDUCTIONS = ["none", "add", "mul", "max", "min"]


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("axis", [0, 1, 2])
def test_scatter_elements(reduction, axis):
    x = data((3, 4, 5))
    shape = list(x.shape)
    shape[axis] = 3
    d = x.shape[axis]
    i = rng.integers(-d, d, shape).astype(np.int64)     # duplicates included
    u = data(shape)
    check(op_model("ScatterElements", {"x": x, "i": i, "u": u}, attrs={"axis": axis, "reduction": reduction}),
          {"x": x, "i": i, "u": u})


@pytest.mark.parametrize("dtype", [np.float16, ml_dtypes.bfloat16, np.int32, np.uint8, np.bool_, np.float64])
@pytest.mark.parametrize("reduction", ["none", "add", "max"])
def test_scatter_elements_dtypes(dtype, reduction):
    x = data((4, 3), dtype)
    i = rng.integers(-4, 4, (2, 3)).astype(np.int32)
    u = data((2, 3), dtype)
    check(op_model("ScatterElements", {"x": x, "i": i, "u": u}, attrs={"reduction": reduction}),
          {"x": x, "i": i, "u": u}, rtol=1e-2, atol=1e-2)


def test_scatter_elements_nan_max():
    x = np.array([[1.0, np.nan, 3.0]], np.float32)
    i = np.array([[0, 1, 2]], np.int64)
    u = np.array([[np.nan, 5.0, 2.0]], np.float32)
    check(op_model("ScatterElements", {"x": x, "i": i, "u": u}, attrs={"axis": 1, "reduction": "max"}),
          {"x": x, "i": i, "u": u})


@pytest.mark.parametrize("opset", [11, 13, 16])
def test_scatter_elements_opsets(opset):
    x, i, u = data((3, 3)), np.array([[1, -1]], np.int64), data((1, 2))
    attrs = {"axis": 1, **({"reduction": "add"} if opset >= 16 else {})}
    check(op_model("ScatterElements", {"x": x, "i": i, "u": u}, attrs=attrs, opset=opset), {"x": x, "i": i, "u": u})


def test_scatter_old_matches_scatter_elements():
    x, i, u = data((3, 4)), np.array([[1, 0, 2], [0, 2, 1]], np.int64), data((2, 3))
    m = op_model("Scatter", {"x": x, "i": i, "u": u}, attrs={"axis": 0}, opset=10)
    m.graph.output[0].CopyFrom(helper.make_tensor_value_info("y0", TensorProto.FLOAT, (3, 4)))
    got = onnxc.InferenceSession(m.SerializeToString()).run(None, {"x": x, "i": i, "u": u})[0]
    want = x.copy()
    for r in range(2):
        for c in range(3):
            want[i[r, c], c] = u[r, c]
    np.testing.assert_array_equal(got, want)


def test_scatter_elements_symbolic():
    x, i, u = data((2, 6)), rng.integers(-6, 6, (2, 3)).astype(np.int64), data((2, 3))
    m = op_model("ScatterElements", {"x": x, "i": i, "u": u}, attrs={"axis": 1, "reduction": "add"},
                 shapes={"x": ["N", 6], "i": ["N", 3], "u": ["N", 3]})
    x2, i2, u2 = data((5, 6)), rng.integers(-6, 6, (5, 3)).astype(np.int64), data((5, 3))
    check(m, {"x": x, "i": i, "u": u}, symbolic=True, more=[{"x": x2, "i": i2, "u": u2}])


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("ishape", [(3, 1), (2, 2), (2, 3), (2, 2, 2)])
def test_scatter_nd(reduction, ishape):
    x = data((4, 3, 5))
    k = ishape[-1]
    i = np.stack([rng.integers(-x.shape[t], x.shape[t], ishape[:-1]) for t in range(k)], -1).astype(np.int64)
    u = data(ishape[:-1] + x.shape[k:])
    check(op_model("ScatterND", {"x": x, "i": i, "u": u}, attrs={"reduction": reduction}), {"x": x, "i": i, "u": u})


@pytest.mark.parametrize("dtype", [np.float16, np.int64, np.bool_])
def test_scatter_nd_dtypes(dtype):
    x, i, u = data((4, 3), dtype), np.array([[1], [3]], np.int64), data((2, 3), dtype)
    check(op_model("ScatterND", {"x": x, "i": i, "u": u}, opset=13), {"x": x, "i": i, "u": u})


@pytest.mark.parametrize("op,attrs,i", [("ScatterElements", {"axis": 1}, np.array([[0, 3]], np.int64)),
                                        ("ScatterElements", {"axis": 1}, np.array([[0, -4]], np.int64)),
                                        ("ScatterND", {}, np.array([[0, 3]], np.int64)),
                                        ("ScatterND", {}, np.array([[-3, 0]], np.int64))])
def test_scatter_out_of_range_fails(op, attrs, i):
    x = data((2, 3))
    u = data((1, 2)) if op == "ScatterElements" else data((1,))
    m = op_model(op, {"x": x, "i": i, "u": u}, attrs=attrs)
    m.graph.output[0].CopyFrom(helper.make_tensor_value_info("y0", TensorProto.FLOAT, (2, 3)))
    with pytest.raises(onnxc.InvalidArgument):
        onnxc.InferenceSession(m.SerializeToString()).run(None, {"x": x, "i": i, "u": u})


def test_scatter_unknown_reduction_rejected():
    x, i, u = data((2, 3)), np.array([[0]], np.int64), data((1, 1))
    m = op_model("ScatterElements", {"x": x, "i": i, "u": u}, attrs={"reduction": "avg"})
    m.graph.output[0].CopyFrom(helper.make_tensor_value_info("y0", TensorProto.FLOAT, (2, 3)))
    with pytest.raises(Exception, match="reduction"):
        onnxc.InferenceSession(m.SerializeToString())
