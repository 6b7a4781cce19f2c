"""Normalization operators against onnx.reference (or the ONNX formula where the reference is
wrong or missing): LayerNormalization, RMSNormalization, InstanceNormalization,
GroupNormalization, MeanVarianceNormalization, LpNormalization, LRN, Hardmax."""
import ml_dtypes
import numpy as np
import onnx
import pytest
from onnx import helper

import onnxc
from util import NP2ONNX, assert_close, check, make_node_model

rng = np.random.default_rng(11)
BF16 = np.dtype(ml_dtypes.bfloat16)
NP2ONNX.setdefault(BF16, onnx.TensorProto.BFLOAT16)   # util's table predates bfloat16 inputs


def run_onnxc(model, feeds):
    return onnxc.InferenceSession(model.SerializeToString()).run(None, feeds)


def declare(model, outs):
    """Declare output types/shapes (np arrays) on a test model."""
    for vi, r in zip(model.graph.output, outs):
        vi.CopyFrom(helper.make_tensor_value_info(vi.name, NP2ONNX[r.dtype], r.shape))
    return model


def layernorm_ref(x, w, b, axis, eps, rms=False):
    axis = axis % x.ndim
    xs = x.astype(np.float64)
    red = tuple(range(axis, x.ndim))
    if rms:
        inv = 1 / np.sqrt((xs * xs).mean(axis=red, keepdims=True) + eps)
        return xs * inv * w, None, inv
    mean = xs.mean(axis=red, keepdims=True)
    inv = 1 / np.sqrt(((xs - mean) ** 2).mean(axis=red, keepdims=True) + eps)
    y = (xs - mean) * inv * w
    return (y + b if b is not None else y), mean, inv


@pytest.mark.parametrize("shape,axis", [((3, 4), -1), ((2, 3, 5), 1), ((2, 3, 4, 5), 0), ((2, 3, 4, 5), -2),
                                        ((4, 37), 1), ((1, 6, 768), -1)])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_layernorm_vs_reference(shape, axis, dtype):
    x = rng.standard_normal(shape).astype(dtype)
    ns = shape[axis % len(shape):]
    w, b = rng.standard_normal(ns).astype(dtype), rng.standard_normal(ns).astype(dtype)
    n = 3 if dtype == np.float32 else 1
    m = make_node_model("LayerNormalization", {"x": x, "w": w, "b": b}, {"axis": axis, "epsilon": 1e-3},
                        n_outputs=n)
    check(m, {"x": x, "w": w, "b": b}, rtol=1e-4, atol=1e-5)


def test_layernorm_no_bias_scalar_scale_and_outputs_subset():
    x = rng.standard_normal((3, 8)).astype(np.float32)
    w = np.array([1.5], np.float32)
    from util import make_model_from_nodes
    node = helper.make_node("LayerNormalization", ["x", "w"], ["y", "", "inv"])
    m = make_model_from_nodes([node], {"x": x}, {"w": w}, ["y", "inv"])
    y, _, inv = layernorm_ref(x, 1.5, None, -1, 1e-5)
    got = run_onnxc(declare(m, [y.astype(np.float32), inv.astype(np.float32)]), {"x": x})
    np.testing.assert_allclose(got[0], y, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(got[1], inv, rtol=1e-4)


@pytest.mark.parametrize("dtype", [np.float16, BF16])
def test_layernorm_half(dtype):
    x = rng.standard_normal((4, 40)).astype(dtype)
    w, b = rng.standard_normal(40).astype(dtype), rng.standard_normal(40).astype(dtype)
    m = make_node_model("LayerNormalization", {"x": x}, initializers={"w": w, "b": b}, n_outputs=2)
    y, mean, _ = layernorm_ref(x.astype(np.float32), w.astype(np.float32), b.astype(np.float32), -1, 1e-5)
    got = run_onnxc(declare(m, [y.astype(dtype), mean.astype(np.float32)]), {"x": x})
    assert got[0].dtype == dtype and got[1].dtype == np.float32
    np.testing.assert_allclose(got[0].astype(np.float32), y, rtol=2e-2, atol=2e-2)
    np.testing.assert_allclose(got[1], mean, rtol=1e-5, atol=1e-6)


def test_layernorm_nan_inf_and_inplace():
    x = rng.standard_normal((4, 16)).astype(np.float32)
    x[1, 3], x[2, 0] = np.nan, np.inf
    w = rng.standard_normal(16).astype(np.float32)
    nodes = [helper.make_node("Relu", ["x"], ["r"]), helper.make_node("LayerNormalization", ["r", "w"], ["y"])]
    from util import make_model_from_nodes
    check(make_model_from_nodes(nodes, {"x": x}, {"w": w}, ["y"], opset=17), {"x": x}, rtol=1e-4, atol=1e-5)


def test_layernorm_symbolic_rows():
    w = rng.standard_normal(10).astype(np.float32)
    x = rng.standard_normal((2, 3, 10)).astype(np.float32)
    m = make_node_model("LayerNormalization", {"x": x}, initializers={"w": w}, input_shapes={"x": ["B", "T", 10]})
    declare(m, [x])
    sess = onnxc.InferenceSession(m.SerializeToString())
    for shape in ((1, 5, 10), (3, 1, 10), (0, 2, 10)):
        x = rng.standard_normal(shape).astype(np.float32)
        np.testing.assert_allclose(sess.run(None, {"x": x})[0], layernorm_ref(x, w, None, -1, 1e-5)[0],
                                   rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("shape,axis", [((3, 4), -1), ((2, 3, 4, 5), 1), ((2, 5), 0)])
def test_rmsnorm(shape, axis):
    x = rng.standard_normal(shape).astype(np.float32)
    w = rng.standard_normal(shape[axis % len(shape):]).astype(np.float32)
    check(make_node_model("RMSNormalization", {"x": x, "w": w}, {"axis": axis}, opset=23),
          {"x": x, "w": w}, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("shape", [(2, 3, 5), (2, 3, 4, 5), (1, 2, 3, 4, 2)])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_instancenorm(shape, dtype):
    x = rng.standard_normal(shape).astype(dtype)
    s, b = rng.standard_normal(shape[1]).astype(dtype), rng.standard_normal(shape[1]).astype(dtype)
    check(make_node_model("InstanceNormalization", {"x": x, "s": s, "b": b}, {"epsilon": 1e-2}),
          {"x": x, "s": s, "b": b}, rtol=1e-4, atol=1e-5)


def groupnorm_ref(x, s, b, G, eps, per_channel):
    N, C = x.shape[:2]
    xg = x.reshape(N, G, -1).astype(np.float64)
    mean = xg.mean(axis=2, keepdims=True)
    var = ((xg - mean) ** 2).mean(axis=2, keepdims=True)
    y = ((xg - mean) / np.sqrt(var + eps)).reshape(x.shape)
    shape = (1, C) + (1,) * (x.ndim - 2)
    if not per_channel:
        s, b = np.repeat(s, C // G), np.repeat(b, C // G)
    return (y * s.reshape(shape) + b.reshape(shape)).astype(x.dtype)


@pytest.mark.parametrize("opset", [21])   # 18 is deprecated: onnx.checker rejects it
@pytest.mark.parametrize("shape,G", [((2, 4, 3, 3), 2), ((3, 6, 5), 3), ((2, 4, 2, 2), 4), ((2, 4), 1)])
def test_groupnorm(opset, shape, G):
    x = rng.standard_normal(shape).astype(np.float32)
    n = shape[1] if opset >= 21 else G
    s, b = rng.standard_normal(n).astype(np.float32), rng.standard_normal(n).astype(np.float32)
    m = make_node_model("GroupNormalization", {"x": x, "s": s, "b": b}, {"num_groups": G, "epsilon": 1e-3},
                        opset=opset)
    got = run_onnxc(declare(m, [x]), {"x": x, "s": s, "b": b})[0]
    np.testing.assert_allclose(got, groupnorm_ref(x, s, b, G, 1e-3, opset >= 21), rtol=1e-4, atol=1e-5)


def test_groupnorm_errors():
    x = rng.standard_normal((2, 4, 3)).astype(np.float32)
    s = np.ones(3, np.float32)
    m = make_node_model("GroupNormalization", {"x": x}, {"num_groups": 3}, initializers={"s": s, "b": s}, opset=21)
    with pytest.raises(onnxc.InvalidGraph, match="num_groups"):
        run_onnxc(declare(m, [x]), {"x": x})


@pytest.mark.parametrize("axes", [None, [0, 2, 3], [1], [2, 3], [-1]])
def test_mvn(axes):
    x = rng.standard_normal((3, 4, 2, 5)).astype(np.float32)
    attrs = {"axes": axes} if axes is not None else {}
    check(make_node_model("MeanVarianceNormalization", {"x": x}, attrs, opset=13), {"x": x}, rtol=1e-3, atol=1e-4)


@pytest.mark.parametrize("axis", [0, 1, -1])
@pytest.mark.parametrize("p", [1, 2])
def test_lpnorm(axis, p):
    x = rng.standard_normal((3, 4, 5)).astype(np.float32)
    x[0, :, 0] = 0
    m = make_node_model("LpNormalization", {"x": x}, {"axis": axis, "p": p})
    norm = (np.abs(x) ** p).sum(axis=axis, keepdims=True) ** (1 / p)
    want = np.where(norm == 0, 0, x / np.where(norm == 0, 1, norm)).astype(np.float32)
    got = run_onnxc(declare(m, [want]), {"x": x})[0]
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("size", [1, 2, 3, 5])
def test_lrn(size):
    x = rng.standard_normal((2, 7, 3, 4)).astype(np.float32)
    attrs = {"size": size, "alpha": 2e-3, "beta": 0.6, "bias": 1.5}
    m = make_node_model("LRN", {"x": x}, attrs)
    sq = np.zeros_like(x)
    for c in range(7):
        lo, hi = max(0, c - (size - 1) // 2), min(7, c + -(-(size - 1) // 2) + 1)
        sq[:, c] = (x[:, lo:hi] ** 2).sum(axis=1)
    want = (x / (1.5 + 2e-3 / size * sq) ** 0.6).astype(np.float32)
    got = run_onnxc(declare(m, [want]), {"x": x})[0]
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("opset,axis", [(13, -1), (13, 0), (13, 1), (11, 1), (11, 0), (1, 2)])
def test_hardmax(opset, axis):
    x = rng.integers(0, 4, (3, 4, 5)).astype(np.float32)   # ties: the first one wins
    x[1, 2, 3] = np.nan
    m = make_node_model("Hardmax", {"x": x}, {"axis": axis}, opset=opset)
    if opset >= 13:
        xm = np.moveaxis(x, axis, -1)
        am = np.argmax(xm, axis=-1)
        want = np.moveaxis(np.eye(xm.shape[-1], dtype=np.float32)[am], -1, axis)
    else:
        a = axis % 3
        x2 = x.reshape(int(np.prod(x.shape[:a])), -1)
        want = np.eye(x2.shape[1], dtype=np.float32)[np.argmax(x2, axis=1)].reshape(x.shape)
    got = run_onnxc(declare(m, [want]), {"x": x})[0]
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("attrs,shape", [
    ({"kernel_shape": [3]}, (1, 3, 10)),
    ({"kernel_shape": [2, 2]}, (2, 3, 6, 5)),
    ({"kernel_shape": [3, 3], "pads": [1, 1, 1, 1], "p": 3}, (1, 2, 5, 5)),
    ({"kernel_shape": [3, 3], "auto_pad": "SAME_UPPER", "strides": [2, 2], "p": 1}, (1, 2, 7, 6)),
    ({"kernel_shape": [2, 2], "dilations": [2, 2]}, (1, 1, 6, 6)),
    ({"kernel_shape": [2, 2, 2]}, (1, 2, 4, 4, 3)),
])
def test_lppool(attrs, shape):
    x = rng.standard_normal(shape).astype(np.float32)
    m = make_node_model("LpPool", {"x": x}, attrs, opset=18)
    # the reference averages over the taps inside the input then scales by the kernel size,
    # which is the plain sum only without padding: compare with the sum (ONNX, onnxruntime)
    ref = onnx.reference.ReferenceEvaluator(m).run(None, {"x": x})[0]
    got = run_onnxc(declare(m, [ref]), {"x": x})[0]
    if "pads" not in attrs and "auto_pad" not in attrs:
        np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-5)
    else:
        p = attrs.get("p", 2)
        xp = np.pad(np.abs(x) ** p, [(0, 0), (0, 0), (1, 1), (1, 1)])
        if "strides" in attrs:   # SAME_UPPER, 7x6 -> 4x3, total pads (2, 1): (1, 1) and (0, 1)
            xp = np.pad(np.abs(x) ** p, [(0, 0), (0, 0), (1, 1), (0, 1)])
        s = attrs.get("strides", [1, 1])
        want = np.zeros(got.shape, np.float64)
        for i in range(got.shape[2]):
            for j in range(got.shape[3]):
                want[:, :, i, j] = xp[:, :, i * s[0]:i * s[0] + 3, j * s[1]:j * s[1] + 3].sum(axis=(2, 3))
        np.testing.assert_allclose(got, want ** (1 / p), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("p", [1, 2, 3])
def test_globallppool(p):
    x = rng.standard_normal((2, 3, 4, 5)).astype(np.float32)
    m = make_node_model("GlobalLpPool", {"x": x}, {"p": p})   # onnx.reference has no GlobalLpPool
    want = ((np.abs(x.astype(np.float64)) ** p).sum(axis=(2, 3), keepdims=True) ** (1 / p)).astype(np.float32)
    np.testing.assert_allclose(run_onnxc(declare(m, [want]), {"x": x})[0], want, rtol=1e-5, atol=1e-6)


def test_maxunpool():
    x = rng.standard_normal((2, 3, 2, 3)).astype(np.float32)
    ind = np.array([((n * 3 + c) * 16 + np.array([0, 3, 5, 9, 12, 15])).reshape(2, 3)
                    for n in range(2) for c in range(3)]).reshape(2, 3, 2, 3).astype(np.int64)
    m = make_node_model("MaxUnpool", {"x": x, "i": ind}, {"kernel_shape": [2, 2], "strides": [2, 2]}, opset=11)
    check(m, {"x": x, "i": ind})
    m = make_node_model("MaxUnpool", {"x": x, "i": ind}, {"kernel_shape": [2, 2], "strides": [2, 2]}, opset=11,
                        initializers={"s": np.array([2, 3, 5, 7], np.int64)})
    check(m, {"x": x, "i": ind})
