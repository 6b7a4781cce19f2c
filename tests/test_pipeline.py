"""End-to-end pipeline properties: deep graphs, odd graph outputs, symbolic dims, clear errors."""
import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

import onnxc
from onnxc import compiler, loader


def model(nodes, inputs, outputs, inits=(), opset=17):
    return helper.make_model(helper.make_graph(nodes, "g", inputs, outputs, list(inits)),
                             opset_imports=[helper.make_opsetid("", opset)])


def vi(name, shape, et=TensorProto.FLOAT):
    return helper.make_tensor_value_info(name, et, shape)


def test_deep_graph_does_not_recurse():
    n = 5000
    nodes = [helper.make_node("Relu" if i % 2 else "Neg", [f"t{i}"], [f"t{i + 1}"]) for i in range(n)]
    m = model(nodes, [vi("t0", [2])], [vi(f"t{n}", [2])])
    c = compiler.compile_model(loader.load(m))
    assert len(c.graph.nodes) == n
    assert f"/* node {n - 1}: Relu */" in c.sources.c


def test_deep_graph_runs():
    n = 300
    nodes = [helper.make_node("Neg", [f"t{i}"], [f"t{i + 1}"]) for i in range(n)]
    m = model(nodes, [vi("t0", ["N", 3])], [vi(f"t{n}", ["N", 3])])
    s = onnxc.InferenceSession(m.SerializeToString())
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    np.testing.assert_array_equal(s.run(None, {"t0": x})[0], x)


def test_input_and_duplicate_outputs_are_copied():
    m = model([helper.make_node("Relu", ["x"], ["y"])], [vi("x", [3])],
              [vi("y", [3]), vi("x", [3]), vi("y", [3])])
    s = onnxc.InferenceSession(m.SerializeToString())
    x = np.array([-1, 0, 2], np.float32)
    y, x2, y2 = s.run(None, {"x": x})
    np.testing.assert_array_equal(y, [0, 0, 2])
    np.testing.assert_array_equal(y2, [0, 0, 2])
    np.testing.assert_array_equal(x2, x)


def test_initializer_output_and_overridable_initializer():
    w = onnx.numpy_helper.from_array(np.array([1, 2, 3], np.float32), "w")
    m = model([helper.make_node("Add", ["x", "w"], ["y"])], [vi("x", [3]), vi("w", [3])],
              [vi("y", [3]), vi("w", [3])], inits=[w])
    s = onnxc.InferenceSession(m.SerializeToString())
    assert [a.name for a in s.get_overridable_initializers()] == ["w"]
    x = np.ones(3, np.float32)
    y, w_out = s.run(None, {"x": x})
    np.testing.assert_array_equal(y, [2, 3, 4])
    np.testing.assert_array_equal(w_out, [1, 2, 3])
    y, _ = s.run(None, {"x": x, "w": np.full(3, 10, np.float32)})
    np.testing.assert_array_equal(y, [11, 11, 11])


def test_unknown_dims_show_as_none_and_bind_at_run_time():
    inp = helper.make_tensor_value_info("x", TensorProto.FLOAT, [None, 2])
    m = model([helper.make_node("Relu", ["x"], ["y"])], [inp], [vi("y", [None, 2])])
    s = onnxc.InferenceSession(m.SerializeToString())
    assert s.get_inputs()[0].shape == [None, 2]
    for n in (1, 5):
        x = -np.ones((n, 2), np.float32)
        assert s.run(None, {"x": x})[0].shape == (n, 2)


def test_unsupported_operator_is_named():
    m = helper.make_model(helper.make_graph([helper.make_node("Frobnicate", ["x"], ["y"], domain="com.example")],
                                            "g", [vi("x", [2])], [vi("y", [2])]),
                          opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("com.example", 3)])
    with pytest.raises(onnxc.NotImplemented, match=r"com\.example\.Frobnicate.*opset 3"):
        onnxc.InferenceSession(m.SerializeToString())


def test_bad_bytes_and_missing_file():
    with pytest.raises(onnxc.InvalidProtobuf):
        onnxc.InferenceSession(b"\x08\x01garbage-not-a-model")
    with pytest.raises(onnxc.NoSuchFile):
        onnxc.InferenceSession("/nonexistent/model.onnx")


def test_opset_out_of_range_is_stated():
    m = model([helper.make_node("Relu", ["x"], ["y"])], [vi("x", [2])], [vi("y", [2])], opset=99)
    with pytest.raises(onnxc.InvalidGraph, match="opset 99"):
        onnxc.InferenceSession(m.SerializeToString())


def test_run_time_index_error_names_the_node():
    g = helper.make_graph([helper.make_node("Gather", ["x", "i"], ["y"], name="pick", axis=0)], "g",
                          [vi("x", [3]), vi("i", [2], TensorProto.INT64)], [vi("y", [2])])
    s = onnxc.InferenceSession(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString())
    x = np.array([1, 2, 3], np.float32)
    np.testing.assert_array_equal(s.run(None, {"x": x, "i": np.array([2, -1])})[0], [3, 3])
    with pytest.raises(onnxc.InvalidArgument, match=r"node 0 \(Gather, name 'pick'\): an index input is out of range"):
        s.run(None, {"x": x, "i": np.array([0, 7])})
