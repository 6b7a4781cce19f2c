"""BatchNormalization (inference) against onnx.reference, and against the formula where
onnx.reference is wrong (opset 7: it runs training mode; opsets 9-13: it mixes in momentum)."""
import numpy as np
import pytest
from onnx import helper

import onnxc
from util import NP2ONNX, assert_close, check, make_node_model, typed_outputs

rng = np.random.default_rng(5)


def stats(c, dtype=np.float32):
    return {"s": rng.standard_normal(c).astype(dtype), "b": rng.standard_normal(c).astype(dtype),
            "m": rng.standard_normal(c).astype(dtype), "v": (rng.random(c) + 0.5).astype(dtype)}


def formula(x, st, eps=1e-5):
    shape = (-1,) + (1,) * (x.ndim - 2)
    s, b, m, v = (st[k].reshape(shape) for k in "sbmv")
    return (s * (x - m) / np.sqrt(v + eps) + b).astype(x.dtype)


def check_formula(model, x, want, rtol=1e-5, atol=1e-6):
    typed_outputs(model, [want])
    got = onnxc.InferenceSession(model.SerializeToString()).run(None, {"x": x})
    assert_close([want], got, rtol, atol)


@pytest.mark.parametrize("shape", [(2, 3), (2, 3, 7), (2, 5, 6, 7), (1, 4, 3, 5, 6)])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_batchnorm_ranks(shape, dtype):
    x = rng.standard_normal(shape).astype(dtype)
    st = stats(shape[1], dtype)
    check(make_node_model("BatchNormalization", {"x": x}, {"epsilon": 1e-3}, initializers=st, opset=15), {"x": x})


@pytest.mark.parametrize("opset", [6, 7, 9, 14, 15])
def test_batchnorm_opsets(opset):
    x = rng.standard_normal((2, 4, 5, 6)).astype(np.float32)
    st = stats(4)
    attrs = {"is_test": 1} if opset < 7 else {}
    m = make_node_model("BatchNormalization", {"x": x}, attrs, initializers=st, opset=opset)
    if opset in (6, 14, 15):
        check(m, {"x": x})
    else:
        check_formula(m, x, formula(x, st))


def test_batchnorm_opset1_consumed_inputs():
    x = rng.standard_normal((2, 4, 5)).astype(np.float32)
    st = stats(4)
    m = make_node_model("BatchNormalization", {"x": x}, {"is_test": 1, "consumed_inputs": [0, 0, 0, 1, 1]},
                        initializers=st, opset=1)
    check_formula(m, x, formula(x, st))


def test_batchnorm_mixed_types_opset15():
    """T (X) float, T1 (scale, B) double, T2 (mean, var) double."""
    x = rng.standard_normal((2, 3, 4)).astype(np.float32)
    st = stats(3, np.float64)
    check(make_node_model("BatchNormalization", {"x": x}, initializers=st, opset=15), {"x": x}, rtol=1e-5)


@pytest.mark.parametrize("opset", [6, 7])
def test_batchnorm_spatial0(opset):
    """spatial=0: one set of statistics per (channel, position)."""
    x = rng.standard_normal((3, 2, 4, 5)).astype(np.float32)
    st = {k: v for k, v in zip("sbmv", [rng.standard_normal((2, 4, 5)).astype(np.float32) for _ in range(3)]
                                         + [(rng.random((2, 4, 5)) + 0.5).astype(np.float32)])}
    attrs = {"spatial": 0, **({"is_test": 1} if opset < 7 else {})}
    m = make_node_model("BatchNormalization", {"x": x}, attrs, initializers=st, opset=opset)
    want = (st["s"] * (x - st["m"]) / np.sqrt(st["v"] + 1e-5) + st["b"]).astype(np.float32)
    check_formula(m, x, want)
    # spatial=0 with per-channel statistics is the ordinary case
    st = stats(2)
    check_formula(make_node_model("BatchNormalization", {"x": x}, attrs, initializers=st, opset=opset), x,
                  formula(x, st))


def test_batchnorm_nan_inf():
    x = rng.standard_normal((2, 3, 4, 4)).astype(np.float32)
    x[0, 0, 0, 0], x[1, 2, 3, 3], x[0, 1, 2, 2] = np.nan, np.inf, -np.inf
    st = stats(3)
    st["v"][1] = 0.0   # var + eps still > 0
    got = check(make_node_model("BatchNormalization", {"x": x}, initializers=st), {"x": x})[0]
    assert np.isnan(got[0, 0, 0, 0]) and np.isinf(got[1, 2, 3, 3])


def test_batchnorm_stats_as_inputs_and_inplace():
    """Statistics fed at run time; X produced by a node (the planner may run in place)."""
    x = rng.standard_normal((2, 3, 5)).astype(np.float32)
    st = stats(3)
    feeds = {"x": x, **st}
    from util import make_model_from_nodes
    nodes = [helper.make_node("Relu", ["x"], ["r"]),
             helper.make_node("BatchNormalization", ["r", "s", "b", "m", "v"], ["y"], epsilon=0.01)]
    check(make_model_from_nodes(nodes, feeds, {}, ["y"], opset=15), feeds)


def test_batchnorm_symbolic_batch():
    st = stats(4)
    x = rng.standard_normal((2, 4, 3, 3)).astype(np.float32)
    m = make_node_model("BatchNormalization", {"x": x}, initializers=st, input_shapes={"x": ["N", 4, 3, 3]})
    typed_outputs(m, [formula(x, st)])
    sess = onnxc.InferenceSession(m.SerializeToString())
    for n in (1, 6, 2, 0):
        x = rng.standard_normal((n, 4, 3, 3)).astype(np.float32)
        np.testing.assert_allclose(sess.run(None, {"x": x})[0], formula(x, st), rtol=1e-5, atol=1e-6)


def _build(m, rank=4):
    for vi in m.graph.output:
        if not vi.type.HasField("tensor_type"):
            vi.CopyFrom(helper.make_tensor_value_info(vi.name, NP2ONNX[np.dtype(np.float32)], [None] * rank))
    return onnxc.InferenceSession(m.SerializeToString())


def test_batchnorm_training_not_supported():
    """Training mode before opset 14 (training_mode=1 is tested in test_ops_lowp_matmul_conv.py)."""
    x = rng.standard_normal((2, 3, 4, 4)).astype(np.float32)
    st = stats(3)
    with pytest.raises(onnxc.NotImplemented, match="is_test"):
        _build(make_node_model("BatchNormalization", {"x": x}, initializers=st, opset=6))
    with pytest.raises(onnxc.NotImplemented, match="training"):
        _build(make_node_model("BatchNormalization", {"x": x}, initializers=st, opset=9, n_outputs=5))


def test_batchnorm_errors():
    x = rng.standard_normal((2, 3, 4, 4)).astype(np.float32)
    st = stats(4)
    with pytest.raises(onnxc.InvalidGraph, match="shape"):
        _build(make_node_model("BatchNormalization", {"x": x}, initializers=st))
