"""Transpose/Reshape pair elimination: before/after structure, same results."""
import numpy as np
from onnx import helper

from passutil import after, ops, rand, run_levels
from util import make_model_from_nodes

rng = np.random.default_rng(17)


def test_inverse_transposes_vanish():
    x = rand(rng, (2, 3, 4))
    m = make_model_from_nodes([
        helper.make_node("Transpose", ["x"], ["t"], perm=[1, 2, 0]),
        helper.make_node("Transpose", ["t"], ["u"], perm=[2, 0, 1]),
        helper.make_node("Relu", ["u"], ["y"]),
    ], {"x": x}, {}, ["y"])
    out = after(m, 1)
    assert ops(out) == {"Relu": 1}
    assert list(out.graph.node[0].input) == ["x"]
    run_levels(m, {"x": x})


def test_transposes_compose():
    x = rand(rng, (2, 3, 4, 5))
    m = make_model_from_nodes([
        helper.make_node("Transpose", ["x"], ["t"], perm=[0, 2, 3, 1]),
        helper.make_node("Transpose", ["t"], ["u"], perm=[3, 1, 0, 2]),
        helper.make_node("Transpose", ["u"], ["y"], perm=[1, 0, 3, 2]),
    ], {"x": x}, {}, ["y"])
    out = after(m, 1)
    assert ops(out) == {"Transpose": 1}
    run_levels(m, {"x": x})


def test_transpose_pair_to_graph_output_keeps_one():
    x = rand(rng, (3, 4))
    m = make_model_from_nodes([
        helper.make_node("Transpose", ["x"], ["t"], perm=[1, 0]),
        helper.make_node("Transpose", ["t"], ["y"], perm=[1, 0]),
    ], {"x": x}, {}, ["y"])
    assert ops(after(m, 1)) == {"Transpose": 1}
    run_levels(m, {"x": x})


def test_reshape_chain():
    x = rand(rng, (2, 3, 4))
    m = make_model_from_nodes([
        helper.make_node("Reshape", ["x", "s1"], ["a"]),
        helper.make_node("Reshape", ["a", "s2"], ["b"]),
        helper.make_node("Reshape", ["b", "s3"], ["y"]),
    ], {"x": x}, {"s1": np.array([6, 4], np.int64), "s2": np.array([-1], np.int64),
                  "s3": np.array([4, -1], np.int64)}, ["y"])
    assert ops(after(m, 1)) == {"Reshape": 1}
    run_levels(m, {"x": x})


def test_reshape_with_zero_kept():
    x = rand(rng, (2, 3, 4))
    m = make_model_from_nodes([
        helper.make_node("Reshape", ["x", "s1"], ["a"]),
        helper.make_node("Reshape", ["a", "s2"], ["y"]),     # 0 copies a's dim 0 (6), not x's
    ], {"x": x}, {"s1": np.array([6, 4], np.int64), "s2": np.array([0, 2, 2], np.int64)}, ["y"])
    assert ops(after(m, 1)) == {"Reshape": 2}
    run_levels(m, {"x": x})
