"""Reshape, Flatten, Squeeze, Unsqueeze, Identity against onnx.reference, every opset."""

import numpy as np
import onnx
import pytest
from onnx import helper
from onnx.reference import ReferenceEvaluator

import onnxc
from util import NP2ONNX, assert_close, make_model_from_nodes, make_node_model, typed_outputs, poisoned

rng = np.random.default_rng(1)


def check(model, feeds, rtol=1e-6, atol=1e-7):
    ref = ReferenceEvaluator(model).run(None, feeds)
    typed_outputs(model, ref)
    sess = onnxc.InferenceSession(model.SerializeToString())
    with poisoned():
        got = sess.run(None, feeds)
    assert_close(ref, got, rtol, atol)
    return got


def session(model, out_dtypes, out_ranks):
    """A session for a model with symbolic dims (outputs declared by type and rank only)."""
    for vi, dt, r in zip(model.graph.output, out_dtypes, out_ranks):
        vi.CopyFrom(helper.make_tensor_value_info(vi.name, NP2ONNX[np.dtype(dt)], [None] * r))
    return onnxc.InferenceSession(model.SerializeToString())


def run(sess, feeds):
    with poisoned():
        return sess.run(None, feeds)


DTYPES = [np.float32, np.float64, np.int64, np.int32, np.uint8, np.bool_]


def data(shape, dtype=np.float32):
    if dtype == np.bool_:
        return rng.integers(0, 2, shape).astype(bool)
    if np.dtype(dtype).kind in "iu":
        return rng.integers(0, 100, shape).astype(dtype)
    return rng.standard_normal(shape).astype(dtype)


# ---- Reshape -------------------------------------------------------------------------------
@pytest.mark.parametrize("opset", [5, 13, 14, 19, 21, 23])
@pytest.mark.parametrize("target", [[0, -1], [-1], [2, -1, 2], [6, 4], [4, 0, 2, 1], [1, 1, 24]])
def test_reshape(opset, target):
    x = data((2, 3, 4))
    check(make_node_model("Reshape", {"x": x}, initializers={"s": np.array(target, np.int64)}, opset=opset),
          {"x": x})


@pytest.mark.parametrize("dtype", DTYPES)
def test_reshape_dtypes(dtype):
    x = data((3, 4), dtype)
    check(make_node_model("Reshape", {"x": x}, initializers={"s": np.array([2, 6], np.int64)}), {"x": x})


@pytest.mark.parametrize("opset", [14, 19, 21])
def test_reshape_allowzero(opset):
    x = data((0, 3, 4))
    m = make_node_model("Reshape", {"x": x}, {"allowzero": 1}, initializers={"s": np.array([3, 0, 4], np.int64)},
                        opset=opset)
    got = check(m, {"x": x})
    assert got[0].shape == (3, 0, 4)
    # allowzero=0: a 0 copies the input dim
    y = data((2, 3, 4))
    check(make_node_model("Reshape", {"x": y}, {"allowzero": 0}, initializers={"s": np.array([0, 0, 4], np.int64)},
                          opset=opset), {"x": y})


def test_reshape_opset1_attribute():
    x = data((2, 3, 4))
    m = make_node_model("Reshape", {"x": x}, {"shape": [4, -1]}, opset=1)
    m.graph.output[0].CopyFrom(helper.make_tensor_value_info("y0", onnx.TensorProto.FLOAT, [4, 6]))
    got = run(onnxc.InferenceSession(m.SerializeToString()), {"x": x})[0]
    np.testing.assert_array_equal(got, x.reshape(4, 6))


@pytest.mark.parametrize("target,expect", [([-1, 12], lambda n: (n, 12)), ([0, -1], lambda n: (n, 12)),
                                           ([0, 3, 2, 2], lambda n: (n, 3, 2, 2)),
                                           ([-1], lambda n: (n * 12,)), ([2, -1, 6], lambda n: (2, n, 6))])
def test_reshape_symbolic_batch(target, expect):
    x = data((2, 3, 4))
    m = make_node_model("Reshape", {"x": x}, initializers={"s": np.array(target, np.int64)},
                        input_shapes={"x": ["N", 3, 4]})
    s = session(m, [np.float32], [len(target)])
    for n in (1, 4, 7):
        if target[0] == 2 and n % 2:
            continue
        x = data((n, 3, 4))
        got = run(s, {"x": x})[0]
        assert got.shape == expect(n)
        np.testing.assert_array_equal(got, x.reshape(expect(n)))


def test_reshape_symbolic_batch_does_not_divide():
    x = data((2, 3, 4))
    m = make_node_model("Reshape", {"x": x}, initializers={"s": np.array([-1, 8], np.int64)},
                        input_shapes={"x": ["N", 3, 4]})
    s = session(m, [np.float32], [2])
    np.testing.assert_array_equal(run(s, {"x": x})[0], x.reshape(3, 8))
    with pytest.raises(onnxc.Error):
        s.run(None, {"x": data((1, 3, 4))})


def test_reshape_errors():
    x = data((2, 3, 4))
    for target, msg in (([-1, -1], "more than one -1"), ([5, 5], "cannot view input of shape"),
                        ([-1, 5], "do not divide"), ([3, -2], "negative dimension"), ([0, 0, 0, 0], "rank 3")):
        m = make_node_model("Reshape", {"x": x}, initializers={"s": np.array(target, np.int64)})
        m.graph.output[0].CopyFrom(helper.make_tensor_value_info("y0", onnx.TensorProto.FLOAT, [None]))
        with pytest.raises(onnxc.InvalidGraph, match=r"node 0 \(Reshape.*" + msg):
            onnxc.InferenceSession(m.SerializeToString())


def test_reshape_to_the_shape_of_a_run_time_count():
    """Reshape to Shape(NonZero(b)) = [1, count]: the count is known only while the model runs;
    the target stays symbolic and the element counts are checked when it runs."""
    x = data((2, 3, 4))
    nodes = [helper.make_node("NonZero", ["b"], ["nz"]), helper.make_node("Shape", ["nz"], ["s"]),
             helper.make_node("Reshape", ["x", "s"], ["y0"])]
    m = make_model_from_nodes(nodes, {"x": x, "b": np.ones(24, bool)}, {}, ["y0"])
    m.graph.output[0].CopyFrom(helper.make_tensor_value_info("y0", onnx.TensorProto.FLOAT, None))
    sess = onnxc.InferenceSession(m.SerializeToString())
    got, = sess.run(None, {"x": x, "b": np.ones(24, bool)})
    np.testing.assert_array_equal(got, x.reshape(1, 24))
    b = np.ones(24, bool)
    b[3] = False
    with pytest.raises(onnxc.InvalidArgument, match=r"node 2 \(Reshape"):
        sess.run(None, {"x": x, "b": b})


def test_reshape_of_initializer():
    w = data((2, 6))
    x = data((3, 4))
    nodes = [helper.make_node("Reshape", ["w", "s"], ["r"]), helper.make_node("Add", ["x", "r"], ["y0"])]
    m = make_model_from_nodes(nodes, {"x": x}, {"w": w, "s": np.array([3, 4], np.int64)}, ["y0"])
    check(m, {"x": x})


# ---- Flatten -------------------------------------------------------------------------------
@pytest.mark.parametrize("opset", [1, 9, 11, 13, 21, 23])
@pytest.mark.parametrize("axis", [0, 1, 2, 4, -1, -3])
def test_flatten(opset, axis):
    if axis < 0 and opset < 11:
        pytest.skip("negative axis from opset 11")
    x = data((2, 3, 4, 5))
    check(make_node_model("Flatten", {"x": x}, {"axis": axis}, opset=opset), {"x": x})


def test_flatten_default_and_dtype():
    x = data((2, 3, 4), np.int64)
    check(make_node_model("Flatten", {"x": x}), {"x": x})


def test_flatten_symbolic_batch():
    x = data((2, 3, 4, 4))
    s = session(make_node_model("Flatten", {"x": x}, input_shapes={"x": ["N", 3, 4, 4]}), [np.float32], [2])
    for n in (1, 3, 8):
        x = data((n, 3, 4, 4))
        np.testing.assert_array_equal(run(s, {"x": x})[0], x.reshape(n, 48))


# ---- Squeeze / Unsqueeze -------------------------------------------------------------------
def _axes_model(op, x, axes, opset):
    if opset < 13:
        return make_node_model(op, {"x": x}, {"axes": axes} if axes is not None else {}, opset=opset)
    if axes is None:
        return make_node_model(op, {"x": x}, opset=opset)
    return make_node_model(op, {"x": x}, initializers={"axes": np.array(axes, np.int64)}, opset=opset)


@pytest.mark.parametrize("opset", [1, 11, 13, 21, 23])
@pytest.mark.parametrize("axes", [None, [0], [2, 4], [-1], [0, -3]])
def test_squeeze(opset, axes):
    if opset < 11 and axes and min(axes) < 0:
        pytest.skip("negative axes from opset 11")
    x = data((1, 3, 1, 4, 1))
    check(_axes_model("Squeeze", x, axes, opset), {"x": x})


@pytest.mark.parametrize("opset", [1, 11, 13, 21, 23])
@pytest.mark.parametrize("axes", [[0], [1, 3], [-1], [0, 4, 5], [-2, 1]])
def test_unsqueeze(opset, axes):
    if opset < 11 and min(axes) < 0:
        pytest.skip("negative axes from opset 11")
    x = data((3, 4, 2), np.int32)
    check(_axes_model("Unsqueeze", x, axes, opset), {"x": x})


@pytest.mark.parametrize("op,axes,msg", [("Squeeze", [1], "cannot squeeze axis 1"),
                                         ("Unsqueeze", [0, 0], "more than once"),
                                         ("Unsqueeze", [4], "out of range"), ("Squeeze", [-3], "out of range")])
def test_squeeze_errors(op, axes, msg):
    m = _axes_model(op, data((1, 3)), axes, 13)
    m.graph.output[0].CopyFrom(helper.make_tensor_value_info("y0", onnx.TensorProto.FLOAT, [None]))
    with pytest.raises(onnxc.InvalidGraph, match=msg):
        onnxc.InferenceSession(m.SerializeToString())


def test_squeeze_unsqueeze_symbolic_batch():
    x = data((2, 1, 5))
    nodes = [helper.make_node("Squeeze", ["x", "a"], ["s"]), helper.make_node("Unsqueeze", ["s", "b"], ["y0"])]
    m = make_model_from_nodes(nodes, {"x": x}, {"a": np.array([1], np.int64), "b": np.array([0, -1], np.int64)},
                              ["y0"], input_shapes={"x": ["N", 1, 5]})
    s = session(m, [np.float32], [4])
    for n in (1, 2, 9):
        x = data((n, 1, 5))
        np.testing.assert_array_equal(run(s, {"x": x})[0], x.reshape(1, n, 5, 1))


def test_squeeze_symbolic_dim_checked_at_run_time():
    x = data((1, 5))
    m = make_node_model("Squeeze", {"x": x}, initializers={"a": np.array([0], np.int64)},
                        input_shapes={"x": ["N", 5]})
    s = session(m, [np.float32], [1])
    np.testing.assert_array_equal(run(s, {"x": x})[0], x.reshape(5))
    with pytest.raises(onnxc.Error):
        s.run(None, {"x": data((3, 5))})


# ---- Identity and aliasing -------------------------------------------------------------------
@pytest.mark.parametrize("opset", [1, 13, 14, 16, 19, 21])
@pytest.mark.parametrize("dtype", DTYPES)
def test_identity(opset, dtype):
    x = data((3, 5), dtype)
    check(make_node_model("Identity", {"x": x}, opset=opset), {"x": x})


def test_view_chain_in_arena_and_output():
    """Views between computing nodes alias the arena; a view that is a graph output writes there."""
    x = data((2, 3, 4))
    nodes = [helper.make_node("Relu", ["x"], ["a"]),
             helper.make_node("Reshape", ["a", "s"], ["b"]),
             helper.make_node("Flatten", ["b"], ["c"], axis=1),
             helper.make_node("Neg", ["c"], ["d"]),
             helper.make_node("Unsqueeze", ["d", "u"], ["y0"]),
             helper.make_node("Identity", ["b"], ["y1"])]
    m = make_model_from_nodes(nodes, {"x": x}, {"s": np.array([6, 4], np.int64), "u": np.array([0], np.int64)},
                              ["y0", "y1"], opset=13)
    check(m, {"x": x})


def test_view_of_graph_input_feeds_ops():
    x = data((2, 3, 4))
    nodes = [helper.make_node("Reshape", ["x", "s"], ["a"]), helper.make_node("Neg", ["a"], ["y0"]),
             helper.make_node("Flatten", ["x"], ["b"]), helper.make_node("Squeeze", ["b"], ["y1"])]
    check(make_model_from_nodes(nodes, {"x": x}, {"s": np.array([4, 6], np.int64)}, ["y0", "y1"], opset=11),
          {"x": x})


def test_identity_input_to_output_is_copied():
    x = data((4, 4))
    nodes = [helper.make_node("Identity", ["x"], ["y0"]), helper.make_node("Reshape", ["x", "s"], ["y1"])]
    m = make_model_from_nodes(nodes, {"x": x}, {"s": np.array([16], np.int64)}, ["y0", "y1"])
    got = check(m, {"x": x})
    x[0, 0] = 99   # outputs are not views of the caller's input
    assert got[0][0, 0] != 99 and got[1][0] != 99
