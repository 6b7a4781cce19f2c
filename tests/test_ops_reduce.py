"""Reduce* against onnx.reference: every opset, axes as attribute or input, keepdims,
noop_with_empty_axes, integer wrap-around, NaN/inf, empty reductions, symbolic batch.
Several reductions share one model (one build) where they can."""

import numpy as np
import onnx
import pytest
from onnx import helper
from onnx.reference import ReferenceEvaluator

import onnxc
from util import assert_close, make_model_from_nodes, make_node_model, typed_outputs, poisoned

rng = np.random.default_rng(4)

OPS = ["Sum", "Mean", "Max", "Min", "Prod", "L1", "L2", "SumSquare", "LogSum", "LogSumExp"]
OPSETS = {op: [1, 11, 13, 18] for op in OPS}
OPSETS["Max"] = OPSETS["Min"] = [1, 11, 12, 13, 18, 20]
OPSETS["Sum"] = [1, 11, 13]


def check(model, feeds, rtol=1e-5, atol=1e-6):
    with np.errstate(all="ignore"):
        ref = ReferenceEvaluator(model).run(None, feeds)
    typed_outputs(model, ref)
    sess = onnxc.InferenceSession(model.SerializeToString())
    with poisoned():
        got = sess.run(None, feeds)
    assert_close(ref, got, rtol, atol)
    return got


def axes_input_since(op):
    return 13 if op == "Sum" else 18


def reduce_model(op, x, configs, opset, input_shapes=None):
    """One model with a Reduce node per (axes, keepdims[, noop]) config; outputs y0, y1, ..."""
    nodes, inits = [], {}
    for i, cfg in enumerate(configs):
        axes, keep = cfg[0], cfg[1]
        attrs = {"keepdims": keep}
        ins = ["x"]
        if len(cfg) > 2:
            attrs["noop_with_empty_axes"] = cfg[2]
        if axes is not None:
            if opset >= axes_input_since(op):
                inits[f"a{i}"] = np.array(axes, np.int64)
                ins.append(f"a{i}")
            else:
                attrs["axes"] = axes
        nodes.append(helper.make_node(f"Reduce{op}", ins, [f"y{i}"], **attrs))
    return make_model_from_nodes(nodes, {"x": x}, inits, [f"y{i}" for i in range(len(configs))], opset,
                                 input_shapes=input_shapes)


def special(shape, dtype=np.float32):
    x = rng.standard_normal(shape).astype(dtype)
    if x.size > 3:
        x.flat[:3] = [np.nan, np.inf, -np.inf]
    return x


CONFIGS = [(None, 1), (None, 0), ([1], 1), ([1], 0), ([-1], 0), ([0, 2], 1), ([0, 2], 0), ([1, 3], 0),
           ([2, 3], 1), ([0, 1, 2, 3], 0), ([3, 1], 1)]


@pytest.mark.parametrize("op,opset", [(op, o) for op in OPS for o in OPSETS[op]])
def test_reduce_float(op, opset):
    x = rng.standard_normal((3, 4, 5, 6)).astype(np.float32)
    if op in ("LogSum",):
        x = np.abs(x) + 0.1
    if op == "Prod":
        x = (x * 0.2 + 1).astype(np.float32)
    check(reduce_model(op, x, CONFIGS, opset), {"x": x})


@pytest.mark.parametrize("op", OPS)
def test_reduce_nan_inf(op):
    x = special((4, 5, 7))
    if op == "LogSum":
        x = np.abs(x)
    x[1, :, 2] = -np.inf
    x[2, 3, :] = np.inf
    check(reduce_model(op, x, [(None, 1), ([0], 0), ([1], 1), ([2], 0), ([0, 2], 0)], 13), {"x": x})


@pytest.mark.parametrize("op", OPS)
def test_reduce_double_wide_lanes(op):
    x = rng.standard_normal((5, 3, 150)).astype(np.float64)
    if op == "LogSum":
        x = np.abs(x)
    check(reduce_model(op, x, [([1], 1), ([0], 0), ([0, 1], 0), ([2], 1)], 13), {"x": x}, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("op", ["Sum", "Mean", "Max", "Min", "Prod", "L1", "L2"])
@pytest.mark.parametrize("dtype", [np.int32, np.int64, np.uint32, np.uint64])
def test_reduce_int(op, dtype):
    hi = 5 if op in ("Prod", "L2") else 1000
    lo = 0 if np.dtype(dtype).kind == "u" else -hi
    x = rng.integers(lo, hi, (3, 4, 5)).astype(dtype)
    check(reduce_model(op, x, [(None, 1), ([1], 0), ([0, 2], 1), ([2], 0)], 13), {"x": x})


@pytest.mark.parametrize("op", ["Sum", "Prod", "L1"])
def test_reduce_int_wraps_like_numpy(op):
    info = np.iinfo(np.int32)
    x = rng.integers(info.min, info.max, (4, 50), endpoint=True).astype(np.int32)
    x[0, 0] = info.min
    check(reduce_model(op, x, [([1], 0), ([0], 1)], 13), {"x": x})


def test_reduce_sum_square_int():
    x = rng.integers(-50, 50, (3, 4)).astype(np.int64)
    check(reduce_model("SumSquare", x, [([1], 0), (None, 1)], 13), {"x": x})


@pytest.mark.parametrize("op", ["Max", "Min"])
@pytest.mark.parametrize("dtype", [np.int8, np.uint8, np.bool_])
def test_reduce_max_min_small_types(op, dtype):
    if dtype == np.bool_:
        x, opset = rng.integers(0, 2, (3, 4, 5)).astype(bool), 20
    else:
        info = np.iinfo(dtype)
        x, opset = rng.integers(info.min, info.max, (3, 4, 5), endpoint=True).astype(dtype), 12
    check(reduce_model(op, x, [(None, 0), ([1], 1), ([0, 2], 0), ([2], 1)], opset), {"x": x})


@pytest.mark.parametrize("op", OPS)
def test_reduce_empty_axis(op):
    """Reducing a dim of size 0 gives each op's identity (Mean: NaN)."""
    x = np.zeros((3, 0, 4), np.float32)
    configs = [([1], 1), ([1], 0), ([0, 1], 0)]
    if op == "Mean":
        configs = [([1], 1)]
    check(reduce_model(op, x, configs, 18 if op != "Sum" else 13), {"x": x})
    # reducing the non-empty axis of an empty tensor yields an empty output
    check(reduce_model(op, x, [([0], 0), ([2], 1)], 18 if op != "Sum" else 13), {"x": x})


@pytest.mark.parametrize("op", OPS)
def test_noop_with_empty_axes(op):
    x = rng.standard_normal((3, 4)).astype(np.float32) + 3
    since = axes_input_since(op)
    m = reduce_model(op, x, [(None, 1, 1), (None, 0, 0), ([], 1, 1), ([], 0, 0)], since)
    if op in ("Sum", "Mean", "Max", "Min", "Prod"):
        check(m, {"x": x})
    else:   # the spec (and onnxruntime): the input passes through unchanged
        with np.errstate(all="ignore"):
            ref = ReferenceEvaluator(m).run(None, {"x": x})
        typed_outputs(m, ref)
        with poisoned():
            got = onnxc.InferenceSession(m.SerializeToString()).run(None, {"x": x})
        np.testing.assert_array_equal(got[0], x)
        np.testing.assert_array_equal(got[2], x)
        assert_close(ref[1::2], got[1::2], 1e-5, 1e-6)


@pytest.mark.parametrize("op", ["Mean", "Sum", "Max", "LogSumExp"])
def test_symbolic_batch(op):
    x = rng.standard_normal((2, 3, 8, 8)).astype(np.float32)
    since = axes_input_since(op)
    configs = [([2, 3], 1), ([0], 0), ([1], 1), (None, 0), ([0, 3], 1)]
    m = reduce_model(op, x, configs, since, input_shapes={"x": ["N", 3, 8, 8]})
    ranks = [4, 3, 4, 0, 4]
    for vi, r in zip(m.graph.output, ranks):
        vi.CopyFrom(helper.make_tensor_value_info(vi.name, onnx.TensorProto.FLOAT, [None] * r))
    sess = onnxc.InferenceSession(m.SerializeToString())
    ref = ReferenceEvaluator(m)
    for n in (1, 3, 8):
        x = rng.standard_normal((n, 3, 8, 8)).astype(np.float32)
        with poisoned():
            got = sess.run(None, {"x": x})
        assert_close(ref.run(None, {"x": x}), got, 1e-5, 1e-5)


def test_large_parallel():
    x = rng.standard_normal((16, 64, 32, 32)).astype(np.float32)
    check(reduce_model("Mean", x, [([2, 3], 1), ([1], 0), ([0], 1)], 13), {"x": x})


def test_errors():
    x = rng.standard_normal((2, 3)).astype(np.float32)
    # axes computed from a graph input: onnxc_resolve computes them first (dynamic.prelude)
    m = make_model_from_nodes([helper.make_node("Abs", ["a"], ["b"]), helper.make_node("ReduceSum", ["x", "b"], ["y0"])],
                              {"x": x, "a": np.array([1], np.int64)}, {}, ["y0"], 13)
    m.graph.output[0].CopyFrom(helper.make_tensor_value_info("y0", onnx.TensorProto.FLOAT, [None, None]))
    sess = onnxc.InferenceSession(m.SerializeToString())
    for a in ([1], [-1], [0]):
        got, = sess.run(None, {"x": x, "a": np.array(a, np.int64)})
        # a float32 sum of n terms is within n eps of the sum of their magnitudes (a sum that
        # cancels to 0.03 differed from numpy's by 1 ulp = 2e-6 of it, in one CI run)
        ax = abs(a[0])
        bound = x.shape[ax] * np.finfo(np.float32).eps * np.abs(x).sum(axis=ax, keepdims=True)
        np.testing.assert_array_less(np.abs(got - x.astype(np.float64).sum(axis=ax, keepdims=True)), bound + 1e-30)
    with pytest.raises(onnxc.InvalidArgument, match=r"ReduceSum"):
        sess.run(None, {"x": x, "a": np.array([5], np.int64)})
    for axes, msg in (([2], "out of range"), ([1, -1], "more than once")):
        m = make_node_model("ReduceMean", {"x": x}, {"axes": axes}, opset=13)
        m.graph.output[0].CopyFrom(helper.make_tensor_value_info("y0", onnx.TensorProto.FLOAT, [None]))
        with pytest.raises(onnxc.InvalidGraph, match=r"node 0 \(ReduceMean.*" + msg):
            onnxc.InferenceSession(m.SerializeToString())
