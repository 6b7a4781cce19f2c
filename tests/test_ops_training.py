"""ai.onnx.preview.training Momentum, Adagrad, Adam against onnx.reference."""
import numpy as np
import onnx
import pytest
from onnx import helper

from util import NP2ONNX, assert_close, make_model_from_nodes, run_both

D = "ai.onnx.preview.training"
rng = np.random.default_rng(0)


def _run(op, n, blocks, attrs, t=3, dtype=np.float32, shapes=((3, 4), (5,), ())):
    feeds = {"R": np.array(0.1, dtype), "T": np.array(t, np.int64)}
    names = "XGVH"[:blocks] if op != "Adagrad" else "XGH"
    for b in names:
        for i in range(n):
            a = rng.standard_normal(shapes[i]).astype(dtype)
            feeds[f"{b}{i}"] = np.abs(a) if b == "H" else a
    outs = [f"{b}{i}_new" for b in names if b != "G" for i in range(n)]
    node = helper.make_node(op, list(feeds), outs, domain=D, **attrs)
    m = make_model_from_nodes([node], feeds, {}, outs, opset=17, domain=D)
    # outputs have X's type (onnx.reference's single-tensor Adam returns float64 for float32)
    for o in m.graph.output:
        o.CopyFrom(helper.make_tensor_value_info(o.name, NP2ONNX[np.dtype(dtype)], feeds[o.name[:-4]].shape))
    ref, got = run_both(m, feeds)
    assert_close([np.asarray(r).astype(dtype) for r in ref], got, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("mode", ["standard", "nesterov"])
@pytest.mark.parametrize("t", [0, 4])
@pytest.mark.parametrize("n", [1, 3])
def test_momentum(mode, t, n):
    _run("Momentum", n, 3, {"alpha": 0.9, "beta": 0.3, "mode": mode, "norm_coefficient": 0.01}, t=t)


@pytest.mark.parametrize("t", [0, 5])
@pytest.mark.parametrize("n", [1, 2])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_adagrad(t, n, dtype):
    _run("Adagrad", n, 3, {"decay_factor": 0.1, "epsilon": 1e-5, "norm_coefficient": 0.001}, t=t, dtype=dtype)


@pytest.mark.parametrize("t", [0, 7])
@pytest.mark.parametrize("n", [1, 3])
def test_adam(t, n):
    _run("Adam", n, 4, {"alpha": 0.95, "beta": 0.1, "epsilon": 1e-7, "norm_coefficient": 0.001,
                        "norm_coefficient_post": 0.01}, t=t)


def test_adam_defaults():
    _run("Adam", 1, 4, {}, dtype=np.float64)


def test_momentum_bad_mode():
    import onnxc
    feeds = {"R": np.array(0.1, np.float32), "T": np.array(1, np.int64), "X": np.zeros(2, np.float32),
             "G": np.zeros(2, np.float32), "V": np.zeros(2, np.float32)}
    node = helper.make_node("Momentum", list(feeds), ["X1", "V1"], domain=D, alpha=0.9, beta=0.1,
                            mode="heavy", norm_coefficient=0.0)
    m = make_model_from_nodes([node], feeds, {}, ["X1", "V1"], opset=17, domain=D)
    for o in m.graph.output:
        o.CopyFrom(helper.make_tensor_value_info(o.name, onnx.TensorProto.FLOAT, [2]))
    with pytest.raises(Exception, match="mode"):
        onnxc.InferenceSession(m.SerializeToString())
