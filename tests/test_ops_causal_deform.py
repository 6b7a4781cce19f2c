"""CausalConvWithState (27) and DeformConv (19, 22) against onnx.reference."""
import ml_dtypes
import numpy as np
import pytest
from onnx import helper
from onnx.reference import ReferenceEvaluator

import onnxc
from util import NP2ONNX, assert_close, make_model_from_nodes, run_both, typed_outputs

rng = np.random.default_rng(13)
BF16 = ml_dtypes.bfloat16


def model(op, feeds: dict, order: list, attrs, opset, n_out, input_shapes=None):
    """One node whose inputs are `order` ('' for an omitted optional input)."""
    node = helper.make_node(op, order, [f"y{i}" for i in range(n_out)], **attrs)
    return make_model_from_nodes([node], feeds, {}, [f"y{i}" for i in range(n_out)], opset, "", input_shapes)


def tols(dtype):
    return {np.dtype(np.float16): (3e-3, 3e-3), np.dtype(BF16): (2e-2, 2e-2),
            np.dtype(np.float32): (1e-5, 1e-5), np.dtype(np.float64): (1e-7, 1e-9)}[np.dtype(dtype)]


def compare(ref, got, dtype):
    rtol, atol = tols(dtype)
    assert len(ref) == len(got)
    for r, g in zip(ref, got):
        r = np.asarray(r)
        assert g.dtype == r.dtype and g.shape == r.shape, (g.dtype, r.dtype, g.shape, r.shape)
        np.testing.assert_allclose(g.astype(np.float64), r.astype(np.float64), rtol=rtol, atol=atol, equal_nan=True)


# ---- CausalConvWithState -----------------------------------------------------------------
def causal_feeds(B, C, L, k, dtype, bias, past):
    feeds = {"x": rng.standard_normal((B, C, L)).astype(dtype), "w": rng.standard_normal((C, 1, k)).astype(dtype)}
    order = ["x", "w"]
    if bias:
        feeds["b"] = rng.standard_normal(C).astype(dtype)
    order.append("b" if bias else "")
    if past:
        feeds["p"] = rng.standard_normal((B, C, k - 1)).astype(dtype)
    order.append("p" if past else "")
    while order[-1] == "":
        order.pop()
    return feeds, order


@pytest.mark.parametrize("dtype", [np.float32, np.float16, BF16])
@pytest.mark.parametrize("L,k,bias,past,act", [(9, 4, True, True, "silu"), (9, 4, False, False, "none"),
                                               (2, 4, True, False, "swish"), (2, 4, False, True, "none"),
                                               (6, 1, True, False, "silu"), (1, 3, False, True, "silu")])
def test_causal_conv(dtype, L, k, bias, past, act):
    feeds, order = causal_feeds(2, 3, L, k, dtype, bias, past)
    m = model("CausalConvWithState", feeds, order, {"activation": act}, 27, 2)
    ref, got = run_both(m, feeds)
    compare(ref, got, dtype)


def test_causal_conv_only_output_symbolic_and_nan():
    """Batch and length symbolic; NaN and inf stay in their windows."""
    feeds, order = causal_feeds(2, 4, 8, 3, np.float32, True, True)
    feeds["x"][1, 2, 3] = np.nan
    feeds["x"][0, 1, 5] = np.inf
    m = model("CausalConvWithState", feeds, order, {"activation": "silu"}, 27, 2,
              input_shapes={"x": ["b", 4, "l"], "p": ["b", 4, 2]})
    ref, got = run_both(m, feeds)
    assert_close(ref, got)
    sess = onnxc.InferenceSession(m.SerializeToString())
    one = {"x": feeds["x"][:1, :, :5], "p": feeds["p"][:1], "w": feeds["w"], "b": feeds["b"]}
    m1 = model("CausalConvWithState", one, order, {"activation": "silu"}, 27, 2)
    ref1, _ = run_both(m1, one)
    assert_close(ref1, sess.run(None, one))


def test_causal_conv_errors():
    feeds, order = causal_feeds(1, 3, 5, 3, np.float32, False, False)
    feeds["w"] = rng.standard_normal((4, 1, 3)).astype(np.float32)
    m = model("CausalConvWithState", feeds, order, {}, 27, 2)
    typed_outputs(m, [feeds["x"], feeds["x"]])
    with pytest.raises(onnxc.InvalidGraph, match="weight"):
        onnxc.InferenceSession(m.SerializeToString())
    feeds, order = causal_feeds(1, 3, 5, 3, np.float32, False, False)
    m = model("CausalConvWithState", feeds, order, {"activation": "gelu"}, 27, 2)
    typed_outputs(m, [feeds["x"], feeds["x"]])
    with pytest.raises(onnxc.InvalidGraph, match="activation"):
        onnxc.InferenceSession(m.SerializeToString())


# ---- DeformConv ----------------------------------------------------------------------------
def deform_feeds(xs, ws, attrs, og, dtype, bias, mask, scale):
    N, C, H, W = xs
    kH, kW = ws[2:]
    st, dl = attrs.get("strides", [1, 1]), attrs.get("dilations", [1, 1])
    pd = attrs.get("pads", [0, 0, 0, 0])
    oH = (H + pd[0] + pd[2] - (kH - 1) * dl[0] - 1) // st[0] + 1
    oW = (W + pd[1] + pd[3] - (kW - 1) * dl[1] - 1) // st[1] + 1
    feeds = {"x": rng.standard_normal(xs).astype(dtype), "w": rng.standard_normal(ws).astype(dtype),
             "off": (scale * rng.standard_normal((N, og * kH * kW * 2, oH, oW))).astype(dtype)}
    order = ["x", "w", "off"]
    if bias:
        feeds["b"] = rng.standard_normal(ws[0]).astype(dtype)
    order.append("b" if bias else "")
    if mask:
        feeds["m"] = rng.random((N, og * kH * kW, oH, oW)).astype(dtype)
    order.append("m" if mask else "")
    while order[-1] == "":
        order.pop()
    return feeds, order


DEFORMS = [((1, 2, 5, 5), (3, 2, 3, 3), {"pads": [1, 1, 1, 1]}, 1, True, True, 1.0),
           ((2, 4, 6, 7), (4, 2, 3, 2), {"pads": [1, 0, 2, 1], "strides": [2, 1], "dilations": [1, 2], "group": 2},
            2, False, True, 2.0),
           ((1, 4, 5, 5), (2, 4, 2, 2), {}, 4, True, False, 3.0),
           ((1, 3, 4, 6), (2, 3, 1, 1), {"strides": [2, 2]}, 1, False, False, 0.0)]   # integer positions


@pytest.mark.parametrize("opset", [19, 22])
@pytest.mark.parametrize("xs,ws,attrs,og,bias,mask,scale", DEFORMS)
def test_deform_conv(opset, xs, ws, attrs, og, bias, mask, scale):
    feeds, order = deform_feeds(xs, ws, attrs, og, np.float32, bias, mask, scale)
    attrs = dict(attrs, offset_group=og, kernel_shape=list(ws[2:]))
    ref, got = run_both(model("DeformConv", feeds, order, attrs, opset, 1), feeds)
    compare(ref, got, np.float32)


@pytest.mark.parametrize("dtype", [np.float64, np.float16, BF16])
def test_deform_conv_types(dtype):
    feeds, order = deform_feeds((2, 2, 5, 6), (4, 1, 3, 3), {"pads": [1, 1, 1, 1], "group": 2}, 2, dtype,
                                True, True, 1.5)
    attrs = {"group": 2, "offset_group": 2, "pads": [1, 1, 1, 1]}
    m = model("DeformConv", feeds, order, attrs, 22, 1)
    if dtype == np.float64:
        ref, got = run_both(m, feeds)
        compare(ref, got, np.float32)   # onnx.reference samples with float32 coordinates and weights
        return
    # float16/bfloat16: onnx.reference rounds every intermediate to the type; compare with the
    # float32 computation on the same inputs instead, relative to the output's magnitude
    f32 = {k: v.astype(np.float32) for k, v in feeds.items()}
    want = ReferenceEvaluator(model("DeformConv", f32, order, attrs, 22, 1)).run(None, f32)[0]
    typed_outputs(m, [np.zeros(want.shape, dtype)])
    got = onnxc.InferenceSession(m.SerializeToString()).run(None, feeds)[0]
    assert got.dtype == np.dtype(dtype) and got.shape == want.shape
    rel = 2e-3 if dtype == np.float16 else 1e-2
    assert np.abs(got.astype(np.float32) - want).max() <= rel * max(1.0, np.abs(want).max())


def test_deform_conv_symbolic_batch_and_far_offsets():
    """Samples far outside the image (and NaN offsets) read zeros; the batch is symbolic."""
    feeds, order = deform_feeds((3, 2, 5, 5), (2, 2, 3, 3), {}, 1, np.float32, True, True, 1.0)
    feeds["off"][0, 0, 0, 0] = 100.0
    feeds["off"][1, 3, 1, 2] = -7.5
    m = model("DeformConv", feeds, order, {}, 19, 1, input_shapes={"x": ["n", 2, 5, 5], "off": ["n", 18, 3, 3],
                                                                     "m": ["n", 9, 3, 3]})
    ref, got = run_both(m, feeds)
    compare(ref, got, np.float32)
    sess = onnxc.InferenceSession(m.SerializeToString())
    part = {k: (v[:2] if k in ("x", "off", "m") else v) for k, v in feeds.items()}
    compare([ref[0][:2]], sess.run(None, part), np.float32)
    feeds["off"][2, 5, 0, 1] = np.nan
    out = sess.run(None, feeds)[0]
    assert np.isfinite(out).all()


def test_deform_conv_errors():
    feeds, order = deform_feeds((1, 2, 5, 5), (3, 2, 3, 3), {}, 1, np.float32, False, False, 1.0)
    feeds["off"] = feeds["off"][:, :10]
    m = model("DeformConv", feeds, order, {}, 19, 1)
    typed_outputs(m, [np.zeros((1, 3, 3, 3), np.float32)])
    with pytest.raises(onnxc.InvalidGraph, match="offset"):
        onnxc.InferenceSession(m.SerializeToString())
    feeds, order = deform_feeds((1, 3, 5, 5), (3, 3, 3, 3), {}, 1, np.float32, False, False, 1.0)
    m = model("DeformConv", feeds, order, {"offset_group": 2}, 19, 1)
    typed_outputs(m, [np.zeros((1, 3, 3, 3), np.float32)])
    with pytest.raises(onnxc.InvalidGraph, match="offset_group"):
        onnxc.InferenceSession(m.SerializeToString())
