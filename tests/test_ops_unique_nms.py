"""Unique and NonMaxSuppression: output sizes the kernel assigns at run time (onnxc.dynamic.assigned).
One library runs on several inputs whose outputs have different sizes; results are compared with
onnx.reference (and with numpy.unique where the reference's unsorted-axis path is wrong)."""
import ml_dtypes
import numpy as np
import onnx
import pytest
from onnx import helper, numpy_helper
from onnx.reference import ReferenceEvaluator

import onnxc
from tests.util import NP2ONNX, assert_close

RNG = np.random.default_rng(7)


def _model(op, inputs, outputs, attrs, opset, input_types, output_types, inits=None, out_ranks=None):
    """inputs: names ('' = omitted); input_types: name -> (onnx elem type, shape with str dims);
    outputs are declared with unknown dims (rank 1 unless out_ranks says)."""
    node = helper.make_node(op, inputs, outputs, **attrs)
    ins = [helper.make_tensor_value_info(n, et, shape) for n, (et, shape) in input_types.items()]
    names = [o for o in outputs if o]
    ranks = out_ranks or [1] * len(names)
    outs = [helper.make_tensor_value_info(n, et, [None] * r) for n, et, r in zip(names, output_types, ranks)]
    g = helper.make_graph([node], "t", ins, outs,
                          [numpy_helper.from_array(a, n) for n, a in (inits or {}).items()])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)],
                          ir_version=8 if opset < 21 else 10)
    onnx.checker.check_model(m)
    return m


# ---------------------------------------------------------------- Unique

OUTS = ["Y", "indices", "inverse_indices", "counts"]


def _unique_model(dtype_onnx, shape, axis=None, sorted_=1, opset=11, outputs=OUTS):
    attrs = {"sorted": sorted_}
    if axis is not None:
        attrs["axis"] = axis
    n_out = len([o for o in outputs if o])
    return _model("Unique", ["X"], outputs, attrs, opset, {"X": (dtype_onnx, shape)},
                  [dtype_onnx] + [onnx.TensorProto.INT64] * (n_out - 1),
                  out_ranks=[1 if axis is None else len(shape)] + [1] * (n_out - 1))


def _expect_unique(x, axis, sorted_):
    """numpy.unique (as onnx.reference) with the unsorted order taken along the right axis."""
    y, idx, inv, cnt = np.unique(x, True, True, True, axis=axis)
    inv = inv.reshape(-1)
    if not sorted_:
        order = np.argsort(idx, kind="stable")
        y = np.take(y, order, axis=0 if axis is None else axis)
        idx, cnt = idx[order], cnt[order]
        inv = np.argsort(order)[inv]
    return [y, idx.astype(np.int64), inv.astype(np.int64), cnt.astype(np.int64)]


def _small_values(dtype, shape, levels=4):
    return RNG.integers(0, levels, size=shape).astype(dtype)


@pytest.mark.parametrize("opset", [11, 28])
@pytest.mark.parametrize("sorted_", [1, 0])
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16, np.int8, np.int16, np.int32, np.int64,
                                   np.uint8, np.uint16, np.uint32, np.uint64, np.bool_])
def test_unique_flat_dtypes(dtype, sorted_, opset):
    m = _unique_model(NP2ONNX[np.dtype(dtype)], ["n"], sorted_=sorted_, opset=opset)
    sess = onnxc.InferenceSession(m.SerializeToString())
    ref = ReferenceEvaluator(m)
    sizes = set()
    for n, levels in ((1, 1), (7, 3), (20, 6), (0, 1), (33, 40), (5, 100)):
        x = _small_values(dtype, (n,), levels)
        if dtype is not np.bool_:
            x = (x - levels // 3).astype(dtype) if np.dtype(dtype).kind != "u" else x
        got = sess.run(None, {"X": x})
        assert_close(ref.run(None, {"X": x}), got)
        sizes.add(got[0].shape[0])
    assert len(sizes) >= (3 if dtype is np.bool_ else 4)   # one library, outputs of several sizes


@pytest.mark.parametrize("sorted_", [1, 0])
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16])
def test_unique_nan_inf_signed_zero(dtype, sorted_):
    m = _unique_model(NP2ONNX[np.dtype(dtype)], [3, 4], sorted_=sorted_)
    sess = onnxc.InferenceSession(m.SerializeToString())
    for x in (np.array([[3, np.nan, 1, -0.0], [0.0, np.nan, 1, -np.inf], [np.inf, 2, np.nan, 0.0]]),
              np.full((3, 4), np.nan), np.array([[0.0, -0.0] * 2] * 3), RNG.normal(size=(3, 4))):
        x = x.astype(dtype)
        got = sess.run(None, {"X": x})
        assert_close(_expect_unique(x, None, sorted_), got)
        if sorted_:
            assert_close(ReferenceEvaluator(m).run(None, {"X": x}), got)
        # -0.0 and 0.0 are one value: the first occurrence's bits are kept
        np.testing.assert_array_equal(np.signbit(got[0]), np.signbit(x.reshape(-1)[got[1]]))


@pytest.mark.parametrize("sorted_", [1, 0])
@pytest.mark.parametrize("shape,axis", [((6,), 0), ((5, 3), 0), ((3, 5), 1), ((3, 5), -1), ((2, 6, 2), 1),
                                        ((2, 3, 6), 2), ((4, 2, 3), 0), ((3, 0), 0), ((0, 3), 0)])
def test_unique_axis(shape, axis, sorted_):
    m = _unique_model(onnx.TensorProto.FLOAT, list(shape), axis=axis, sorted_=sorted_)
    sess = onnxc.InferenceSession(m.SerializeToString())
    for levels in (1, 2, 3):
        x = _small_values(np.float32, shape, levels)
        got = sess.run(None, {"X": x})
        assert_close(_expect_unique(x, axis, sorted_), got)
        if sorted_ or axis in (0, -len(shape)):   # onnx.reference takes unsorted slices along axis 0
            assert_close(ReferenceEvaluator(m).run(None, {"X": x}), got)


def test_unique_axis_nan_slices_never_equal():
    m = _unique_model(onnx.TensorProto.DOUBLE, [6, 2], axis=0)
    x = np.array([[1, np.nan], [0, 2], [1, np.nan], [0, -0.0], [np.nan, 1], [-np.inf, 3]])
    got = onnxc.InferenceSession(m.SerializeToString()).run(None, {"X": x})
    assert_close(ReferenceEvaluator(m).run(None, {"X": x}), got)
    assert got[0].shape == (6, 2)


@pytest.mark.parametrize("sorted_", [1, 0])
def test_unique_symbolic_axis_dim_several_runs(sorted_):
    m = _unique_model(onnx.TensorProto.INT32, [2, "n", 3], axis=1, sorted_=sorted_)
    sess = onnxc.InferenceSession(m.SerializeToString())
    for n in (1, 4, 9, 0, 17):
        x = _small_values(np.int32, (2, n, 3), 2)
        got = sess.run(None, {"X": x})
        assert_close(_expect_unique(x, 1, sorted_), got)


def test_unique_bfloat16():
    m = _unique_model(onnx.TensorProto.BFLOAT16, ["n"], opset=28)
    sess = onnxc.InferenceSession(m.SerializeToString())
    for x in (np.array([2, 1, 1, 3, 4, 3, np.nan, -0.0, 0.0, np.nan, -np.inf], np.float32),
              RNG.normal(size=30).astype(np.float32)):
        got = sess.run(None, {"X": x.astype(ml_dtypes.bfloat16)})
        # numpy cannot sort bfloat16: expect float32's answer on the same values
        want = _expect_unique(x.astype(ml_dtypes.bfloat16).astype(np.float32), None, 1)
        assert got[0].dtype == ml_dtypes.bfloat16
        got[0] = got[0].astype(np.float32)    # (array_equal would find NaN != NaN in bfloat16)
        assert_close(want, got)


@pytest.mark.parametrize("outputs", [["Y"], ["Y", "indices"], ["Y", "", "inverse_indices"],
                                     ["Y", "", "", "counts"]])
def test_unique_optional_outputs(outputs):
    m = _unique_model(onnx.TensorProto.INT64, [12], sorted_=0, outputs=outputs)
    x = _small_values(np.int64, (12,), 5)
    got = onnxc.InferenceSession(m.SerializeToString()).run(None, {"X": x})
    full = _expect_unique(x, None, 0)
    assert_close([full[k] for k, o in enumerate(outputs) if o], got)


@pytest.mark.parametrize("sorted_", [1, 0])
def test_unique_strings(sorted_):
    m = _unique_model(onnx.TensorProto.STRING, ["n"], sorted_=sorted_)
    sess = onnxc.InferenceSession(m.SerializeToString())
    for x in (["b", "a", "ä", "b", "", "ab", "a"], ["z"], [], ["x", "x", "x"]):
        x = np.array(x, dtype=object)
        got = sess.run(None, {"X": x})
        want = ReferenceEvaluator(m).run(None, {"X": x})
        assert got[0].tolist() == list(want[0])
        for g, w in zip(got[1:], want[1:]):
            np.testing.assert_array_equal(g, w)


def test_unique_attribute_errors():
    with pytest.raises(onnxc.InvalidGraph, match=r"Unique.*axis=2 is out of range"):
        onnxc.InferenceSession(_unique_model(onnx.TensorProto.FLOAT, [3, 3], axis=2).SerializeToString())
    with pytest.raises(onnxc.InvalidGraph, match=r"Unique.*sorted=3"):
        onnxc.InferenceSession(_unique_model(onnx.TensorProto.FLOAT, [3], sorted_=3).SerializeToString())


# ---------------------------------------------------------------- NonMaxSuppression

F, I64 = onnx.TensorProto.FLOAT, onnx.TensorProto.INT64


def _nms_model(boxes_shape, scores_shape, cpb=0, opset=11, inputs=("max", "iou", "score"), inits=None):
    names = ["boxes", "scores", "max" if "max" in inputs or "max" in (inits or {}) else "",
             "iou" if "iou" in inputs else "", "score" if "score" in inputs else ""]
    while names[-1] == "":
        names.pop()
    types = {"boxes": (F, boxes_shape), "scores": (F, scores_shape)}
    for n, et in (("max", I64), ("iou", F), ("score", F)):
        if n in inputs:
            types[n] = (et, [1])
    return _model("NonMaxSuppression", names, ["sel"], {"center_point_box": cpb}, opset, types, [I64],
                  inits, out_ranks=[2])


def _random_boxes(b, n, cpb, rng=RNG):
    """Clustered boxes (many overlaps), some flipped corners and degenerate ones; quantised so
    that equal scores and IoUs at thresholds occur."""
    c = rng.integers(0, 4, size=(b, n, 2)).astype(np.float32) * 2.0
    wh = rng.integers(0, 5, size=(b, n, 2)).astype(np.float32)
    if cpb:
        return np.concatenate([c, wh], axis=2)
    y1x1 = c - wh / 2
    y2x2 = c + wh / 2
    boxes = np.concatenate([y1x1, y2x2], axis=2)
    flip = rng.random((b, n)) < 0.3
    boxes[flip] = boxes[flip][:, [2, 3, 0, 1]]
    return boxes


def _nms_feeds(b, c, n, cpb, max_out, iou, score, rng=RNG):
    scores = (rng.integers(0, 6, size=(b, c, n)) / 5).astype(np.float32)   # ties
    feeds = {"boxes": _random_boxes(b, n, cpb, rng), "scores": scores}
    if max_out is not None:
        feeds["max"] = np.array([max_out], np.int64)
    if iou is not None:
        feeds["iou"] = np.array([iou], np.float32)
    if score is not None:
        feeds["score"] = np.array([score], np.float32)
    return feeds


@pytest.mark.parametrize("opset", [10, 11])
@pytest.mark.parametrize("cpb", [0, 1])
def test_nms_random_several_runs(cpb, opset):
    m = _nms_model([2, 9, 4], [2, 3, 9], cpb=cpb, opset=opset)
    sess = onnxc.InferenceSession(m.SerializeToString())
    ref = ReferenceEvaluator(m)
    sizes = set()
    for max_out, iou, score in ((3, 0.5, 0.2), (100, 0.0, 0.0), (1, 0.3, -1.0), (0, 0.5, 0.0),
                                (-4, 0.5, 0.1), (9, 1.0, 0.5), (5, 0.2, np.nan), (5, np.nan, 0.1),
                                (2**62, 0.4, 0.3), (4, 0.25, 0.6)):
        for _ in range(3):
            feeds = _nms_feeds(2, 3, 9, cpb, max_out, iou, score)
            got = sess.run(None, feeds)
            # onnx.reference fails on a negative max_output_boxes_per_class (max(v, 0) is an int)
            want = ref.run(None, feeds) if max_out >= 0 else [np.zeros((0, 3), np.int64)]
            assert_close(want, got)
            sizes.add(got[0].shape[0])
    assert len(sizes) >= 5


def test_nms_symbolic_dims_and_nan():
    m = _nms_model(["b", "n", 4], ["b", "c", "n"])
    sess = onnxc.InferenceSession(m.SerializeToString())
    ref = ReferenceEvaluator(m)
    for b, c, n in ((1, 1, 1), (2, 3, 17), (3, 2, 0), (1, 4, 40), (0, 2, 5)):
        feeds = _nms_feeds(b, c, n, 0, 6, 0.45, 0.1)
        if n:
            feeds["scores"].reshape(-1)[::5] = np.nan     # dropped by the score filter
            feeds["boxes"][..., 1].reshape(-1)[::7] = np.nan
        got = sess.run(None, feeds)
        assert_close(ref.run(None, feeds), got)


def test_nms_constant_max_output_bounds_plan():
    m = _nms_model([1, 50, 4], [1, 2, 50], inputs=("iou", "score"), inits={"max": np.array([2], np.int64)})
    sess = onnxc.InferenceSession(m.SerializeToString())
    ref = ReferenceEvaluator(m)
    for _ in range(4):
        feeds = _nms_feeds(1, 2, 50, 0, None, 0.3, 0.0)
        got = sess.run(None, feeds)
        assert_close(ref.run(None, feeds), got)
        assert got[0].shape[0] <= 4


def test_nms_optional_inputs_absent():
    # no max_output_boxes_per_class: 0, nothing selected (onnx's default)
    m = _nms_model([1, 6, 4], [1, 1, 6], inputs=())
    got = onnxc.InferenceSession(m.SerializeToString()).run(
        None, {k: v for k, v in _nms_feeds(1, 1, 6, 0, None, None, None).items()})
    assert got[0].shape == (0, 3) and got[0].dtype == np.int64
    # no score_threshold: every box is a candidate
    m = _nms_model([2, 8, 4], [2, 2, 8], inputs=("max", "iou"))
    sess = onnxc.InferenceSession(m.SerializeToString())
    for _ in range(3):
        feeds = _nms_feeds(2, 2, 8, 0, 8, 0.5, None)
        assert_close(ReferenceEvaluator(m).run(None, feeds), sess.run(None, feeds))


def test_nms_errors_name_the_node():
    with pytest.raises(onnxc.InvalidGraph, match=r"NonMaxSuppression.*center_point_box=2"):
        onnxc.InferenceSession(_nms_model([1, 6, 4], [1, 1, 6], cpb=2).SerializeToString())
    with pytest.raises(onnxc.InvalidGraph, match=r"NonMaxSuppression.*num_boxes"):
        onnxc.InferenceSession(_nms_model([1, 6, 4], [1, 1, 5]).SerializeToString())
    with pytest.raises(onnxc.InvalidGraph, match=r"NonMaxSuppression.*last dim is 5"):
        onnxc.InferenceSession(_nms_model([1, 6, 5], [1, 1, 6]).SerializeToString())
    # symbolic dims that disagree at run time: the kernel refuses, the session names the node
    sess = onnxc.InferenceSession(_nms_model(["b", "n", 4], ["b", 1, "m"]).SerializeToString())
    feeds = _nms_feeds(1, 1, 6, 0, 3, 0.5, 0.0)
    feeds["scores"] = feeds["scores"][:, :, :5]
    with pytest.raises(onnxc.Error, match=r"NonMaxSuppression"):
        sess.run(None, feeds)
