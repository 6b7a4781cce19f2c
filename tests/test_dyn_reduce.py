"""Reduce* with axes fed as a graph input: one library per model, run with several axes values
(negative, unsorted, single, all), keepdims 0/1, every op and dtype group, symbolic batch; bad
axes (out of range, duplicates) raise an onnxc error naming the node; a static empty axes input
follows noop_with_empty_axes."""
import numpy as np
import onnx
import pytest
from onnx import helper
from onnx.reference import ReferenceEvaluator

import onnxc
from util import assert_close, make_node_model, typed_outputs

rng = np.random.default_rng(11)
OPS = ["Sum", "Mean", "Max", "Min", "Prod", "L1", "L2", "SumSquare", "LogSum", "LogSumExp"]


def session(op, x, n_axes, keep, opset, **attrs):
    axes0 = np.arange(n_axes, dtype=np.int64)
    m = make_node_model(f"Reduce{op}", {"x": x, "axes": axes0}, {"keepdims": keep, **attrs}, opset=opset)
    ref = ReferenceEvaluator(m)
    typed_outputs(m, ref.run(None, {"x": x, "axes": axes0}))
    return ref, onnxc.InferenceSession(m.SerializeToString())


def run_axes(ref, sess, x, axes_list, rtol=1e-5, atol=1e-6):
    for ax in axes_list:
        feeds = {"x": x, "axes": np.array(ax, np.int64)}
        assert_close(ref.run(None, feeds), sess.run(None, feeds), rtol, atol)


@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("keep", [0, 1])
def test_float_ops(op, keep):
    x = rng.standard_normal((3, 4, 5)).astype(np.float32)
    if op == "LogSum":
        x = np.abs(x) + 0.1
    opset = 13 if op == "Sum" else 18
    ref, sess = session(op, x, 2, keep, opset)
    run_axes(ref, sess, x, [[0, 2], [-1, 1], [2, 0], [1, 2], [0, 1]], rtol=1e-5)
    ref1, sess1 = session(op, x, 1, keep, opset)
    run_axes(ref1, sess1, x, [[0], [1], [-1]], rtol=1e-5)


@pytest.mark.parametrize("dtype", [np.float64, np.int32, np.int64, np.uint8])
@pytest.mark.parametrize("op", ["Sum", "Mean", "Max", "Min", "Prod", "L2"])
def test_dtypes(op, dtype):
    x = (rng.standard_normal((2, 3, 4)) * 5).astype(dtype)
    ref, sess = session(op, x, 2, 0, 18)
    run_axes(ref, sess, x, [[0, 1], [2, -3], [1, 2]])


def test_bool_max_min():
    x = rng.random((2, 3, 4)) > 0.5
    for op in ("Max", "Min"):
        ref, sess = session(op, x, 1, 1, 20)
        run_axes(ref, sess, x, [[0], [1], [2]])


def test_all_axes_and_specials():
    x = rng.standard_normal((2, 3, 4)).astype(np.float32)
    x[0, 1, 2], x[1, 0, 0], x[1, 2, 3] = np.nan, np.inf, -np.inf
    for op in ("Max", "Min", "Sum", "LogSumExp"):
        ref, sess = session(op, x, 3, 1, 18)
        run_axes(ref, sess, x, [[0, 1, 2], [2, 1, 0], [-1, -2, -3]])


def test_size_one_and_empty_dims():
    x = rng.standard_normal((2, 1, 3)).astype(np.float32)
    ref, sess = session("Sum", x, 1, 1, 18)
    run_axes(ref, sess, x, [[0], [1], [2]])
    ref, sess = session("Sum", x, 2, 0, 18)
    run_axes(ref, sess, x, [[0, 1], [1, 2], [0, 2]])
    e = np.zeros((2, 0, 3), np.float32)
    ref, sess = session("Sum", e, 1, 0, 18)
    run_axes(ref, sess, e, [[0], [1], [2]])


def test_symbolic_batch():
    x = rng.standard_normal((3, 4)).astype(np.float32)
    m = make_node_model("ReduceSum", {"x": x, "axes": np.array([1], np.int64)}, {"keepdims": 0}, opset=13,
                        input_shapes={"x": ["N", 4]})
    ref = ReferenceEvaluator(m)
    typed_outputs(m, ref.run(None, {"x": x, "axes": np.array([1], np.int64)}))
    sess = onnxc.InferenceSession(m.SerializeToString())
    for n in (1, 3, 6):
        xb = rng.standard_normal((n, 4)).astype(np.float32)
        for ax in ([0], [1], [-1]):
            f = {"x": xb, "axes": np.array(ax, np.int64)}
            assert_close(ref.run(None, f), sess.run(None, f))


def test_bad_axes_name_the_node():
    x = rng.standard_normal((3, 4, 5)).astype(np.float32)
    _, sess = session("Sum", x, 2, 1, 18)
    for ax in ([0, 3], [-4, 1], [1, 1], [0, -3]):
        with pytest.raises(onnxc.Error, match=r"node 0 \(ReduceSum"):
            sess.run(None, {"x": x, "axes": np.array(ax, np.int64)})
    assert sess.run(None, {"x": x, "axes": np.array([0, 1], np.int64)})[0].shape == (1, 1, 5)


def test_too_many_axes_is_refused_at_compile_time():
    x = rng.standard_normal((3, 4)).astype(np.float32)
    m = make_node_model("ReduceSum", {"x": x, "axes": np.array([0, 1, 0], np.int64)}, {}, opset=18)
    m.graph.output[0].CopyFrom(helper.make_tensor_value_info("y0", onnx.TensorProto.FLOAT, None))
    with pytest.raises(onnxc.InvalidGraph, match=r"node 0 \(ReduceSum.*axes"):
        onnxc.InferenceSession(m.SerializeToString())


@pytest.mark.parametrize("noop", [0, 1])
def test_static_empty_axes_input(noop):
    x = rng.standard_normal((3, 4)).astype(np.float32)
    axes = np.zeros((0,), np.int64)
    m = make_node_model("ReduceSum", {"x": x, "axes": axes}, {"noop_with_empty_axes": noop}, opset=18)
    ref = ReferenceEvaluator(m)
    r = ref.run(None, {"x": x, "axes": axes})
    typed_outputs(m, r)
    got = onnxc.InferenceSession(m.SerializeToString()).run(None, {"x": x, "axes": axes})
    assert_close(r, got)


@pytest.mark.parametrize("op", ["ReduceMax", "ReduceSum", "ReduceMean", "ReduceLogSumExp", "ReduceL2", "ReduceProd"])
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_low_precision_reductions(op, dtype):
    """float16/bfloat16 reduce in float (a float copy in the scratch), rounded once."""
    import ml_dtypes
    from util import make_node_model, typed_outputs
    dt = np.float16 if dtype == "float16" else ml_dtypes.bfloat16
    rng = np.random.default_rng(3)
    for axes, keep in (([1], 1), ([0, 2], 0)):
        x = rng.standard_normal((3, 4, 5)).astype(dt)
        x.flat[3] = np.nan
        m = make_node_model(op, {"x": x}, {"keepdims": keep}, opset=18,
                            initializers={"a": np.array(axes, np.int64)})
        ref = ReferenceEvaluator(m).run(None, {"x": x})
        typed_outputs(m, ref)
        got = onnxc.InferenceSession(m.SerializeToString()).run(None, {"x": x})[0]
        assert got.dtype == ref[0].dtype and got.shape == ref[0].shape
        np.testing.assert_allclose(got.astype(np.float32), ref[0].astype(np.float32), rtol=2e-2, atol=1e-2)
