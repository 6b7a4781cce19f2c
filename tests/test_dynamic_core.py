"""Run-time dims (onnxc.dynamic): dims resolved from input data before the run (Reshape's shape
as a graph input) and dims a kernel assigns while it runs (NonZero's count), one library serving
many values, bad data rejected with an error naming the node."""
import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper
from onnx.reference import ReferenceEvaluator

import onnxc


def _model(nodes, inputs, outputs, opset=17):
    g = helper.make_graph(nodes, "g", inputs, outputs)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])


def _reshape_model(allowzero=0):
    return _model([helper.make_node("Reshape", ["x", "s"], ["r"], allowzero=allowzero),
                   helper.make_node("Relu", ["r"], ["y"])],
                  [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 6]),
                   helper.make_tensor_value_info("s", TensorProto.INT64, [3])],
                  [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], opset=14)


@pytest.mark.parametrize("allowzero", [0, 1])
def test_reshape_shape_from_input_many_values(allowzero):
    m = _reshape_model(allowzero)
    sess = onnxc.InferenceSession(m.SerializeToString())
    ref = ReferenceEvaluator(m)
    rng = np.random.default_rng(0)
    for n, shape in [(2, [3, -1, 2]), (4, [0, 2, 3]), (1, [-1, 1, 1]), (5, [5, 3, 2]), (0, [0, 3, 2])]:
        if allowzero and 0 in shape and -1 not in shape and n != 0:
            continue
        x = rng.standard_normal((n, 6)).astype(np.float32)
        feed = {"x": x, "s": np.array(shape, np.int64)}
        got, = sess.run(None, feed)
        want, = ref.run(None, feed)
        assert got.shape == want.shape
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("shape", [[7, -1, 1], [-1, -1, 2], [2, -3, 1], [2 ** 62, 2 ** 62, 4]])
def test_reshape_bad_shape_data_names_node(shape):
    sess = onnxc.InferenceSession(_reshape_model().SerializeToString())
    with pytest.raises(onnxc.InvalidArgument, match=r"node 0 \(Reshape"):
        sess.run(None, {"x": np.zeros((2, 6), np.float32), "s": np.array(shape, np.int64)})


def test_iobinding_resolves_every_run():
    m = _reshape_model()
    sess = onnxc.InferenceSession(m.SerializeToString())
    b = sess.io_binding()
    x = np.arange(12, dtype=np.float32).reshape(2, 6) - 5
    for shape in ([3, 2, 2], [1, 12, 1]):
        b.bind_cpu_input("x", x)
        b.bind_cpu_input("s", np.array(shape, np.int64))
        b.bind_output("y")
        sess.run_with_iobinding(b)
        out = b.copy_outputs_to_cpu()[0]
        np.testing.assert_array_equal(out, np.maximum(x, 0).reshape(shape))


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32, np.bool_, np.float16, np.uint8])
def test_nonzero_counts_vary_per_run(dtype):
    m = _model([helper.make_node("NonZero", ["x"], ["i"]), helper.make_node("Neg", ["i"], ["y"])],
               [helper.make_tensor_value_info("x", onnx.helper.np_dtype_to_tensor_dtype(np.dtype(dtype)),
                                              ["N", 3])],
               [helper.make_tensor_value_info("y", TensorProto.INT64, None)])
    sess = onnxc.InferenceSession(m.SerializeToString())
    ref = ReferenceEvaluator(m)
    rng = np.random.default_rng(1)
    for n in (0, 1, 4, 9):
        x = (rng.random((n, 3)) > 0.5).astype(dtype)
        if dtype in (np.float32, np.float64, np.float16) and n:
            x[0, 0] = np.nan        # NaN is non-zero
        got, = sess.run(None, {"x": x})
        want, = ref.run(None, {"x": x})
        assert got.shape == want.shape
        np.testing.assert_array_equal(got, want)


def test_library_alone_keeps_run_time_dims(tmp_path):
    from onnxc.compiler import build_library
    m = _reshape_model()
    path = build_library(m, cache_dir=tmp_path)
    sess = onnxc.InferenceSession(str(path))
    got, = sess.run(None, {"x": np.ones((2, 6), np.float32), "s": np.array([4, 3, 1], np.int64)})
    assert got.shape == (4, 3, 1)


def test_broadcast_of_symbolic_against_static_dim_is_checked_at_run_time():
    """Add(a[N], b[5]): N may be 5 or 1 at run time (numpy broadcasting: a's stride is 0 then);
    any other N fails cleanly, naming the node, instead of reading past a."""
    m = _model([helper.make_node("Add", ["a", "b"], ["y"])],
               [helper.make_tensor_value_info("a", TensorProto.FLOAT, ["N"]),
                helper.make_tensor_value_info("b", TensorProto.FLOAT, [5])],
               [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    sess = onnxc.InferenceSession(m.SerializeToString())
    b = np.arange(5, dtype=np.float32)
    np.testing.assert_array_equal(sess.run(None, {"a": np.ones(5, np.float32), "b": b})[0], b + 1)
    np.testing.assert_array_equal(sess.run(None, {"a": np.full(1, 7, np.float32), "b": b})[0], b + 7)
    for n in (2, 6):
        with pytest.raises(onnxc.InvalidArgument, match=r"node 0 \(Add"):
            sess.run(None, {"a": np.ones(n, np.float32), "b": b})


def test_dims_from_values_computed_from_inputs():
    """Range's limit computed from a graph input (Cast, Mul, Add): onnxc_resolve runs those nodes
    first; the Reshape after it takes a shape computed by Concat from another input."""
    nodes = [helper.make_node("Cast", ["n"], ["nf"], to=TensorProto.FLOAT),
             helper.make_node("Mul", ["nf", "two"], ["lim"]),
             helper.make_node("Range", ["zero", "lim", "half"], ["r"]),
             helper.make_node("Concat", ["m1", "k"], ["shape"], axis=0),
             helper.make_node("Reshape", ["r", "shape"], ["y"])]
    m = _model(nodes, [helper.make_tensor_value_info("n", TensorProto.INT32, []),
                       helper.make_tensor_value_info("k", TensorProto.INT64, [1])],
               [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    m.graph.initializer.extend([helper.make_tensor("two", TensorProto.FLOAT, [], [2.0]),
                                helper.make_tensor("zero", TensorProto.FLOAT, [], [0.0]),
                                helper.make_tensor("half", TensorProto.FLOAT, [], [0.5]),
                                helper.make_tensor("m1", TensorProto.INT64, [1], [-1])])
    sess = onnxc.InferenceSession(m.SerializeToString())
    ref = ReferenceEvaluator(m)
    for n, k in ((3, 4), (6, 3), (0, 5)):
        feed = {"n": np.array(n, np.int32), "k": np.array([k], np.int64)}
        got, = sess.run(None, feed)
        want, = ref.run(None, feed)
        assert got.shape == want.shape
        np.testing.assert_array_equal(got, want)
    with pytest.raises(onnxc.InvalidArgument, match=r"Reshape"):
        sess.run(None, {"n": np.array(3, np.int32), "k": np.array([5], np.int64)})
