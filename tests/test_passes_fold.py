"""Constant folding and BatchNormalization folding: before/after structure, same results."""
import numpy as np
from onnx import helper

from passutil import after, ops, rand, run_levels
from util import make_model_from_nodes

rng = np.random.default_rng(7)


def test_constant_subgraph_folded():
    x = rand(rng, (2, 3))
    c1, c2 = rand(rng, (3,)), rand(rng, (3,))
    m = make_model_from_nodes([
        helper.make_node("Mul", ["c1", "c2"], ["p"]),
        helper.make_node("Exp", ["p"], ["e"]),             # foldable once p is
        helper.make_node("Add", ["x", "e"], ["y"]),
    ], {"x": x}, {"c1": c1, "c2": c2}, ["y"])
    out = after(m, 1)
    assert ops(out) == {"Add": 1}
    folded = {t.name for t in out.graph.initializer}
    assert {"p", "e"} <= folded
    assert ops(after(m, 0)) == {"Mul": 1, "Exp": 1, "Add": 1}
    run_levels(m, {"x": x})


def test_shape_arithmetic_folded():
    """A Reshape target computed from constants (as exporters write it) becomes a constant."""
    x = rand(rng, (2, 3, 4))
    m = make_model_from_nodes([
        helper.make_node("Concat", ["a", "b"], ["shape"], axis=0),
        helper.make_node("Reshape", ["x", "shape"], ["y"]),
    ], {"x": x}, {"a": np.array([2], np.int64), "b": np.array([12], np.int64)}, ["y"])
    assert ops(after(m, 1)) == {"Reshape": 1}
    run_levels(m, {"x": x}, levels=(1, 2, 99))   # level 0: a run-time shape, not supported yet


def test_overridable_initializer_not_folded():
    """An initializer that is also a graph input may be fed at run time: not a constant."""
    x = rand(rng, (3,))
    c = rand(rng, (3,))
    m = make_model_from_nodes([helper.make_node("Neg", ["c"], ["n"]),
                               helper.make_node("Add", ["x", "n"], ["y"])], {"x": x}, {"c": c}, ["y"])
    m.graph.input.append(helper.make_tensor_value_info("c", 1, [3]))
    assert ops(after(m, 99)) == {"Neg": 1, "Add": 1}


def test_random_and_large_results_not_folded():
    x = rand(rng, (4,))
    m = make_model_from_nodes([
        helper.make_node("RandomUniformLike", ["c"], ["r"], seed=1.0),
        helper.make_node("Expand", ["c", "big"], ["e"]),   # 4 MiB: stays a run-time op
        helper.make_node("ReduceSum", ["e"], ["s"], keepdims=0),
        helper.make_node("Add", ["x", "r"], ["t"]),
        helper.make_node("Add", ["t", "s"], ["y"]),
    ], {"x": x}, {"c": np.ones(4, np.float32), "big": np.array([1 << 18, 4], np.int64)}, ["y"])
    out = ops(after(m, 99))
    assert out.get("RandomUniformLike") == 1 and out.get("Expand") == 1


def bn_params(c, dtype=np.float32):
    return {"scale": rand(rng, (c,), dtype), "bias": rand(rng, (c,), dtype),
            "mean": rand(rng, (c,), dtype), "var": (rng.random(c) + 0.5).astype(dtype)}


def test_conv_batchnorm_folded():
    x = rand(rng, (2, 3, 9, 9))
    inits = {"w": rand(rng, (8, 3, 3, 3)), "b": rand(rng, (8,)), **bn_params(8)}
    m = make_model_from_nodes([
        helper.make_node("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1]),
        helper.make_node("BatchNormalization", ["c", "scale", "bias", "mean", "var"], ["y"], epsilon=1e-3),
    ], {"x": x}, inits, ["y"])
    out = after(m, 1)
    assert ops(out) == {"Conv": 1}
    assert out.graph.node[0].output[0] == "y"
    run_levels(m, {"x": x}, rtol=1e-4, atol=1e-5)


def test_conv_without_bias_batchnorm_folded():
    x = rand(rng, (1, 4, 6, 6))
    inits = {"w": rand(rng, (4, 1, 3, 3)), **bn_params(4)}
    m = make_model_from_nodes([
        helper.make_node("Conv", ["x", "w"], ["c"], group=4),
        helper.make_node("BatchNormalization", ["c", "scale", "bias", "mean", "var"], ["y"]),
    ], {"x": x}, inits, ["y"])
    assert ops(after(m, 1)) == {"Conv": 1}
    run_levels(m, {"x": x}, rtol=1e-4, atol=1e-5)


def test_gemm_batchnorm_folded():
    for tb in (0, 1):
        a = rand(rng, (5, 6))
        w = rand(rng, (7, 6)) if tb else rand(rng, (6, 7))
        inits = {"w": w, "c": rand(rng, (7,)), **bn_params(7)}
        m = make_model_from_nodes([
            helper.make_node("Gemm", ["a", "w", "c"], ["g"], transB=tb, alpha=0.5, beta=2.0),
            helper.make_node("BatchNormalization", ["g", "scale", "bias", "mean", "var"], ["y"]),
        ], {"a": a}, inits, ["y"])
        assert ops(after(m, 1)) == {"Gemm": 1}
        run_levels(m, {"a": a}, rtol=1e-4, atol=1e-5)


def test_batchnorm_not_folded_when_conv_output_shared():
    x = rand(rng, (1, 2, 5, 5))
    inits = {"w": rand(rng, (3, 2, 1, 1)), **bn_params(3)}
    m = make_model_from_nodes([
        helper.make_node("Conv", ["x", "w"], ["c"]),
        helper.make_node("BatchNormalization", ["c", "scale", "bias", "mean", "var"], ["y"]),
        helper.make_node("Relu", ["c"], ["z"]),
    ], {"x": x}, inits, ["y", "z"])
    assert ops(after(m, 99)) == {"Conv": 1, "BatchNormalization": 1, "Relu": 1}
    run_levels(m, {"x": x}, levels=(0, 99), rtol=1e-4, atol=1e-5)
