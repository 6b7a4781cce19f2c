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
