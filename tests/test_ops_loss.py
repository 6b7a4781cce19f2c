"""NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss against onnx.reference: reductions,
weights, ignore_index (negative too), N-D inputs, log_prob, low-precision types, bad targets."""
import ml_dtypes
import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

import onnxc
from util import NP2ONNX, check, make_node_model

rng = np.random.default_rng(12)
NLL, SCE = "NegativeLogLikelihoodLoss", "SoftmaxCrossEntropyLoss"


def scores(shape, dtype=np.float32, op=NLL):
    x = rng.standard_normal(shape) * 3
    return x.astype(dtype)


def targets(n_shape, C, ignore=None, dtype=np.int64):
    t = rng.integers(0, C, n_shape)
    if ignore is not None:
        t[rng.random(n_shape) < 0.3] = ignore
    return t.astype(dtype)


def model(op, x, t, w=None, opset=13, n_outputs=1, w_const=False, **attrs):
    ins = {"x": x, "t": t}
    inits = {}
    if w is not None:
        (inits if w_const else ins)["w"] = w
    return make_node_model(op, ins, attrs=attrs, opset=opset, n_outputs=n_outputs, initializers=inits)


def feeds_of(m, **arrs):
    names = {i.name for i in m.graph.input} - {i.name for i in m.graph.initializer}
    return {k: v for k, v in arrs.items() if k in names}


@pytest.mark.parametrize("op", [NLL, SCE])
@pytest.mark.parametrize("reduction", ["none", "sum", "mean"])
@pytest.mark.parametrize("shape", [(5, 4), (3, 5, 6), (2, 3, 4, 5), (2, 4, 1, 3, 2)])
@pytest.mark.parametrize("weighted", [False, True])
def test_loss_basic(op, reduction, shape, weighted):
    x = scores(shape)
    t = targets((shape[0],) + shape[2:], shape[1])
    w = rng.random(shape[1]).astype(np.float32) if weighted else None
    m = model(op, x, t, w, reduction=reduction)
    check(m, feeds_of(m, x=x, t=t, w=w), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("op", [NLL, SCE])
@pytest.mark.parametrize("reduction", ["none", "sum", "mean"])
@pytest.mark.parametrize("ignore", [0, 2, -1, -5, 100])
@pytest.mark.parametrize("weighted", [False, True])
def test_loss_ignore_index(op, reduction, ignore, weighted):
    if op == NLL and ignore == -1 and not weighted and reduction == "mean":
        pytest.skip("onnx.reference's NLL treats ignore_index=-1 without weight as no ignore_index "
                    "(test_nll_ignore_minus_one_mean checks the spec's result)")
    x = scores((4, 3, 5))
    t = targets((4, 5), 3, ignore=ignore)
    w = rng.random(3).astype(np.float32) if weighted else None
    m = model(op, x, t, w, reduction=reduction, ignore_index=ignore)
    check(m, feeds_of(m, x=x, t=t, w=w), rtol=1e-5, atol=1e-5)


def test_nll_ignore_minus_one_mean():
    x = scores((4, 3))
    t = np.array([0, -1, 2, -1], np.int64)
    m = model(NLL, x, t, reduction="mean", ignore_index=-1)
    m.graph.output[0].CopyFrom(helper.make_tensor_value_info("y0", TensorProto.FLOAT, ()))
    got = onnxc.InferenceSession(m.SerializeToString()).run(None, {"x": x, "t": t})[0]
    np.testing.assert_allclose(got, -(x[0, 0] + x[2, 2]) / 2, rtol=1e-6)


def test_loss_all_ignored_mean_is_nan():
    x = scores((3, 4))
    t = np.full(3, 1, np.int64)
    m = model(SCE, x, t, reduction="mean", ignore_index=1)
    got = check(m, {"x": x, "t": t})
    assert np.isnan(got[0])


@pytest.mark.parametrize("reduction", ["none", "mean"])
@pytest.mark.parametrize("shape", [(3, 5), (2, 4, 3, 2)])
def test_sce_log_prob(reduction, shape):
    x = scores(shape)
    t = targets((shape[0],) + shape[2:], shape[1], ignore=1)
    w = rng.random(shape[1]).astype(np.float32)
    m = model(SCE, x, t, w, n_outputs=2, reduction=reduction, ignore_index=1)
    check(m, {"x": x, "t": t, "w": w}, rtol=1e-5, atol=1e-5)


def test_sce_stable_large_scores():
    x = np.array([[1000.0, 0.0, -1000.0], [-1e4, 1e4, 0.0]], np.float32)
    t = np.array([0, 2], np.int64)
    m = model(SCE, x, t, n_outputs=2, reduction="none")
    m.graph.output[0].CopyFrom(helper.make_tensor_value_info("y0", TensorProto.FLOAT, (2,)))
    m.graph.output[1].CopyFrom(helper.make_tensor_value_info("y1", TensorProto.FLOAT, (2, 3)))
    loss, lp = onnxc.InferenceSession(m.SerializeToString()).run(None, {"x": x, "t": t})
    np.testing.assert_allclose(loss, [0.0, 1e4], rtol=1e-6)
    np.testing.assert_allclose(lp, [[0.0, -1000.0, -2000.0], [-2e4, 0.0, -1e4]], rtol=1e-6)


@pytest.mark.parametrize("op", [NLL, SCE])
def test_loss_double_int32_weight_initializer(op):
    x = scores((3, 4, 5), np.float64)
    t = targets((3, 5), 4, ignore=-3, dtype=np.int32)
    w = rng.random(4)
    m = model(op, x, t, w, w_const=True, reduction="mean", ignore_index=-3)
    check(m, {"x": x, "t": t}, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("op,opset", [(NLL, 12), (NLL, 13), (NLL, 22), (SCE, 12), (SCE, 13)])
@pytest.mark.parametrize("dtype", [np.float16, ml_dtypes.bfloat16])
@pytest.mark.parametrize("reduction", ["none", "mean"])
def test_loss_low_precision(op, opset, dtype, reduction):
    if dtype == ml_dtypes.bfloat16 and opset < (22 if op == NLL else 13):
        pytest.skip("bfloat16 not in this opset's schema")
    x = scores((4, 5, 3) if opset != 13 else (6, 21)).astype(dtype)
    t = targets(x.shape[:1] + x.shape[2:], x.shape[1], ignore=2)
    w = rng.random(x.shape[1]).astype(dtype)
    n_out = 2 if op == SCE else 1
    m = model(op, x, t, w, opset=opset, n_outputs=n_out, reduction=reduction, ignore_index=2)
    # reference in float32 on the same (rounded) values
    m32 = model(op, x.astype(np.float32), t, w.astype(np.float32), opset=opset, n_outputs=n_out,
                reduction=reduction, ignore_index=2)
    ref = onnx.reference.ReferenceEvaluator(m32).run(None, {"x": x.astype(np.float32), "t": t,
                                                            "w": w.astype(np.float32)})
    for vi, r in zip(m.graph.output, ref):
        vi.CopyFrom(helper.make_tensor_value_info(vi.name, NP2ONNX[np.dtype(dtype)], r.shape))
    got = onnxc.InferenceSession(m.SerializeToString()).run(None, {"x": x, "t": t, "w": w})
    tol = 1e-2 if dtype == np.float16 else 2e-2
    for r, g in zip(ref, got):
        assert g.dtype == np.dtype(dtype) and g.shape == r.shape
        np.testing.assert_allclose(g.astype(np.float32), r, rtol=tol, atol=tol)


def test_loss_symbolic_batch():
    x, t = scores((3, 4, 2)), targets((3, 2), 4, ignore=-1)
    m = model(SCE, x, t, n_outputs=2, reduction="sum", ignore_index=-1)
    m.graph.input[0].CopyFrom(helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 4, "D"]))
    m.graph.input[1].CopyFrom(helper.make_tensor_value_info("t", TensorProto.INT64, ["N", "D"]))
    ref = onnx.reference.ReferenceEvaluator(m)
    m.graph.output[0].CopyFrom(helper.make_tensor_value_info("y0", TensorProto.FLOAT, ()))
    m.graph.output[1].CopyFrom(helper.make_tensor_value_info("y1", TensorProto.FLOAT, ["N", 4, "D"]))
    sess = onnxc.InferenceSession(m.SerializeToString())
    for n, d in [(3, 2), (5, 7), (1, 1)]:
        x, t = scores((n, 4, d)), targets((n, d), 4, ignore=-1)
        for r, g in zip(ref.run(None, {"x": x, "t": t}), sess.run(None, {"x": x, "t": t})):
            np.testing.assert_allclose(g, r, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("op", [NLL, SCE])
@pytest.mark.parametrize("bad", [4, -1, -2, 1 << 40])
def test_loss_target_out_of_range_fails(op, bad):
    x = scores((3, 4))
    t = np.array([0, bad, 1], np.int64)
    m = model(op, x, t, reduction="none", ignore_index=-2 if bad != -2 else 7)
    m.graph.output[0].CopyFrom(helper.make_tensor_value_info("y0", TensorProto.FLOAT, (3,)))
    sess = onnxc.InferenceSession(m.SerializeToString())
    with pytest.raises(onnxc.InvalidArgument, match=r"node 0 \(.*index input is out of range"):
        sess.run(None, {"x": x, "t": t})


def test_loss_bad_reduction_and_shapes():
    x, t = scores((3, 4)), targets((3,), 4)
    m = model(NLL, x, t)
    m.graph.node[0].attribute.append(helper.make_attribute("reduction", "avg"))
    with pytest.raises((onnxc.InvalidGraph, onnxc.InvalidArgument, onnxc.Fail)):
        onnxc.InferenceSession(m.SerializeToString())
    m = model(NLL, x, targets((2,), 4))
    m.graph.output[0].CopyFrom(helper.make_tensor_value_info("y0", TensorProto.FLOAT, ()))
    with pytest.raises((onnxc.InvalidGraph, onnxc.InvalidArgument, onnxc.Fail)):
        onnxc.InferenceSession(m.SerializeToString())


@pytest.mark.parametrize("shape", [(3, 37), (2, 40, 1), (2, 5, 130), (1, 3, 9, 15)])
@pytest.mark.parametrize("reduction", ["none", "sum"])
def test_sce_blocks_and_nonfinite(shape, reduction):
    """Rows longer than the unroll, D spanning several lane blocks, NaN and inf scores."""
    x = scores(shape)
    flat = x.reshape(-1)
    flat[rng.integers(0, flat.size, 3)] = np.nan
    flat[rng.integers(0, flat.size, 2)] = -np.inf
    t = targets((shape[0],) + shape[2:], shape[1], ignore=3)
    m = model(SCE, x, t, n_outputs=2, reduction=reduction, ignore_index=3)
    with np.errstate(all="ignore"):
        check(m, {"x": x, "t": t}, rtol=1e-5, atol=1e-5)
