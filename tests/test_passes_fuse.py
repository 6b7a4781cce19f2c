"""Epilogue fusion (bias, residual Add, activation into Conv/Gemm/MatMul): which nodes fuse,
and every optimisation level computes what onnx.reference does."""
import numpy as np
import pytest
from onnx import helper

from passutil import graph_ops, rand, run_levels
from util import make_model_from_nodes

rng = np.random.default_rng(13)
TOL = dict(rtol=1e-4, atol=1e-5)


def conv_model(x, w, tail, extra_inputs=None, inits=None, outputs=("y",), conv_attrs=None, opset=17):
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c"], **(conv_attrs or {"pads": [1, 1, 1, 1]}))] + tail
    feeds = {"x": x, **(extra_inputs or {})}
    init = {"w": w, "b": rand(rng, (w.shape[0],)), **(inits or {})}
    return make_model_from_nodes(nodes, feeds, init, list(outputs), opset=opset), feeds


@pytest.mark.parametrize("act", ["Relu", "Sigmoid", "Tanh", "LeakyRelu", "HardSigmoid", "Softplus"])
def test_conv_activation(act):
    x = rand(rng, (2, 3, 11, 12))
    x[0, 0, 0, :3] = [np.nan, np.inf, -np.inf]
    m, feeds = conv_model(x, rand(rng, (6, 3, 3, 3)), [helper.make_node(act, ["c"], ["y"])])
    assert graph_ops(m) == {"FusedConv": 1}
    assert graph_ops(m, 1) == {"Conv": 1, act: 1}
    run_levels(m, feeds, **TOL)


def test_conv_residual_relu_resnet_block():
    """Conv -> Add(identity shortcut) -> Relu, the shortcut being the conv's own input."""
    x = rand(rng, (1, 8, 10, 10))
    m, feeds = conv_model(x, rand(rng, (8, 8, 3, 3)), [helper.make_node("Add", ["c", "x"], ["s"]),
                                                        helper.make_node("Relu", ["s"], ["y"])])
    assert graph_ops(m) == {"FusedConv": 1}
    run_levels(m, feeds, **TOL)


def test_conv_residual_computed_later_in_file_order():
    """The shortcut's producer comes after the conv: the fused node moves to the Add's place."""
    x = rand(rng, (2, 4, 9, 9))
    m, feeds = conv_model(x, rand(rng, (8, 4, 3, 3)), [
        helper.make_node("Conv", ["x", "w2"], ["d"]),                      # 1x1 downsample branch
        helper.make_node("Add", ["d", "c"], ["s"]),
        helper.make_node("Relu", ["s"], ["y"]),
    ], inits={"w2": rand(rng, (8, 4, 1, 1))})
    ops = graph_ops(m)
    assert ops.get("FusedConv") == 1 and sum(ops.values()) == 2
    run_levels(m, feeds, **TOL)


def test_conv_chunked_residual_in_place_threads():
    """A large im2col conv (pixel chunks, several threads) whose residual dies at the Add."""
    import onnxc
    x = rand(rng, (2, 16, 48, 48))
    m, feeds = conv_model(x, rand(rng, (16, 16, 3, 3)), [
        helper.make_node("Relu", ["x"], ["r"]),
        helper.make_node("Add", ["c", "r"], ["s"]),
        helper.make_node("Clip", ["s", "lo", "hi"], ["y"]),
    ], inits={"lo": np.array(0, np.float32), "hi": np.array(6, np.float32)})
    assert graph_ops(m).get("FusedConv") == 1
    ref = run_levels(m, feeds, **TOL)
    so = onnxc.SessionOptions()
    so.intra_op_num_threads = 2
    got = onnxc.InferenceSession(m.SerializeToString(), so).run(None, feeds)
    np.testing.assert_allclose(got[0], ref[0], **TOL)


def test_depthwise_residual_clip():
    x = rand(rng, (2, 6, 13, 14))
    m, feeds = conv_model(x, rand(rng, (6, 1, 3, 3)), [
        helper.make_node("Add", ["x", "c"], ["s"]),
        helper.make_node("Clip", ["s"], ["y"], min=0.0, max=6.0),
    ], conv_attrs={"group": 6, "pads": [1, 1, 1, 1]}, opset=10)
    assert graph_ops(m) == {"FusedConv": 1}
    run_levels(m, feeds, **TOL)


def test_pointwise_linear_bottleneck_residual_double():
    x, z = rand(rng, (1, 5, 7, 7), np.float64), rand(rng, (1, 5, 7, 7), np.float64)
    m = make_model_from_nodes([
        helper.make_node("Conv", ["x", "w"], ["c"]),
        helper.make_node("Add", ["c", "z"], ["y"]),
    ], {"x": x, "z": z}, {"w": rand(rng, (5, 5, 1, 1), np.float64)}, ["y"])
    assert graph_ops(m) == {"FusedConv": 1}
    run_levels(m, {"x": x, "z": z}, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("kernel", [1, 3])
def test_residual_is_the_conv_input_in_the_arena(kernel):
    """r feeds the conv and is its residual, and dies there: Y must not take r's storage (the
    GEMM still reads r while Y is written)."""
    x = rand(rng, (1, 8, 12, 12))
    m = make_model_from_nodes([
        helper.make_node("Relu", ["x"], ["r"]),
        helper.make_node("Conv", ["r", "w"], ["c"], pads=[kernel // 2] * 4),
        helper.make_node("Add", ["c", "r"], ["y"]),
    ], {"x": x}, {"w": rand(rng, (8, 8, kernel, kernel))}, ["y"])
    assert graph_ops(m) == {"Relu": 1, "FusedConv": 1}
    run_levels(m, {"x": x}, **TOL)


def test_not_fused():
    x = rand(rng, (1, 4, 6, 6))
    w = rand(rng, (4, 4, 3, 3))
    # the conv output is also a graph output
    m, feeds = conv_model(x, w, [helper.make_node("Relu", ["c"], ["y"])], outputs=("y", "c"))
    assert graph_ops(m) == {"Conv": 1, "Relu": 1}
    run_levels(m, feeds, levels=(0, 99), **TOL)
    # a broadcast "residual" is not one
    m, feeds = conv_model(x, w, [helper.make_node("Add", ["c", "z"], ["y"])], extra_inputs={"z": rand(rng, (1, 4, 1, 6))})
    assert graph_ops(m) == {"Conv": 1, "Add": 1}
    run_levels(m, feeds, levels=(0, 99), **TOL)
    # Add after the activation: the activation fuses, the Add stays
    m, feeds = conv_model(x, w, [helper.make_node("Relu", ["c"], ["r"]), helper.make_node("Add", ["r", "x"], ["y"])])
    assert graph_ops(m) == {"FusedConv": 1, "Add": 1}
    run_levels(m, feeds, levels=(0, 99), **TOL)


def test_matmul_bias_residual_activation():
    """A transformer dense layer: [B, S, H] x [H, N] + bias (+ residual), activation."""
    a = rand(rng, (2, 5, 16))
    z = rand(rng, (2, 5, 24))
    m = make_model_from_nodes([
        helper.make_node("MatMul", ["a", "w"], ["p"]),
        helper.make_node("Add", ["bias", "p"], ["q"]),
        helper.make_node("Add", ["q", "z"], ["r"]),
        helper.make_node("Tanh", ["r"], ["y"]),
    ], {"a": a, "z": z}, {"w": rand(rng, (16, 24)), "bias": rand(rng, (24,))}, ["y"])
    assert graph_ops(m) == {"FusedMatMul": 1}
    run_levels(m, {"a": a, "z": z}, **TOL)


def test_matmul_bias_only_batched():
    a = rand(rng, (3, 4, 8))
    m = make_model_from_nodes([
        helper.make_node("MatMul", ["a", "w"], ["p"]),
        helper.make_node("Add", ["p", "bias"], ["y"]),
    ], {"a": a}, {"w": rand(rng, (3, 8, 5)), "bias": rand(rng, (1, 1, 5))}, ["y"])
    assert graph_ops(m) == {"FusedMatMul": 1}
    run_levels(m, {"a": a}, **TOL)


def test_matmul_nonconstant_add_is_residual_only_when_same_shape():
    a, v = rand(rng, (4, 8)), rand(rng, (6,))
    m = make_model_from_nodes([
        helper.make_node("MatMul", ["a", "w"], ["p"]),
        helper.make_node("Add", ["p", "v"], ["y"]),       # fed bias: not a constant
    ], {"a": a, "v": v}, {"w": rand(rng, (8, 6))}, ["y"])
    assert graph_ops(m) == {"MatMul": 1, "Add": 1}
    run_levels(m, {"a": a, "v": v}, levels=(0, 99), **TOL)


@pytest.mark.parametrize("tail", ["act", "res", "both"])
def test_gemm(tail):
    a, z = rand(rng, (6, 10)), rand(rng, (6, 7))
    nodes = [helper.make_node("Gemm", ["a", "w", "c"], ["g"], transB=1, alpha=0.5, beta=2.0)]
    cur = "g"
    if tail in ("res", "both"):
        nodes.append(helper.make_node("Add", ["z", cur], ["s"]))
        cur = "s"
    if tail in ("act", "both"):
        nodes.append(helper.make_node("Relu", [cur], ["t"]))
        cur = "t"
    nodes.append(helper.make_node("Identity", [cur], ["y"]))
    m = make_model_from_nodes(nodes, {"a": a, "z": z}, {"w": rand(rng, (7, 10)), "c": rand(rng, (7,))}, ["y"])
    assert graph_ops(m) == {"FusedGemm": 1, "Identity": 1}
    run_levels(m, {"a": a, "z": z}, **TOL)
