"""Gather, GatherElements, GatherND against onnx.reference: every axis, negative indices, int32
and int64 indices, storage types (float16, bfloat16, bool, ints), symbolic batch dims, and
out-of-range indices failing the run cleanly."""

import ml_dtypes
import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper
from onnx.reference import ReferenceEvaluator

import onnxc
from util import NP2ONNX, assert_close, poisoned

rng = np.random.default_rng(3)
ONNX_OF = {**NP2ONNX, np.dtype(ml_dtypes.bfloat16): TensorProto.BFLOAT16}
DTYPES = [np.float32, np.float64, np.float16, ml_dtypes.bfloat16, np.int8, np.int32, np.int64, np.uint8,
          np.uint64, np.bool_]


def data(shape, dtype=np.float32):
    dtype = np.dtype(dtype)
    if dtype == np.bool_:
        return rng.integers(0, 2, shape).astype(bool)
    if dtype.kind in "iu":
        return rng.integers(0, 100, shape).astype(dtype)
    return rng.standard_normal(shape).astype(dtype)


def op_model(op, inputs: dict, inits=None, attrs=None, opset=18, n_out=1, shapes=None, order=None):
    """One-node model; inputs are fed, inits are constants; `shapes` overrides declared input
    shapes (strings or None for symbolic dims); `order` names the node's inputs ('' = omitted),
    by default the inputs then the inits."""
    inits = inits or {}
    shapes = shapes or {}
    names = order if order is not None else list(inputs) + list(inits)
    outs = [f"y{i}" for i in range(n_out)]
    node = helper.make_node(op, names, outs, **(attrs or {}))
    ins = [helper.make_tensor_value_info(n, ONNX_OF[a.dtype], shapes.get(n, a.shape)) for n, a in inputs.items()]
    g = helper.make_graph([node], "t", ins, [onnx.ValueInfoProto(name=o) for o in outs],
                          [numpy_helper.from_array(a, n) for n, a in inits.items()])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)], ir_version=8 if opset < 21 else 10)


def session(model, ref, symbolic=False):
    for vi, r in zip(model.graph.output, ref):
        r = np.asarray(r)
        vi.CopyFrom(helper.make_tensor_value_info(vi.name, ONNX_OF[r.dtype], [None] * r.ndim if symbolic else r.shape))
    return onnxc.InferenceSession(model.SerializeToString())


def check(model, feeds, symbolic=False, more=(), rtol=1e-6, atol=1e-7):
    """Run the reference and onnxc on feeds (and on each feeds dict in `more`, same session)."""
    sess = None
    for f in [feeds, *more]:
        ref = ReferenceEvaluator(model).run(None, f)
        if sess is None:
            sess = session(model, ref, symbolic)
        with poisoned():
            got = sess.run(None, f)
        assert_close(ref, got, rtol, atol)
    return sess


# ---- Gather ---------------------------------------------------------------------------------
@pytest.mark.parametrize("axis", [0, 1, 2, -1, -3])
@pytest.mark.parametrize("itype", [np.int64, np.int32])
def test_gather_axes(axis, itype):
    x = data((4, 5, 6))
    d = x.shape[axis]
    i = rng.integers(-d, d, (2, 3)).astype(itype)
    check(op_model("Gather", {"x": x, "i": i}, attrs={"axis": axis}), {"x": x, "i": i})


@pytest.mark.parametrize("dtype", DTYPES)
def test_gather_dtypes(dtype):
    x = data((5, 4), dtype)
    i = np.array([4, -5, 0, 2], np.int64)
    check(op_model("Gather", {"x": x, "i": i}, attrs={"axis": 0}), {"x": x, "i": i})


@pytest.mark.parametrize("opset", [1, 11, 13])
def test_gather_opsets_scalar_index(opset):
    x = data((3, 4))
    i = np.array(-1, np.int64)
    check(op_model("Gather", {"x": x, "i": i}, attrs={"axis": 1}, opset=opset), {"x": x, "i": i})


def test_gather_symbolic_batch():
    x, i = data((2, 7)), np.array([[6, 0]], np.int64)
    m = op_model("Gather", {"x": x, "i": i}, attrs={"axis": 1}, shapes={"x": ["N", 7], "i": ["B", 2]})
    x2, i2 = data((5, 7)), rng.integers(-7, 7, (3, 2)).astype(np.int64)
    check(m, {"x": x, "i": i}, symbolic=True, more=[{"x": x2, "i": i2}])


def test_gather_empty():
    x, i = data((3, 4)), np.zeros((0,), np.int64)
    check(op_model("Gather", {"x": x, "i": i}, attrs={"axis": 1}), {"x": x, "i": i})


@pytest.mark.parametrize("bad", [3, -4, 1 << 40, -(1 << 62)])
def test_gather_out_of_range_fails(bad):
    x, i = data((3, 4)), np.array([0, bad], np.int64)
    m = op_model("Gather", {"x": x, "i": i})
    m.graph.output[0].CopyFrom(helper.make_tensor_value_info("y0", TensorProto.FLOAT, (2, 4)))
    sess = onnxc.InferenceSession(m.SerializeToString())
    with pytest.raises(onnxc.InvalidArgument, match=r"node 0 \(Gather.*index input is out of range"):
        sess.run(None, {"x": x, "i": i})


# ---- GatherElements -------------------------------------------------------------------------
@pytest.mark.parametrize("axis", [0, 1, 2])
@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.int64, np.bool_])
def test_gather_elements(axis, dtype):
    x = data((4, 5, 3), dtype)
    shape = list(x.shape)
    shape[axis] = 6
    d = x.shape[axis]
    i = rng.integers(-d, d, shape).astype(np.int64)
    check(op_model("GatherElements", {"x": x, "i": i}, attrs={"axis": axis}, opset=13), {"x": x, "i": i})


def test_gather_elements_negative_axis():
    # onnx.reference mishandles a negative axis here: compare with the positive one
    x, i = data((3, 4)), rng.integers(-4, 4, (3, 6)).astype(np.int64)
    outs = []
    for axis in (1, -1):
        m = op_model("GatherElements", {"x": x, "i": i}, attrs={"axis": axis}, opset=13)
        m.graph.output[0].CopyFrom(helper.make_tensor_value_info("y0", TensorProto.FLOAT, (3, 6)))
        outs.append(onnxc.InferenceSession(m.SerializeToString()).run(None, {"x": x, "i": i})[0])
    np.testing.assert_array_equal(outs[0], np.take_along_axis(x, np.where(i < 0, i + 4, i), 1))
    np.testing.assert_array_equal(outs[0], outs[1])


def test_gather_elements_symbolic():
    x, i = data((2, 5)), rng.integers(-5, 5, (2, 3)).astype(np.int32)
    m = op_model("GatherElements", {"x": x, "i": i}, attrs={"axis": 1}, shapes={"x": ["N", 5], "i": ["N", 3]})
    x2, i2 = data((4, 5)), rng.integers(-5, 5, (4, 3)).astype(np.int32)
    check(m, {"x": x, "i": i}, symbolic=True, more=[{"x": x2, "i": i2}])


def test_gather_elements_out_of_range_fails():
    x, i = data((2, 3)), np.array([[0, 3]], np.int64)
    m = op_model("GatherElements", {"x": x, "i": i}, attrs={"axis": 1}, opset=13)
    m.graph.output[0].CopyFrom(helper.make_tensor_value_info("y0", TensorProto.FLOAT, (1, 2)))
    with pytest.raises(onnxc.InvalidArgument):
        onnxc.InferenceSession(m.SerializeToString()).run(None, {"x": x, "i": i})


# ---- GatherND -------------------------------------------------------------------------------
@pytest.mark.parametrize("b,ishape", [(0, (3, 1)), (0, (2, 2)), (0, (2, 3)), (0, (4, 2, 3)), (1, (4, 2)),
                                      (1, (4, 3, 1)), (2, (4, 3, 1)), (1, (4, 2, 2))])
@pytest.mark.parametrize("dtype", [np.float32, ml_dtypes.bfloat16, np.int32])
def test_gather_nd(b, ishape, dtype):
    x = data((4, 3, 5), dtype)
    k = ishape[-1]
    i = np.stack([rng.integers(-x.shape[b + t], x.shape[b + t], ishape[:-1]) for t in range(k)], -1).astype(np.int64)
    check(op_model("GatherND", {"x": x, "i": i}, attrs={"batch_dims": b}, opset=13), {"x": x, "i": i})


def test_gather_nd_symbolic_batch():
    x, i = data((2, 3, 5)), np.array([[[1], [-3]], [[0], [2]]], np.int64)
    m = op_model("GatherND", {"x": x, "i": i}, attrs={"batch_dims": 1}, opset=13,
                 shapes={"x": ["N", 3, 5], "i": ["N", 2, 1]})
    x2, i2 = data((3, 3, 5)), rng.integers(-3, 3, (3, 2, 1)).astype(np.int64)
    check(m, {"x": x, "i": i}, symbolic=True, more=[{"x": x2, "i": i2}])


def test_gather_nd_out_of_range_fails():
    x, i = data((2, 3)), np.array([[1, 3]], np.int64)
    m = op_model("GatherND", {"x": x, "i": i}, opset=13)
    m.graph.output[0].CopyFrom(helper.make_tensor_value_info("y0", TensorProto.FLOAT, (1,)))
    with pytest.raises(onnxc.InvalidArgument):
        onnxc.InferenceSession(m.SerializeToString()).run(None, {"x": x, "i": i})


def test_gather_bad_index_type_is_an_error():
    x, i = data((2, 3)), np.array([1.0], np.float32)
    m = op_model("Gather", {"x": x, "i": i})
    m.graph.output[0].CopyFrom(helper.make_tensor_value_info("y0", TensorProto.FLOAT, (1, 3)))
    with pytest.raises((onnxc.InvalidGraph, onnxc.InvalidArgument, onnxc.Fail)):
        onnxc.InferenceSession(m.SerializeToString())
