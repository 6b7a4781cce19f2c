"""SiLU as exporters write it, x * Sigmoid(x) (passes/fuse_silu.py): which graphs become one Swish
node (after a Conv or MatMul, then its epilogue), which stay, that the fused graph computes the
unfused one's values bit for bit, and every optimisation level computes what onnx.reference does."""
import numpy as np
import pytest
from onnx import helper

import onnxc
from passutil import graph_ops, rand, run_levels
from util import make_model_from_nodes

rng = np.random.default_rng(43)
TOL = dict(rtol=1e-4, atol=1e-5)
N = helper.make_node


def special(x):
    x.flat[:7] = [np.nan, np.inf, -np.inf, 0.0, -0.0, -90.0, 95.0]   # NaN, infinities, a subnormal sigmoid
    return x


def silu_model(producer="none", swap=False, opset=17):
    x = special(rand(rng, (2, 4, 5, 5)) * 4)
    inits = {}
    nodes = []
    src = "x"
    if producer == "conv":
        inits["w"], inits["b"] = rand(rng, (6, 4, 3, 3)) * 0.3, rand(rng, (6,))
        nodes.append(N("Conv", ["x", "w", "b"], ["h"], pads=[1, 1, 1, 1]))
        src = "h"
    elif producer == "depthwise":
        inits["w"], inits["b"] = rand(rng, (4, 1, 3, 3)), rand(rng, (4,))
        nodes.append(N("Conv", ["x", "w", "b"], ["h"], pads=[1, 1, 1, 1], group=4))
        src = "h"
    elif producer == "matmul":
        inits["w"] = rand(rng, (5, 7))
        nodes.append(N("MatMul", ["x", "w"], ["h"]))
        src = "h"
    nodes += [N("Sigmoid", [src], ["s"]), N("Mul", ["s", src] if swap else [src, "s"], ["y"])]
    return make_model_from_nodes(nodes, {"x": x}, inits, ["y"], opset=opset), {"x": x}


@pytest.mark.parametrize("swap", [False, True])
def test_silu_alone_is_one_swish_with_the_unfused_values(swap):
    m, feeds = silu_model(swap=swap)
    assert graph_ops(m) == {"Swish": 1}, graph_ops(m)
    assert graph_ops(m, 1) == {"Sigmoid": 1, "Mul": 1}
    run_levels(m, feeds, levels=(1, 99), **TOL)
    data = m.SerializeToString()
    outs = []
    for lv in (1, 99):
        so = onnxc.SessionOptions()
        so.graph_optimization_level = lv
        outs.append(onnxc.InferenceSession(data, so).run(None, feeds)[0])
    np.testing.assert_array_equal(outs[0], outs[1])
    assert np.signbit(outs[1].flat[4]) and outs[1].flat[5] < 0   # -0 * 0.5; -90 * its subnormal sigmoid


@pytest.mark.parametrize("producer,fused", [("conv", "FusedConv"), ("depthwise", "FusedConv"),
                                            ("matmul", "FusedMatMul")])
def test_silu_becomes_the_producers_epilogue(producer, fused):
    m, feeds = silu_model(producer)
    assert graph_ops(m) == {fused: 1}, graph_ops(m)
    run_levels(m, feeds, levels=(1, 99), **TOL)


@pytest.mark.parametrize("kind", ["gate_of_another_value", "sigmoid_is_output", "sigmoid_read_twice", "mul_of_two_sigmoids"])
def test_silu_near_misses_stay(kind):
    x = special(rand(rng, (3, 8)) * 4)
    feeds = {"x": x}
    outs = ["y"]
    if kind == "gate_of_another_value":     # squeeze-excitation: y * sigmoid(z)
        inits = {"k": rand(rng, (8,))}
        nodes = [N("Mul", ["x", "k"], ["z"]), N("Sigmoid", ["z"], ["s"]), N("Mul", ["x", "s"], ["y"])]
    elif kind == "sigmoid_is_output":
        inits, outs = {}, ["y", "s"]
        nodes = [N("Sigmoid", ["x"], ["s"]), N("Mul", ["x", "s"], ["y"])]
    elif kind == "sigmoid_read_twice":
        inits, outs = {}, ["y", "t"]
        nodes = [N("Sigmoid", ["x"], ["s"]), N("Mul", ["x", "s"], ["y"]), N("Add", ["s", "x"], ["t"])]
    else:                                   # sigmoid(x) * sigmoid(x)
        inits = {}
        nodes = [N("Sigmoid", ["x"], ["s"]), N("Mul", ["s", "s"], ["y"])]
    m = make_model_from_nodes(nodes, feeds, inits, outs)
    assert "Swish" not in graph_ops(m), graph_ops(m)
    run_levels(m, feeds, levels=(1, 99), **TOL)
