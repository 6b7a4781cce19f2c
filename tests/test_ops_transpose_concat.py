"""Transpose and Concat against onnx.reference: every opset, dtypes, symbolic batch, empty inputs."""
import itertools

import numpy as np
import onnx
import pytest
from onnx import helper
from onnx.reference import ReferenceEvaluator

import onnxc
from onnxc.ops.transpose import simplify
from util import NP2ONNX, assert_close, make_model_from_nodes, make_node_model, typed_outputs, poisoned

rng = np.random.default_rng(2)


def check(model, feeds):
    ref = ReferenceEvaluator(model).run(None, feeds)
    typed_outputs(model, ref)
    sess = onnxc.InferenceSession(model.SerializeToString())
    with poisoned():
        got = sess.run(None, feeds)
    assert_close(ref, got, 0, 0)
    return got


def session(model, out_dtype, out_rank):
    vi = model.graph.output[0]
    vi.CopyFrom(helper.make_tensor_value_info(vi.name, NP2ONNX[np.dtype(out_dtype)], [None] * out_rank))
    return onnxc.InferenceSession(model.SerializeToString())


def data(shape, dtype=np.float32):
    if dtype == np.bool_:
        return rng.integers(0, 2, shape).astype(bool)
    if np.dtype(dtype).kind in "iu":
        return rng.integers(0, 100, shape).astype(dtype)
    x = rng.standard_normal(shape).astype(dtype)
    if x.size > 3:
        x.flat[:3] = [np.nan, np.inf, -np.inf]
    return x


# ---- Transpose -------------------------------------------------------------------------------
def test_simplify():
    assert simplify([2, 3, 4, 5], [0, 2, 3, 1]) == ([2, 3, 20], [0, 2, 1])
    assert simplify([2, 1, 4], [2, 1, 0]) == ([2, 4], [1, 0])
    assert simplify([2, 3], [0, 1]) == ([6], [0])
    assert simplify([1, 1], [1, 0]) == ([], [])


@pytest.mark.parametrize("opset", [1, 13, 21, 23])
@pytest.mark.parametrize("perm", [None, [1, 0, 2], [0, 2, 1], [2, 0, 1], [1, 2, 0], [2, 1, 0], [0, 1, 2]])
def test_transpose_3d(opset, perm):
    x = data((5, 6, 7))
    check(make_node_model("Transpose", {"x": x}, {"perm": perm} if perm else {}, opset=opset), {"x": x})


@pytest.mark.parametrize("perm", list(itertools.permutations(range(4))))
def test_transpose_4d_all_perms(perm):
    x = data((2, 3, 4, 5))
    check(make_node_model("Transpose", {"x": x}, {"perm": list(perm)}), {"x": x})


@pytest.mark.parametrize("shape", [(37, 70), (64, 64), (1, 50), (33, 1), (3, 130, 45)])
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int8, np.int64, np.bool_, np.uint16])
def test_transpose_tiles_and_dtypes(shape, dtype):
    x = data(shape, dtype)
    check(make_node_model("Transpose", {"x": x}), {"x": x})


def test_transpose_5d_and_scalar_like():
    x = data((2, 1, 3, 4, 2))
    check(make_node_model("Transpose", {"x": x}, {"perm": [4, 2, 0, 3, 1]}), {"x": x})
    x = data((1, 1, 1))
    check(make_node_model("Transpose", {"x": x}), {"x": x})


def test_transpose_large_parallel():
    x = data((8, 64, 56, 56))
    check(make_node_model("Transpose", {"x": x}, {"perm": [0, 2, 3, 1]}), {"x": x})


@pytest.mark.parametrize("perm", [[0, 2, 3, 1], [0, 3, 1, 2], [1, 0, 2, 3], [3, 2, 1, 0]])
def test_transpose_symbolic_batch(perm):
    x = data((2, 3, 4, 5))
    s = session(make_node_model("Transpose", {"x": x}, {"perm": perm}, input_shapes={"x": ["N", 3, 4, 5]}),
                np.float32, 4)
    for n in (1, 2, 7):
        x = data((n, 3, 4, 5))
        with poisoned():
            np.testing.assert_array_equal(s.run(None, {"x": x})[0], x.transpose(perm))


def test_transpose_bad_perm():
    x = data((2, 3))
    m = make_node_model("Transpose", {"x": x}, {"perm": [0, 0]})
    m.graph.output[0].CopyFrom(helper.make_tensor_value_info("y0", onnx.TensorProto.FLOAT, [None, None]))
    with pytest.raises(onnxc.InvalidGraph, match=r"node 0 \(Transpose.*perm"):
        onnxc.InferenceSession(m.SerializeToString())


# ---- Concat ----------------------------------------------------------------------------------
@pytest.mark.parametrize("opset", [4, 11, 13])
@pytest.mark.parametrize("axis", [0, 1, 2, -1, -3])
def test_concat_axes(opset, axis):
    if axis < 0 and opset < 11:
        pytest.skip("negative axis from opset 11")
    base = [2, 3, 4]
    ins = {}
    for i, extra in enumerate((1, 2, 3)):
        shape = list(base)
        shape[axis] = extra
        ins[f"x{i}"] = data(shape)
    check(make_node_model("Concat", ins, {"axis": axis}, opset=opset), ins)


def test_concat_opset1_default_axis():
    ins = {"a": data((2, 3)), "b": data((2, 4))}
    m = make_node_model("Concat", ins, opset=1)
    m.graph.output[0].CopyFrom(helper.make_tensor_value_info("y0", onnx.TensorProto.FLOAT, [2, 7]))
    with poisoned():
        got = onnxc.InferenceSession(m.SerializeToString()).run(None, ins)[0]
    np.testing.assert_array_equal(got, np.concatenate([ins["a"], ins["b"]], 1))


@pytest.mark.parametrize("dtype", [np.float64, np.int64, np.int32, np.uint8, np.bool_])
def test_concat_dtypes(dtype):
    ins = {"a": data((3, 2), dtype), "b": data((3, 5), dtype), "c": data((3, 1), dtype)}
    check(make_node_model("Concat", ins, {"axis": 1}), ins)


def test_concat_single_input_and_initializer():
    a = data((2, 3))
    check(make_node_model("Concat", {"a": a}, {"axis": 0}), {"a": a})
    check(make_node_model("Concat", {"a": a}, {"axis": 1}, initializers={"w": data((2, 2))}), {"a": a})


def test_concat_zero_size_inputs():
    ins = {"a": data((2, 0, 4)), "b": data((2, 3, 4)), "c": data((2, 0, 4))}
    check(make_node_model("Concat", ins, {"axis": 1}), ins)
    ins = {"a": data((0, 4)), "b": data((0, 4))}
    check(make_node_model("Concat", ins, {"axis": 0}), ins)


def test_concat_large_parallel():
    ins = {"a": data((64, 32, 40)), "b": data((64, 16, 40))}
    check(make_node_model("Concat", ins, {"axis": 1}), ins)


@pytest.mark.parametrize("axis", [0, 1, -1])
def test_concat_symbolic_batch(axis):
    a, b = data((2, 3, 4)), data((2, 3, 4))
    m = make_node_model("Concat", {"a": a, "b": b}, {"axis": axis},
                        input_shapes={"a": ["N", 3, 4], "b": ["N", 3, 4]})
    s = session(m, np.float32, 3)
    for n in (1, 3, 6):
        a, b = data((n, 3, 4)), data((n, 3, 4))
        with poisoned():
            np.testing.assert_array_equal(s.run(None, {"a": a, "b": b})[0], np.concatenate([a, b], axis))


def test_concat_symbolic_along_axis():
    a, b = data((2, 3)), data((5, 3))
    m = make_node_model("Concat", {"a": a, "b": b}, {"axis": 0}, input_shapes={"a": ["N", 3], "b": ["M", 3]})
    s = session(m, np.float32, 2)
    for n, k in ((1, 4), (3, 0), (6, 2)):
        a, b = data((n, 3)), data((k, 3))
        with poisoned():
            np.testing.assert_array_equal(s.run(None, {"a": a, "b": b})[0], np.concatenate([a, b], 0))


def test_concat_errors():
    for ins, attrs, msg in (({"a": data((2, 3)), "b": data((3, 3))}, {"axis": 1}, "input 1 has dim 0"),
                            ({"a": data((2, 3)), "b": data((2, 3, 1))}, {"axis": 0}, "rank"),
                            ({"a": data((2, 3)), "b": data((2, 3))}, {"axis": 2}, "out of range")):
        m = make_node_model("Concat", ins, attrs)
        m.graph.output[0].CopyFrom(helper.make_tensor_value_info("y0", onnx.TensorProto.FLOAT, [None]))
        with pytest.raises(onnxc.InvalidGraph, match=r"node 0 \(Concat.*" + msg):
            onnxc.InferenceSession(m.SerializeToString())


def test_concat_in_graph():
    """Concat of two computed tensors and a view, feeding another op."""
    x = data((2, 3, 4))
    nodes = [helper.make_node("Relu", ["x"], ["a"]), helper.make_node("Neg", ["x"], ["b"]),
             helper.make_node("Concat", ["a", "b", "x"], ["c"], axis=2),
             helper.make_node("Transpose", ["c"], ["y0"], perm=[2, 0, 1])]
    check(make_model_from_nodes(nodes, {"x": x}, {}, ["y0"]), {"x": x})
