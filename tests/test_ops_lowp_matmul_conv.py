"""float16/bfloat16 MatMul, Gemm and Conv (computed in float, rounded once on store), and
BatchNormalization's training mode (opset 14+, also float16/bfloat16).

Low-precision results are compared with the float64 computation on the same (upcast) inputs,
relative to the output's magnitude: one rounding to the type plus float accumulation."""
import ml_dtypes
import numpy as np
import pytest
from onnx import helper
from onnx.reference import ReferenceEvaluator

import onnxc
from util import NP2ONNX, assert_close, check, make_node_model, run_both, typed_outputs

rng = np.random.default_rng(11)
BF16 = ml_dtypes.bfloat16
LOWP = [np.float16, BF16]
REL = {np.dtype(np.float16): 2e-3, np.dtype(BF16): 1.6e-2}


def rand(shape, dtype):
    return rng.standard_normal(shape).astype(dtype)


def close_lowp(got, exact, dtype):
    """got (dtype) vs the float64 result: within a few roundings of the largest magnitude;
    NaN and inf where the exact result has them."""
    assert got.dtype == np.dtype(dtype), got.dtype
    g, e = got.astype(np.float64), np.asarray(exact, np.float64)
    assert g.shape == e.shape, (g.shape, e.shape)
    finite = np.isfinite(e)
    np.testing.assert_array_equal(np.isnan(g), np.isnan(e))
    np.testing.assert_array_equal(g[np.isinf(e)], e[np.isinf(e)])
    scale = max(1.0, np.abs(e[finite]).max()) if finite.any() else 1.0
    assert np.abs(g[finite] - e[finite]).max(initial=0) <= REL[np.dtype(dtype)] * scale


def run(model, feeds, dtype, n_out=1):
    for vi in model.graph.output[:n_out]:
        vi.CopyFrom(helper.make_tensor_value_info(vi.name, NP2ONNX[np.dtype(dtype)], None))
    return onnxc.InferenceSession(model.SerializeToString()).run(None, feeds)


def f64(feeds):
    return {k: v.astype(np.float64) for k, v in feeds.items()}


def ref64(model_fn, feeds):
    """onnx.reference on the same node with float64 inputs (the exact result, near enough)."""
    m = model_fn(f64(feeds))
    return ReferenceEvaluator(m).run(None, f64(feeds))


# ---- MatMul -------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", LOWP)
@pytest.mark.parametrize("sa,sb", [((37, 70), (70, 23)), ((2, 3, 5, 40), (40, 7)), ((4, 5, 40), (4, 40, 6)),
                                   ((2, 1, 5, 9), (3, 9, 4)), ((9,), (9, 4)), ((3, 9), (9,)), ((0, 4), (4, 3))])
def test_matmul_lowp(dtype, sa, sb):
    feeds = {"a": rand(sa, dtype), "b": rand(sb, dtype)}
    got = run(make_node_model("MatMul", feeds, opset=13), feeds, dtype)
    close_lowp(got[0], np.matmul(feeds["a"].astype(np.float64), feeds["b"].astype(np.float64)), dtype)


@pytest.mark.parametrize("dtype", LOWP)
def test_matmul_lowp_nan_inf(dtype):
    a, b = rand((6, 8), dtype), rand((8, 5), dtype)
    a[1, 2], a[3, 0], b[4, 4] = np.nan, np.inf, -np.inf
    got = run(make_node_model("MatMul", {"a": a, "b": b}, opset=13), {"a": a, "b": b}, dtype)
    with np.errstate(invalid="ignore"):
        close_lowp(got[0], a.astype(np.float32) @ b.astype(np.float32), dtype)


def test_matmul_float16_opset1_and_reference():
    """float16 at MatMul-1; onnx.reference (numpy float16 matmul) agrees within float16 rounding."""
    feeds = {"a": rand((2, 7, 30), np.float16), "b": rand((30, 9), np.float16)}
    ref, got = run_both(make_node_model("MatMul", feeds, opset=1), feeds)
    assert_close(ref, got, rtol=5e-3, atol=5e-3)


@pytest.mark.parametrize("dtype", LOWP)
def test_matmul_lowp_symbolic_batch(dtype):
    a, b = rand((3, 4, 16), dtype), rand((16, 8), dtype)
    m = make_node_model("MatMul", {"a": a}, initializers={"b": b}, opset=13, input_shapes={"a": ["n", 4, 16]})
    sess = onnxc.InferenceSession(run_model_bytes(m, dtype))
    for n in (1, 3):
        got = sess.run(None, {"a": a[:n]})[0]
        close_lowp(got, a[:n].astype(np.float64) @ b.astype(np.float64), dtype)


def run_model_bytes(m, dtype):
    for vi in m.graph.output:
        vi.CopyFrom(helper.make_tensor_value_info(vi.name, NP2ONNX[np.dtype(dtype)], None))
    return m.SerializeToString()


# ---- Gemm ---------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", LOWP)
@pytest.mark.parametrize("ta,tb,cshape,alpha,beta", [(0, 0, None, 1.0, 1.0), (1, 0, (9,), 0.5, 2.0),
                                                     (0, 1, (7, 1), 1.0, -1.0), (1, 1, (7, 9), 2.0, 0.0),
                                                     (0, 0, (), 1.0, 0.5)])
def test_gemm_lowp(dtype, ta, tb, cshape, alpha, beta):
    M, N, K = 7, 9, 33
    feeds = {"a": rand((K, M) if ta else (M, K), dtype), "b": rand((N, K) if tb else (K, N), dtype)}
    if cshape is not None:
        feeds["c"] = rand(cshape, dtype)
    attrs = {"transA": ta, "transB": tb, "alpha": alpha, "beta": beta}
    got = run(make_node_model("Gemm", feeds, attrs, opset=13), feeds, dtype)
    exact = ref64(lambda f: make_node_model("Gemm", f, attrs, opset=13), feeds)[0]
    close_lowp(got[0], exact, dtype)


@pytest.mark.parametrize("opset", [6, 7, 9, 11])
def test_gemm_float16_opsets(opset):
    feeds = {"a": rand((5, 12), np.float16), "b": rand((12, 4), np.float16), "c": rand((5, 4), np.float16)}
    attrs = {"broadcast": 1} if opset < 7 else {}
    got = run(make_node_model("Gemm", feeds, attrs, opset=opset), feeds, np.float16)
    close_lowp(got[0], feeds["a"].astype(np.float64) @ feeds["b"].astype(np.float64) + feeds["c"], np.float16)


def test_gemm_bfloat16_c_is_output_storage():
    """C used only by Gemm: Y may take its storage (C is read into the float result first)."""
    a, b, c = rand((6, 10), BF16), rand((10, 6), BF16), rand((6, 6), BF16)
    nodes = [helper.make_node("Add", ["c", "c"], ["c2"]), helper.make_node("Gemm", ["a", "b", "c2"], ["y"])]
    from util import make_model_from_nodes
    m = make_model_from_nodes(nodes, {"a": a, "b": b, "c": c}, {}, ["y"], opset=13)
    got = run(m, {"a": a, "b": b, "c": c}, BF16)
    close_lowp(got[0], a.astype(np.float64) @ b.astype(np.float64) + 2 * c.astype(np.float64), BF16)


# ---- Conv ---------------------------------------------------------------------------------
CONVS = [((2, 4, 9, 9), (6, 2, 3, 3), dict(group=2, pads=[1, 1, 1, 1], strides=[2, 1])),   # im2col, groups
         ((1, 3, 8, 8), (5, 3, 1, 1), {}),                                                 # pointwise
         ((2, 4, 10), (4, 1, 3), dict(group=4, pads=[2, 0])),                               # depthwise 1-D
         ((1, 3, 7, 7), (3, 1, 5, 5), dict(group=3, pads=[2, 2, 2, 2])),                    # depthwise 2-D
         ((2, 16, 36, 36), (8, 16, 3, 3), dict(pads=[1, 1, 1, 1])),                         # chunked, packed W
         ((1, 2, 4, 5, 6), (3, 2, 2, 3, 2), dict(dilations=[1, 2, 1]))]                      # 3-D


@pytest.mark.parametrize("dtype", LOWP)
@pytest.mark.parametrize("xs,ws,attrs", CONVS)
def test_conv_lowp(dtype, xs, ws, attrs):
    feeds = {"x": rand(xs, dtype), "w": rand(ws, dtype), "b": rand(ws[0], dtype)}
    got = run(make_node_model("Conv", feeds, attrs, opset=22), feeds, dtype)
    exact = ref64(lambda f: make_node_model("Conv", f, attrs, opset=22), feeds)[0]
    close_lowp(got[0], exact, dtype)


@pytest.mark.parametrize("opset", [1, 11])
def test_conv_float16_opsets_no_bias(opset):
    feeds = {"x": rand((1, 2, 6, 6), np.float16)}
    inits = {"w": rand((3, 2, 3, 3), np.float16)}
    got = run(make_node_model("Conv", feeds, {"pads": [0, 1, 2, 1]}, opset=opset, initializers=inits),
              feeds, np.float16)
    exact = ref64(lambda f: make_node_model("Conv", f, {"pads": [0, 1, 2, 1]}, opset=opset),
                  {**feeds, **inits})[0]
    close_lowp(got[0], exact, np.float16)


@pytest.mark.parametrize("dtype", LOWP)
def test_conv_lowp_symbolic_batch_nan(dtype):
    x, w = rand((3, 2, 6, 6), dtype), rand((4, 2, 3, 3), dtype)
    x[1, 0, 2, 2] = np.nan
    m = make_node_model("Conv", {"x": x}, {"pads": [1, 1, 1, 1]}, opset=22, initializers={"w": w},
                        input_shapes={"x": ["n", 2, 6, 6]})
    sess = onnxc.InferenceSession(run_model_bytes(m, dtype))
    f = {"x": x.astype(np.float64), "w": w.astype(np.float64)}
    exact = ReferenceEvaluator(make_node_model("Conv", f, {"pads": [1, 1, 1, 1]}, opset=22)).run(None, f)[0]
    for n in (1, 3):
        close_lowp(sess.run(None, {"x": x[:n]})[0], exact[:n], dtype)


# ---- BatchNormalization, training mode ----------------------------------------------------
def bn_stats(c, dtype):
    return {"s": rand(c, dtype), "b": rand(c, dtype), "m": rand(c, dtype),
            "v": (rng.random(c) + 0.5).astype(dtype)}


@pytest.mark.parametrize("opset", [14, 15])
@pytest.mark.parametrize("shape", [(2, 3), (2, 3, 7), (3, 4, 5, 6)])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_batchnorm_training(opset, shape, dtype):
    x = rand(shape, dtype)
    st = bn_stats(shape[1], dtype)
    m = make_node_model("BatchNormalization", {"x": x}, {"training_mode": 1, "momentum": 0.8, "epsilon": 1e-2},
                        initializers=st, opset=opset, n_outputs=3)
    check(m, {"x": x}, rtol=1e-5 if dtype == np.float32 else 1e-12, atol=1e-5 if dtype == np.float32 else 1e-12)


def test_batchnorm_training_outputs_optional_and_constant_channel():
    """Only Y requested; a constant channel (variance 0) normalises to B exactly."""
    x = rand((2, 3, 4, 4), np.float32)
    x[:, 1] = 2.5
    st = bn_stats(3, np.float32)
    m = make_node_model("BatchNormalization", {"x": x}, {"training_mode": 1}, initializers=st, opset=15)
    got = check(m, {"x": x})
    np.testing.assert_array_equal(got[0][:, 1], np.full((2, 4, 4), st["b"][1], np.float32))


def test_batchnorm_training_mixed_types_opset15():
    """T float, T1 (scale, B) double, T2 (mean, var, running outputs) double. (onnx.reference
    returns the running statistics as T; the schema types them T2.)"""
    x = rand((2, 3, 5), np.float32)
    st = bn_stats(3, np.float64)
    m = make_node_model("BatchNormalization", {"x": x}, {"training_mode": 1}, initializers=st, opset=15, n_outputs=3)
    ref = ReferenceEvaluator(m).run(None, {"x": x})
    typed_outputs(m, [ref[0], st["m"], st["v"]])
    got = onnxc.InferenceSession(m.SerializeToString()).run(None, {"x": x})
    assert [g.dtype for g in got] == [np.float32, np.float64, np.float64]
    for r, g in zip(ref, got):
        np.testing.assert_allclose(g, r.astype(g.dtype), rtol=1e-5, atol=1e-6)


def test_batchnorm_training_nan():
    x = rand((2, 3, 4), np.float32)
    x[1, 2, 3] = np.nan
    st = bn_stats(3, np.float32)
    m = make_node_model("BatchNormalization", {"x": x}, {"training_mode": 1}, initializers=st, opset=15, n_outputs=3)
    got = check(m, {"x": x})
    assert np.isnan(got[0][:, 2]).all() and not np.isnan(got[0][:, :2]).any()


@pytest.mark.parametrize("dtype", LOWP)
@pytest.mark.parametrize("training", [0, 1])
def test_batchnorm_lowp(dtype, training):
    x = rand((2, 3, 4, 5), dtype)
    st = bn_stats(3, dtype)
    n_out = 3 if training else 1
    mk = lambda f, i: make_node_model("BatchNormalization", f, {"training_mode": training}, initializers=i,
                                      opset=15, n_outputs=n_out)
    got = run(mk({"x": x}, st), {"x": x}, dtype, n_out)
    exact = ReferenceEvaluator(mk({"x": x.astype(np.float64)}, f64(st))).run(None, {"x": x.astype(np.float64)})
    for g, e in zip(got, exact):
        close_lowp(g, e, dtype)


def test_batchnorm_training_statistics_outputs_before_14_not_supported():
    x = rand((2, 3, 4), np.float32)
    m = make_node_model("BatchNormalization", {"x": x}, initializers=bn_stats(3, np.float32), opset=9, n_outputs=5)
    typed_outputs(m, [x] * 5)
    with pytest.raises(onnxc.NotImplemented, match="training"):
        onnxc.InferenceSession(m.SerializeToString())
