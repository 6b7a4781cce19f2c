"""BitCast, SwiGLU, TensorScatter against onnx.reference."""
import ml_dtypes
import numpy as np
import pytest

import onnxc
from util import check, make_node_model

rng = np.random.default_rng(0)


def _model(op, inputs, attrs=None, opset=26, **kw):
    m = make_node_model(op, inputs, attrs, opset=opset, **kw)
    m.ir_version = 13 if opset >= 26 else 10
    return m


@pytest.mark.parametrize("src,dst", [
    (np.float32, np.int32), (np.int32, np.float32), (np.float64, np.uint64), (np.int64, np.float64),
    (np.uint16, np.float16), (np.float16, ml_dtypes.bfloat16), (np.int8, np.uint8), (np.bool_, np.uint8),
    (np.uint32, np.int32)])
def test_bitcast(src, dst):
    from util import NP2ONNX
    x = rng.standard_normal((3, 5)).astype(np.float32)
    x[0, :3] = [np.nan, np.inf, -0.0]
    x = np.nan_to_num(x * 1000).astype(np.int64).astype(src) if np.dtype(src).kind in "iub" else x.astype(src)
    check(_model("BitCast", {"x": x}, {"to": NP2ONNX[np.dtype(dst)]}), {"x": x})


def test_bitcast_scalar():
    x = np.array(1.5, np.float32)
    check(_model("BitCast", {"x": x}, {"to": 6}), {"x": x})


def test_bitcast_width_mismatch():
    from onnx import helper
    x = np.zeros((2,), np.float32)
    m = _model("BitCast", {"x": x}, {"to": 11})
    m.graph.output[0].CopyFrom(helper.make_tensor_value_info("y0", 11, [2]))
    with pytest.raises(Exception, match=r"BitCast.*float.*32 bits.*double.*64 bits"):
        onnxc.InferenceSession(m.SerializeToString())


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16])
@pytest.mark.parametrize("alpha", [None, 1.702])
def test_swiglu(dtype, alpha):
    a = rng.standard_normal((3, 4, 8)).astype(dtype)
    b = rng.standard_normal((3, 4, 8)).astype(dtype)
    a[0, 0, :3] = [np.inf, -np.inf, np.nan]
    tol = 2e-3 if dtype == np.float16 else 1e-5
    check(_model("SwiGLU", {"a": a, "b": b}, {} if alpha is None else {"alpha": alpha}, opset=28), {"a": a, "b": b},
          rtol=tol, atol=tol)


def test_swiglu_shape_mismatch():
    from onnx import helper
    a, b = np.zeros((2, 3), np.float32), np.zeros((3,), np.float32)
    m = _model("SwiGLU", {"a": a, "b": b}, opset=28)
    m.graph.output[0].CopyFrom(helper.make_tensor_value_info("y0", 1, [2, 3]))
    with pytest.raises(Exception, match="identical shapes"):
        onnxc.InferenceSession(m.SerializeToString())


@pytest.mark.parametrize("mode", ["linear", "circular"])
@pytest.mark.parametrize("axis", [-2, 1, 2, -1])
@pytest.mark.parametrize("with_indices", [False, True])
def test_tensor_scatter(mode, axis, with_indices):
    shape = [2, 3, 6, 4]
    ax = axis % 4
    up = list(shape)
    up[ax] = 2
    past = rng.standard_normal(shape).astype(np.float32)
    update = rng.standard_normal(up).astype(np.float32)
    feeds = {"past": past, "update": update}
    if with_indices:
        feeds["wi"] = np.array([1, shape[ax] - 1 if mode == "circular" else shape[ax] - 2], np.int64)
    check(_model("TensorScatter", feeds, {"mode": mode, "axis": axis}, opset=24), feeds)


def test_tensor_scatter_int_out_of_range():
    past = np.arange(2 * 5 * 3, dtype=np.int32).reshape(2, 5, 3)
    update = np.ones((2, 2, 3), np.int32)
    wi = np.array([0, 4], np.int64)
    m = _model("TensorScatter", {"past": past, "update": update, "wi": wi}, {"axis": 1}, opset=24)
    check(m, {"past": past, "update": update, "wi": np.array([3, 0], np.int64)})
    from onnx import helper
    m.graph.output[0].CopyFrom(helper.make_tensor_value_info("y0", 6, [2, 5, 3]))
    s = onnxc.InferenceSession(m.SerializeToString())
    with pytest.raises(Exception):
        s.run(None, {"past": past, "update": update, "wi": wi})
