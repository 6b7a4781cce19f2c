"""Identity elimination and dead-node removal: before/after structure, same results."""
import numpy as np
import pytest
from onnx import helper

import onnxc

from passutil import after, ops, rand, run_levels
from util import make_model_from_nodes, typed_outputs

rng = np.random.default_rng(5)


def test_identity_chain_removed():
    x = rand(rng, (3, 4))
    m = make_model_from_nodes([
        helper.make_node("Identity", ["x"], ["a"]),
        helper.make_node("Identity", ["a"], ["b"]),
        helper.make_node("Relu", ["b"], ["y"]),
    ], {"x": x}, {}, ["y"])
    assert ops(m) == {"Identity": 2, "Relu": 1}
    out = after(m, 1)
    assert ops(out) == {"Relu": 1}
    assert list(out.graph.node[0].input) == ["x"]
    assert ops(after(m, 0)) == {"Identity": 2, "Relu": 1}      # level 0: untouched
    run_levels(m, {"x": x})


def test_identity_to_graph_output_kept():
    x = rand(rng, (5,))
    m = make_model_from_nodes([helper.make_node("Relu", ["x"], ["r"]),
                               helper.make_node("Identity", ["r"], ["y"])], {"x": x}, {}, ["y", "r"])
    assert ops(after(m, 99)) == {"Relu": 1, "Identity": 1}
    run_levels(m, {"x": x})


def test_dropout_inference_removed():
    x = rand(rng, (2, 6))
    m = make_model_from_nodes([helper.make_node("Dropout", ["x"], ["d"]),
                               helper.make_node("Tanh", ["d"], ["y"])], {"x": x}, {}, ["y"])
    assert ops(after(m, 1)) == {"Tanh": 1}


def test_dead_nodes_removed():
    x = rand(rng, (4, 4))
    m = make_model_from_nodes([
        helper.make_node("Relu", ["x"], ["dead1"]),
        helper.make_node("Exp", ["dead1"], ["dead2"]),      # feeds nothing that is an output
        helper.make_node("Neg", ["x"], ["y"]),
    ], {"x": x}, {}, ["y"])
    assert ops(after(m, 1)) == {"Neg": 1}
    assert ops(after(m, 0)) == {"Relu": 1, "Exp": 1, "Neg": 1}
    run_levels(m, {"x": x})


def test_node_with_one_live_output_kept():
    x = rand(rng, (4, 6))
    m = make_model_from_nodes([helper.make_node("Split", ["x"], ["a", "b"], axis=1, num_outputs=2),
                               helper.make_node("Relu", ["b"], ["y"])], {"x": x}, {}, ["y"], opset=18)
    assert ops(after(m, 99)) == {"Split": 1, "Relu": 1}
    run_levels(m, {"x": x})


def test_private_domain_rejected():
    x = rand(rng, (2,))
    m = make_model_from_nodes([helper.make_node("Relu", ["x"], ["y"])], {"x": x}, {}, ["y"])
    typed_outputs(m, [x])
    m.opset_import.append(helper.make_opsetid("com.onnxc.internal", 1))
    with pytest.raises(onnxc.InvalidGraph, match="reserves"):
        after(m, 0)
    with pytest.raises(onnxc.InvalidGraph, match="reserves"):
        onnxc.InferenceSession(m.SerializeToString())
