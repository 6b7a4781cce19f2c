"""ConvTranspose against onnx.reference (1-D to 3-D, groups, strides, pads, dilations,
output_padding, output_shape, auto_pad)."""
import numpy as np
import pytest

import onnxc
from util import check, make_node_model, typed_outputs

rng = np.random.default_rng(3)


@pytest.mark.parametrize("xs,ws,attrs", [
    ((1, 1, 3, 3), (1, 2, 3, 3), {}),
    ((2, 3, 5), (3, 2, 3), {"strides": [2]}),
    ((1, 2, 4, 5), (2, 3, 3, 2), {"strides": [3, 2], "pads": [1, 0, 2, 1]}),
    ((1, 2, 4, 4), (2, 2, 3, 3), {"dilations": [2, 2], "strides": [2, 2]}),
    ((1, 4, 3, 3), (4, 1, 3, 3), {"group": 2, "strides": [2, 2], "output_padding": [1, 1]}),
    ((2, 6, 3, 4), (6, 2, 2, 2), {"group": 3}),
    ((1, 1, 3, 3), (1, 2, 3, 3), {"strides": [3, 2], "output_shape": [10, 8]}),
    ((1, 1, 3, 3), (1, 2, 3, 3), {"strides": [2, 2], "auto_pad": "SAME_UPPER"}),
    ((1, 1, 3, 3), (1, 2, 3, 3), {"strides": [2, 2], "auto_pad": "SAME_LOWER"}),
    ((1, 2, 3, 4, 2), (2, 2, 2, 3, 2), {"strides": [2, 1, 2], "pads": [0, 1, 0, 1, 0, 1]}),
    ((1, 3, 20, 20), (3, 8, 4, 4), {"strides": [2, 2], "pads": [1, 1, 1, 1]}),
])
@pytest.mark.parametrize("bias", [False, True])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_conv_transpose(xs, ws, attrs, bias, dtype):
    x = rng.standard_normal(xs).astype(dtype)
    w = rng.standard_normal(ws).astype(dtype)
    inits = {"w": w}
    if bias:
        inits["b"] = rng.standard_normal(ws[1] * attrs.get("group", 1)).astype(dtype)
    m = make_node_model("ConvTranspose", {"x": x}, attrs, initializers=inits)
    G = attrs.get("group", 1)
    if G == 1:
        check(m, {"x": x}, rtol=1e-4, atol=1e-4)
        return
    # onnx.reference slices W by output channel for groups (wrong): reference per group instead
    from onnx.reference import ReferenceEvaluator
    cg, a1 = xs[1] // G, {k: v for k, v in attrs.items() if k != "group"}
    parts = []
    for g in range(G):
        gi = {"w": w[g * cg:(g + 1) * cg]}
        if bias:
            gi["b"] = inits["b"][g * ws[1]:(g + 1) * ws[1]]
        xg = x[:, g * cg:(g + 1) * cg]
        parts.append(ReferenceEvaluator(make_node_model("ConvTranspose", {"x": xg}, a1, initializers=gi)).run(
            None, {"x": xg})[0])
    want = np.concatenate(parts, axis=1)
    typed_outputs(m, [want])
    got = onnxc.InferenceSession(m.SerializeToString()).run(None, {"x": x})[0]
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


def test_conv_transpose_symbolic_batch():
    w = rng.standard_normal((2, 3, 3, 3)).astype(np.float32)
    x = rng.standard_normal((2, 2, 4, 4)).astype(np.float32)
    m = make_node_model("ConvTranspose", {"x": x}, {"strides": [2, 2]}, initializers={"w": w},
                        input_shapes={"x": ["N", 2, 4, 4]})
    from onnx.reference import ReferenceEvaluator
    typed_outputs(m, ReferenceEvaluator(m).run(None, {"x": x}))
    sess = onnxc.InferenceSession(m.SerializeToString())
    for n in (1, 3):
        x = rng.standard_normal((n, 2, 4, 4)).astype(np.float32)
        np.testing.assert_allclose(sess.run(None, {"x": x})[0], ReferenceEvaluator(m).run(None, {"x": x})[0],
                                   rtol=1e-4, atol=1e-4)


def test_conv_transpose_errors():
    x = rng.standard_normal((1, 3, 4, 4)).astype(np.float32)
    w = rng.standard_normal((2, 2, 3, 3)).astype(np.float32)
    m = make_node_model("ConvTranspose", {"x": x}, initializers={"w": w})
    typed_outputs(m, [np.zeros((1, 2, 6, 6), np.float32)])
    with pytest.raises(onnxc.InvalidGraph, match="group"):
        onnxc.InferenceSession(m.SerializeToString())
