"""Quantization ops vs onnx.reference on random inputs: QuantizeLinear / DequantizeLinear
(per-tensor, per-axis, blocked, int/float8/float4 types), DynamicQuantizeLinear, MatMulInteger,
QLinearMatMul, ConvInteger, QLinearConv."""
import warnings

import ml_dtypes
import numpy as np
import onnx
import pytest
from onnx import helper, numpy_helper
from onnx.reference import ReferenceEvaluator

import onnxc

rng = np.random.default_rng(7)
T = onnx.TensorProto


def _model(op, feeds, inits, attrs=None, opset=21, n_out=1, order=None):
    names = order or list(feeds) + list(inits)
    node = helper.make_node(op, names, [f"y{i}" for i in range(n_out)], **(attrs or {}))
    ins = [helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(a.dtype), a.shape)
           for n, a in feeds.items()]
    g = helper.make_graph([node], "g", ins, [onnx.ValueInfoProto(name=f"y{i}") for i in range(n_out)],
                          [numpy_helper.from_array(a, n) for n, a in inits.items()])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)], ir_version=10)


def check(op, feeds, inits, attrs=None, opset=21, n_out=1, order=None):
    m = _model(op, feeds, inits, attrs, opset, n_out, order)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ref = ReferenceEvaluator(m).run(None, feeds)
    for vi, r in zip(m.graph.output, ref):
        vi.CopyFrom(helper.make_tensor_value_info(vi.name, helper.np_dtype_to_tensor_dtype(r.dtype), r.shape))
    got = onnxc.InferenceSession(m.SerializeToString()).run(None, feeds)
    for r, g in zip(ref, got):
        assert g.dtype == r.dtype and g.shape == r.shape
        np.testing.assert_array_equal(g.astype(np.float32), r.astype(np.float32))


def xs(shape, scale=20.0):
    x = (rng.standard_normal(shape) * scale).astype(np.float32)
    x.flat[:4] = [0.5, 1.5, -2.5, 1e9]     # ties to even, far out of range
    return x


@pytest.mark.parametrize("zdt", [np.uint8, np.int8, np.uint16, np.int16, ml_dtypes.int4, ml_dtypes.uint4,
                                 ml_dtypes.int2, ml_dtypes.uint2])
def test_quantize_int_per_axis(zdt):
    x = xs((2, 3, 5))
    check("QuantizeLinear", {"x": x}, {"s": np.array([0.5, 2.0, 7.0], np.float32),
                                       "z": np.array([1, 0, 1]).astype(zdt)})


@pytest.mark.parametrize("name", ["float8_e4m3fn", "float8_e4m3fnuz", "float8_e5m2", "float8_e5m2fnuz",
                                  "float4_e2m1fn"])
@pytest.mark.parametrize("sat", [0, 1])
def test_quantize_float8_per_tensor(name, sat):
    dt = getattr(ml_dtypes, name)
    x = xs((4, 6), 300.0)
    check("QuantizeLinear", {"x": x}, {"s": np.array(0.75, np.float32), "z": np.zeros((), dt)},
          {"saturate": sat} if "float8" in name else None)


def test_quantize_blocked_float16_axis0():
    x = xs((7, 4))
    x.flat[3] = 100.0      # float16 inf -> int32 differs between numpy's cast paths
    x = x.astype(np.float16)
    s = (rng.random((3, 4)) + 0.1).astype(np.float16)
    z = rng.integers(-3, 3, (3, 4)).astype(np.int8)
    check("QuantizeLinear", {"x": x}, {"s": s, "z": z}, {"axis": 0, "block_size": 3})


def test_quantize_output_dtype_no_zero_point():
    check("QuantizeLinear", {"x": xs((3, 4))}, {"s": np.array(0.3, np.float32)},
          {"output_dtype": T.INT4})


@pytest.mark.parametrize("xdt", [np.uint8, np.int8, np.int32, ml_dtypes.int4, ml_dtypes.uint2,
                                 ml_dtypes.float8_e4m3fn, ml_dtypes.float4_e2m1fn])
def test_dequantize_per_axis(xdt):
    x = rng.integers(-100, 100, (2, 3, 4)).astype(np.float32).astype(xdt)
    inits = {"s": np.array([0.5, 2.0, 0.1], np.float32)}
    if np.dtype(xdt).kind in "iu" or xdt in (ml_dtypes.int4, ml_dtypes.uint2):
        inits["z"] = np.array([1, 0, 1]).astype(xdt)
    check("DequantizeLinear", {"x": x}, inits)


def test_dequantize_blocked_float16_out():
    x = rng.integers(-8, 8, (2, 8)).astype(ml_dtypes.int4)
    s = (rng.random((2, 3)) + 0.1).astype(np.float32)
    check("DequantizeLinear", {"x": x}, {"s": s}, {"axis": 1, "block_size": 3, "output_dtype": T.FLOAT16},
          opset=23)


@pytest.mark.parametrize("shift", [0.0, 5.0, -5.0])
def test_dynamic_quantize(shift):
    check("DynamicQuantizeLinear", {"x": xs((3, 7), 3.0) * 0 + (rng.standard_normal((3, 7)) + shift)
                                    .astype(np.float32)}, {}, n_out=3)


@pytest.mark.parametrize("dt", [np.uint8, np.int8])
def test_matmul_integer_batched(dt):
    a = rng.integers(0, 100, (2, 1, 3, 5)).astype(dt)
    b = rng.integers(0, 100, (4, 5, 6)).astype(dt)
    check("MatMulInteger", {"a": a, "b": b}, {"za": np.array(1, dt), "zb": np.array(7, dt)})
    # per-column zero points (onnx.reference cannot broadcast per-row ones)
    check("MatMulInteger", {"a": a[0, 0], "b": b[0]}, {"za": np.array(4, dt),
                                                       "zb": np.arange(6).astype(dt)})


@pytest.mark.parametrize("sdt", [np.float32, np.float16])
def test_qlinear_matmul_per_column(sdt):
    a = rng.integers(0, 255, (3, 5)).astype(np.uint8)
    b = rng.integers(0, 255, (2, 5, 4)).astype(np.uint8)
    check("QLinearMatMul", {"a": a, "b": b},
          {"sa": np.array(0.02, sdt), "za": np.array(100, np.uint8), "sb": np.array([0.01, 0.02, 0.03, 0.04], sdt),
           "zb": np.array([1, 2, 3, 4], np.uint8), "sy": np.array(0.5, sdt), "zy": np.array(128, np.uint8)},
          order=["a", "sa", "za", "b", "sb", "zb", "sy", "zy"])


def test_conv_integer_group_strided():
    x = rng.integers(0, 255, (2, 4, 7, 6)).astype(np.uint8)
    w = rng.integers(0, 255, (6, 2, 3, 2)).astype(np.uint8)
    check("ConvInteger", {"x": x, "w": w}, {"zx": np.array(3, np.uint8), "zw": np.array([1, 2, 3, 4, 5, 6], np.uint8)},
          {"group": 2, "strides": [2, 1], "pads": [1, 0, 1, 1], "dilations": [1, 2]})


def test_qlinear_conv_bias_per_channel():
    x = rng.integers(-128, 127, (1, 3, 5, 5)).astype(np.int8)
    w = rng.integers(-128, 127, (4, 3, 3, 3)).astype(np.int8)
    check("QLinearConv", {"x": x, "w": w},
          {"sx": np.array(0.05, np.float32), "zx": np.array(1, np.int8), "sw": np.array([0.01, 0.02, 0.005, 0.1], np.float32),
           "zw": np.zeros(4, np.int8), "sy": np.array(0.7, np.float32), "zy": np.array(-3, np.int8),
           "B": rng.integers(-500, 500, 4).astype(np.int32)},
          {"pads": [1, 1, 1, 1]}, order=["x", "sx", "zx", "w", "sw", "zw", "sy", "zy", "B"])
