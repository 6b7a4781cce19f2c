"""Softmax and LogSoftmax: every opset, NaN/inf rows, strided axes, symbolic batch."""

import numpy as np
import onnx
import pytest
from onnx import helper
from onnx.reference import ReferenceEvaluator

import onnxc
from util import NP2ONNX, assert_close, make_node_model, typed_outputs, poisoned

rng = np.random.default_rng(3)


def check(model, feeds, rtol=2e-6, atol=1e-6):
    with np.errstate(all="ignore"):
        ref = ReferenceEvaluator(model).run(None, feeds)
    typed_outputs(model, ref)
    sess = onnxc.InferenceSession(model.SerializeToString())
    with poisoned():
        got = sess.run(None, feeds)
    assert_close(ref, got, rtol, atol)
    return got


def run_model(model, feeds, out_dtype=np.float32, rank=None):
    vi = model.graph.output[0]
    r = rank if rank is not None else feeds[next(iter(feeds))].ndim
    vi.CopyFrom(helper.make_tensor_value_info(vi.name, NP2ONNX[np.dtype(out_dtype)], [None] * r))
    sess = onnxc.InferenceSession(model.SerializeToString())
    with poisoned():
        return sess, sess.run(None, feeds)[0]


def special(shape, dtype=np.float32, scale=3.0):
    x = (rng.standard_normal(shape) * scale).astype(dtype)
    return x


def softmax_np(x, axis, log=False):
    with np.errstate(all="ignore"):
        m = x.max(axis=axis, keepdims=True)
        e = np.exp(x - m)
        s = e.sum(axis=axis, keepdims=True)
        return (x - m) - np.log(s) if log else e / s


OPS = ["Softmax", "LogSoftmax"]


@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("opset", [13, 21])
@pytest.mark.parametrize("axis", [0, 1, 2, -1, -2, None])
def test_per_axis(op, opset, axis):
    x = special((3, 70, 5)) if axis in (1, -2) else special((3, 4, 5))
    check(make_node_model(op, {"x": x}, {} if axis is None else {"axis": axis}, opset=opset), {"x": x})


@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("opset", [1, 11])
@pytest.mark.parametrize("shape,axis", [((4, 6), 1), ((4, 6), None), ((2, 3, 5), 2), ((2, 3, 5), -1),
                                        ((7,), 0)])
def test_coerce_2d_matching_reference(op, opset, shape, axis):
    """Cases where onnx.reference's per-axis rule agrees with the coerce-to-2-D rule."""
    x = special(shape)
    check(make_node_model(op, {"x": x}, {} if axis is None else {"axis": axis}, opset=opset), {"x": x})


@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("opset", [1, 11])
@pytest.mark.parametrize("axis", [None, 0, 2, -2])
def test_coerce_2d_semantics(op, opset, axis):
    """Before opset 13 the input is flattened to (prod(shape[:axis]), prod(shape[axis:]))."""
    if opset < 11 and axis is not None and axis < 0:
        pytest.skip("negative axis from opset 11")
    x = special((2, 3, 4, 5))
    a = 1 if axis is None else axis % 4
    _, got = run_model(make_node_model(op, {"x": x}, {} if axis is None else {"axis": axis}, opset=opset),
                       {"x": x})
    rows = int(np.prod(x.shape[:a]))
    want = softmax_np(x.reshape(rows, -1), 1, op == "LogSoftmax").reshape(x.shape)
    np.testing.assert_allclose(got, want, rtol=2e-6, atol=1e-6)


@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("axis", [-1, 1])
def test_nan_inf_rows(op, axis):
    x = special((6, 5))
    x[0, 2] = np.nan           # NaN row -> all NaN
    x[1, 0] = np.inf           # +inf -> all NaN (inf - inf)
    x[2, :] = -np.inf          # all -inf -> NaN
    x[3, 1] = -np.inf          # one -inf -> 0 / -inf there
    x[4, :] = 1e30             # huge but finite
    x[5, 3] = np.inf
    x[5, 1] = -np.inf
    if axis == 1:
        x = np.ascontiguousarray(x.T.reshape(1, 5, 6))
    check(make_node_model(op, {"x": x}, {"axis": axis}), {"x": x})


@pytest.mark.parametrize("op", OPS)
def test_double_and_large_rows(op):
    x = special((3, 5000), np.float64, 10)
    check(make_node_model(op, {"x": x}), {"x": x}, rtol=1e-12, atol=1e-14)
    x = special((64, 1000))
    check(make_node_model(op, {"x": x}), {"x": x}, rtol=1e-5, atol=1e-6)


def test_wide_strided_axis_more_than_64_lanes():
    x = special((2, 9, 150))
    for op in OPS:
        check(make_node_model(op, {"x": x}, {"axis": 1}), {"x": x})


def test_log_softmax_is_stable():
    x = np.array([[0.0, -200.0, 200.0]], np.float32)
    _, got = run_model(make_node_model("LogSoftmax", {"x": x}), {"x": x})
    np.testing.assert_allclose(got, [[-200.0, -400.0, 0.0]], rtol=1e-6)


@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("opset,axis", [(13, -1), (13, 1), (11, 1)])
def test_symbolic_batch(op, opset, axis):
    x = special((2, 3, 8))
    m = make_node_model(op, {"x": x}, {"axis": axis}, opset=opset, input_shapes={"x": ["N", 3, 8]})
    sess, _ = run_model(m, {"x": x})
    for n in (1, 4, 9):
        x = special((n, 3, 8))
        with poisoned():
            got = sess.run(None, {"x": x})[0]
        if opset < 13:
            want = softmax_np(x.reshape(n, -1), 1, op == "LogSoftmax").reshape(x.shape)
        else:
            want = softmax_np(x, axis, op == "LogSoftmax")
        np.testing.assert_allclose(got, want, rtol=2e-6, atol=1e-6)


def test_in_place_after_another_op():
    x = special((4, 10))
    nodes = [helper.make_node("Mul", ["x", "x"], ["a"]), helper.make_node("Softmax", ["a"], ["b"]),
             helper.make_node("LogSoftmax", ["b"], ["y0"], axis=0)]
    from util import make_model_from_nodes
    check(make_model_from_nodes(nodes, {"x": x}, {}, ["y0"]), {"x": x})


def test_errors():
    x = rng.integers(0, 5, (2, 3)).astype(np.int32)
    m = make_node_model("Softmax", {"x": x})
    m.graph.output[0].CopyFrom(helper.make_tensor_value_info("y0", onnx.TensorProto.INT32, [2, 3]))
    with pytest.raises(onnxc.NotImplemented, match=r"node 0 \(Softmax.*int32"):
        onnxc.InferenceSession(m.SerializeToString())
    x = special((2, 3))
    m = make_node_model("Softmax", {"x": x}, {"axis": 2})
    m.graph.output[0].CopyFrom(helper.make_tensor_value_info("y0", onnx.TensorProto.FLOAT, [2, 3]))
    with pytest.raises(onnxc.InvalidGraph, match="axis=2 is out of range"):
        onnxc.InferenceSession(m.SerializeToString())


@pytest.mark.parametrize("op", ["Softmax", "LogSoftmax"])
@pytest.mark.parametrize("axis,shape", [(-1, (3, 37)), (1, (2, 5, 70)), (0, (4, 3))])
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_low_precision(op, axis, shape, dtype):
    """float16/bfloat16 against onnx.reference; NaN rows stay NaN."""
    import ml_dtypes
    from onnx.reference import ReferenceEvaluator
    dt = np.float16 if dtype == "float16" else ml_dtypes.bfloat16
    x = (np.random.default_rng(5).standard_normal(shape) * 3).astype(dt)
    x.flat[0] = np.nan
    m = make_node_model(op, {"x": x}, {"axis": axis}, opset=13)
    ref = ReferenceEvaluator(m).run(None, {"x": x})
    typed_outputs(m, ref)
    with poisoned():
        got = onnxc.InferenceSession(m.SerializeToString()).run(None, {"x": x})[0]
    r, g = ref[0].astype(np.float32), got.astype(np.float32)
    assert got.dtype == ref[0].dtype
    np.testing.assert_array_equal(np.isnan(g), np.isnan(r))
    np.testing.assert_allclose(g, r, rtol=2e-2, atol=2e-2 if op == "Softmax" else 8e-2)


# float16/bfloat16 Softmax: the function body in the element type (x - max, Exp, ReduceSum, Div, each
# rounded once to it), the sum accumulated exactly and rounded once


def _lowp(dtype):
    import ml_dtypes
    return np.float16 if dtype == "float16" else ml_dtypes.bfloat16


def _round(d, dt):
    """float64 -> dt, rounded once (numpy's float64 -> float16 is direct; for bfloat16 go through
    float32 rounded to odd, which makes the second rounding exact-equivalent)."""
    d = np.asarray(d, np.float64)
    if dt == np.float16:
        return d.astype(np.float16)
    with np.errstate(all="ignore"):
        f = d.astype(np.float32)
        bits = f.view(np.uint32).copy()
        inexact = (f.astype(np.float64) != d) & np.isfinite(d)
        bits[inexact & (np.abs(f.astype(np.float64)) > np.abs(d))] -= 1   # truncate toward zero
        bits[inexact] |= 1
    return bits.view(np.float32).astype(dt)


def softmax_body(x, axis):
    """Softmax's function body evaluated in x's type, each intermediate rounded once."""
    dt = x.dtype.type
    with np.errstate(all="ignore"):
        x64 = x.astype(np.float64)
        t = _round(x64 - x64.max(axis=axis, keepdims=True), dt).astype(np.float64)
        e = _round(np.exp(t), dt).astype(np.float64)
        s = _round(e.sum(axis=axis, keepdims=True), dt).astype(np.float64)
        return _round(e / s, dt)


def run_lowp(x, attrs, opset=13, input_shapes=None):
    m = make_node_model("Softmax", {"x": x}, attrs, opset=opset, input_shapes=input_shapes)
    vi = m.graph.output[0]
    vi.CopyFrom(helper.make_tensor_value_info(vi.name, NP2ONNX[x.dtype], [None] * x.ndim))
    sess = onnxc.InferenceSession(m.SerializeToString())
    with poisoned():
        return m, sess, sess.run(None, {"x": x})[0]


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("shape,axis", [((5, 37), -1), ((3, 4, 6), 1), ((2, 70, 3), 1), ((4, 3), 0),
                                        ((2, 3, 1000), 2)])
def test_low_precision_softmax_is_its_function_body(dtype, shape, axis):
    x = (np.random.default_rng(7).standard_normal(shape) * 4).astype(_lowp(dtype))
    _, _, got = run_lowp(x, {"axis": axis})
    assert got.dtype == x.dtype
    np.testing.assert_array_equal(got.view(np.uint16), softmax_body(x, axis).view(np.uint16))


@pytest.mark.parametrize("opset", [1, 11, 13])
@pytest.mark.parametrize("shape", [(6, 37), (2, 3, 300), (64, 6)])
def test_float16_softmax_bit_exact_to_reference(opset, shape):
    """Along a contiguous row numpy sums float16 in float and rounds once: onnx.reference's
    float16 Softmax (and the Attention reference's) is then reproduced bit for bit."""
    x = (np.random.default_rng(opset).standard_normal(shape) * 3).astype(np.float16)
    m, _, got = run_lowp(x, {"axis": len(shape) - 1}, opset)
    ref = ReferenceEvaluator(m).run(None, {"x": x})[0]
    np.testing.assert_array_equal(got.view(np.uint16), ref.astype(np.float16).view(np.uint16))


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_low_precision_softmax_every_exp_argument(dtype):
    """Rows [0, t] for every finite t <= 0 of the type that Exp does not round to 0 (and a few
    it does): Exp correctly rounded, then sum and division rounded once each."""
    dt = _lowp(dtype)
    bits = np.arange(0x8000, 0x10000, dtype=np.uint32).astype(np.uint16)
    t = bits.view(dt)
    t = t[np.isfinite(t.astype(np.float32)) & (t.astype(np.float32) > (-20 if dtype == "float16" else -100))]
    x = np.stack([np.zeros_like(t), t], axis=1)
    _, _, got = run_lowp(x, {"axis": 1})
    np.testing.assert_array_equal(got.view(np.uint16), softmax_body(x, 1).view(np.uint16))


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("axis", [-1, 0])
def test_low_precision_softmax_nan_inf_rows(dtype, axis):
    x = (np.random.default_rng(2).standard_normal((6, 5)) * 3).astype(np.float32)
    x[0, 2] = np.nan           # NaN row -> all NaN
    x[1, 0] = np.inf           # +inf -> all NaN (inf - inf)
    x[2, :] = -np.inf          # all -inf -> NaN
    x[3, 1] = -np.inf          # one -inf -> 0 there
    x[4, :] = 60000.0          # huge but finite
    x[5, 3], x[5, 1] = np.inf, -np.inf
    x = x.astype(_lowp(dtype))
    if axis == 0:
        x = np.ascontiguousarray(x.T)
    m, _, got = run_lowp(x, {"axis": axis})
    want = softmax_body(x, axis)
    np.testing.assert_array_equal(got.view(np.uint16), want.view(np.uint16))
    with np.errstate(all="ignore"):
        ref = ReferenceEvaluator(m).run(None, {"x": x})[0].astype(np.float32)
    np.testing.assert_array_equal(np.isnan(got.astype(np.float32)), np.isnan(ref))


def test_low_precision_softmax_symbolic_batch():
    x = (rng.standard_normal((2, 3, 8)) * 3).astype(np.float16)
    _, sess, _ = run_lowp(x, {"axis": 1}, input_shapes={"x": ["N", 3, 8]})
    for n in (1, 5):
        x = (rng.standard_normal((n, 3, 8)) * 3).astype(np.float16)
        with poisoned():
            got = sess.run(None, {"x": x})[0]
        np.testing.assert_array_equal(got.view(np.uint16), softmax_body(x, 1).view(np.uint16))


@pytest.mark.parametrize("shape", [(7, 1), (5, 17), (6, 16), (3, 300), (9, 128), (2, 1000), (1, 4099)])
def test_row_kernel_shapes_and_non_finite(shape):
    """float Softmax along a contiguous row runs onnxc_softmax.h: rows in groups of four (any count),
    vector body plus scalar tail (any length), long rows (float partials flushed to double), and a
    NaN / +inf / -inf / huge value at the start, in the vector body and in the tail."""
    x = special(shape, scale=20.0)
    rows, n = shape
    for r, col, v in [(0, 0, np.nan), (1 % rows, n - 1, np.inf), (2 % rows, n // 2, -np.inf),
                      (3 % rows, min(20, n - 1), 1e30), (4 % rows, n - 1, -1e30)]:
        x[r, col] = v
    model = make_node_model("Softmax", {"x": x}, {"axis": -1}, opset=13)
    check(model, {"x": x}, rtol=3e-6, atol=1e-7)


def test_row_kernel_all_neg_inf_and_underflow():
    """A row of -inf only is NaN (0/0) as in onnx.reference; exponents below -87 flush to 0."""
    x = np.full((5, 40), -np.inf, np.float32)
    x[1] = np.linspace(-200, 0, 40)
    x[2, :] = 0
    x[3] = np.linspace(-90, -80, 40)
    x[4, 3] = 3.0
    model = make_node_model("Softmax", {"x": x}, {"axis": -1}, opset=13)
    check(model, {"x": x}, rtol=3e-6, atol=1e-7)


@pytest.mark.parametrize("portable", [False, True])
def test_row_kernel_portable_build(portable, tmp_path):
    """The row kernel in the portable build (4-float vectors, no FMA) too."""
    from onnxc.compiler import Options
    x = special((6, 37), scale=10.0)
    x[1, 5], x[2, 36], x[3, 0] = np.nan, np.inf, -np.inf
    model = make_node_model("Softmax", {"x": x}, {"axis": -1}, opset=13)
    with np.errstate(all="ignore"):
        want = ReferenceEvaluator(model).run(None, {"x": x})
    typed_outputs(model, want)
    path = onnxc.compiler.build_library(model, Options(portable=portable), cache_dir=tmp_path)
    got = onnxc.InferenceSession(str(path)).run(None, {"x": x})
    assert_close(want, got, 3e-6, 1e-7)
