"""Compile-time known values: shape subgraphs (Shape -> Gather -> Concat -> Reshape) on static
inputs feed operators that need constants; the nodes still run in C."""
import numpy as np
import onnx
from onnx import TensorProto, helper

import onnxc
from onnxc import compiler, loader


def test_shape_subgraph_feeds_reshape():
    nodes = [
        helper.make_node("Shape", ["x"], ["s"]),
        helper.make_node("Gather", ["s", "i0"], ["d0"], axis=0),
        helper.make_node("Unsqueeze", ["d0", "ax"], ["d0u"]),
        helper.make_node("Concat", ["d0u", "minus1"], ["shape"], axis=0),
        helper.make_node("Reshape", ["x", "shape"], ["y"]),
        helper.make_node("Shape", ["y"], ["ys"]),
    ]
    inits = [onnx.numpy_helper.from_array(np.array(0, np.int64), "i0"),
             onnx.numpy_helper.from_array(np.array([0], np.int64), "ax"),
             onnx.numpy_helper.from_array(np.array([-1], np.int64), "minus1")]
    m = helper.make_model(helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 12]),
         helper.make_tensor_value_info("ys", TensorProto.INT64, [2])], inits),
        opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    c = compiler.compile_model(loader.load(m), compiler.Options(optimization_level=0))
    shape = next(v for v in c.graph.values if v.name == "shape")
    np.testing.assert_array_equal(shape.known, [2, -1])
    s = onnxc.InferenceSession(m.SerializeToString())
    x = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    y, ys = s.run(None, {"x": x})
    np.testing.assert_array_equal(y, x.reshape(2, 12))
    np.testing.assert_array_equal(ys, [2, 12])


def test_overridable_initializer_is_never_known():
    nodes = [helper.make_node("Reshape", ["x", "shape"], ["y"])]
    init = onnx.numpy_helper.from_array(np.array([4, 6], np.int64), "shape")
    m = helper.make_model(helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 12]),
                     helper.make_tensor_value_info("shape", TensorProto.INT64, [2])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4, 6])], [init]),
        opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    try:
        onnxc.InferenceSession(m.SerializeToString())
    except onnxc.NotImplemented as e:
        assert "shape" in str(e)


def test_shape_arithmetic_on_symbolic_dims_feeds_reshape():
    """PyTorch-style dynamic reshape: Shape -> Gather/Slice -> arithmetic -> Concat -> Reshape on a
    symbolic batch is resolved symbolically at compile time (known_values.known_dims)."""
    import onnx
    from onnx import TensorProto as T, helper
    from onnx.reference import ReferenceEvaluator
    import onnxc
    i64 = lambda name, vals: helper.make_tensor(name, T.INT64, [len(vals)], vals)  # noqa: E731
    nodes = [helper.make_node("Shape", ["x"], ["s"]),
             helper.make_node("Gather", ["s", "i0"], ["b"], axis=0),
             helper.make_node("Slice", ["s", "one", "two"], ["c"]),
             helper.make_node("Div", ["c", "two"], ["half"]),
             helper.make_node("Mul", ["b", "k2"], ["b2"]),
             helper.make_node("Unsqueeze", ["b2", "zero"], ["b2u"]),
             helper.make_node("Concat", ["b2u", "half", "m1"], ["t"], axis=0),
             helper.make_node("Reshape", ["x", "t"], ["y"])]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", T.FLOAT, ["N", 6, 4])],
                          [helper.make_tensor_value_info("y", T.FLOAT, None)],
                          [helper.make_tensor("i0", T.INT64, [], [0]), helper.make_tensor("k2", T.INT64, [], [2]),
                           i64("zero", [0]), i64("one", [1]),
                           i64("two", [2]), i64("m1", [-1])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    sess = onnxc.InferenceSession(m.SerializeToString())
    assert sess.get_outputs()[0].shape[1:] == [3, 4]   # -1 = 24N / 6N, exactly
    for n in (1, 3, 5):
        x = np.arange(n * 24, dtype=np.float32).reshape(n, 6, 4)
        got, = sess.run(None, {"x": x})
        want, = ReferenceEvaluator(m).run(None, {"x": x})
        assert got.shape == want.shape == (2 * n, 3, 4)
        np.testing.assert_array_equal(got, want)


def test_shape_arithmetic_feeds_expand_constantofshape_range():
    """Position ids and masks as exporters write them: Range(0, S), ConstantOfShape([N, S]) and
    Expand to [N, S] from Shape(x) of a symbolic input."""
    from onnx import TensorProto as T, helper
    from onnx.reference import ReferenceEvaluator
    import onnxc
    nodes = [helper.make_node("Shape", ["x"], ["s"]),
             helper.make_node("Gather", ["s", "i1"], ["S"], axis=0),
             helper.make_node("Range", ["zero", "S", "one"], ["pos"]),
             helper.make_node("Slice", ["s", "z1", "two"], ["ns"]),
             helper.make_node("ConstantOfShape", ["ns"], ["ones"], value=helper.make_tensor("v", T.INT64, [1], [1])),
             helper.make_node("Expand", ["pos", "ns"], ["pe"]),
             helper.make_node("Mul", ["pe", "ones"], ["y"])]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", T.FLOAT, ["N", "S", 4])],
                          [helper.make_tensor_value_info("y", T.INT64, None)],
                          [helper.make_tensor("i1", T.INT64, [], [1]), helper.make_tensor("zero", T.INT64, [], [0]),
                           helper.make_tensor("one", T.INT64, [], [1]), helper.make_tensor("z1", T.INT64, [1], [0]),
                           helper.make_tensor("two", T.INT64, [1], [2])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    sess = onnxc.InferenceSession(m.SerializeToString())
    assert sess.get_outputs()[0].shape == ["N", "S"]
    for n, s in ((1, 3), (2, 5), (3, 1)):
        x = np.zeros((n, s, 4), np.float32)
        got, = sess.run(None, {"x": x})
        want, = ReferenceEvaluator(m).run(None, {"x": x})
        np.testing.assert_array_equal(got, want)
