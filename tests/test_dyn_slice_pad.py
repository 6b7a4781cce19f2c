"""Shape inputs fed as graph inputs (onnxc.dynamic): Slice, Pad, Split, TopK, Squeeze, Unsqueeze,
Compress, CenterCropPad, Col2Im, MaxUnpool. One library per model, run with several values and
compared to onnx.reference; bad values raise an onnxc error naming the node, never crash."""
import ml_dtypes
import numpy as np
import onnx
import pytest
from onnx import helper
from onnx.reference import ReferenceEvaluator

import onnxc
from util import NP2ONNX, assert_close, make_node_model

rng = np.random.default_rng(5)
BIG = (1 << 63) - 1


def session(model, n_outputs=1, out_type=None):
    """A session for a model whose outputs are declared by element type only (shapes vary)."""
    for k in range(n_outputs):
        et = out_type[k] if isinstance(out_type, list) else out_type
        model.graph.output[k].CopyFrom(helper.make_tensor_value_info(model.graph.output[k].name, et, None))
    return ReferenceEvaluator(model), onnxc.InferenceSession(model.SerializeToString())


def same(ref, sess, feeds):
    assert_close(ref.run(None, feeds), sess.run(None, feeds), 0, 0)


def bad(sess, feeds, op):
    with pytest.raises(onnxc.Error, match=rf"node \d+ \({op}"):
        sess.run(None, feeds)


def arr(v, dt=np.int64):
    return np.array(v, dt)


def data(shape, dtype=np.float32):
    if dtype == np.bool_:
        return rng.random(shape) > 0.5
    return (rng.standard_normal(shape) * 10).astype(dtype)


# ---- Slice ----------------------------------------------------------------------------------
SLICES = [  # starts, ends, axes, steps
    ([0, 1], [2, 4], [0, 1], [1, 1]),
    ([1, -3], [BIG, -1], [1, 2], [1, 2]),
    ([-100, 100], [100, -100], [2, 0], [1, -1]),
    ([3, 0], [-BIG - 1, 4], [1, 0], [-1, 3]),
    ([-1, BIG], [-BIG - 1, 0], [2, 0], [-2, -1]),
    ([5, 0], [1, 6], [1, 2], [1, BIG]),              # empty; a huge step
    ([0, 0], [3, 6], [-1, -2], [-BIG - 1, 2]),      # step INT64_MIN
]


@pytest.mark.parametrize("opset", [10, 11, 13])
@pytest.mark.parametrize("idx", [np.int64, np.int32])
def test_slice_all_inputs(opset, idx):
    x = data((4, 5, 6))
    feeds0 = {"x": x, "s": arr([0, 0], idx), "e": arr([1, 1], idx), "a": arr([0, 1], idx), "t": arr([1, 1], idx)}
    ref, sess = session(make_node_model("Slice", feeds0, opset=opset), out_type=onnx.TensorProto.FLOAT)
    for s, e, a, t in SLICES:
        if idx == np.int32:
            s, e, t = (np.clip(v, -(1 << 31), (1 << 31) - 1).tolist() for v in (s, e, t))
        same(ref, sess, {"x": x, "s": arr(s, idx), "e": arr(e, idx), "a": arr(a, idx), "t": arr(t, idx)})


@pytest.mark.parametrize("dtype", [np.float64, np.int64, np.int8, np.bool_, np.float16, ml_dtypes.bfloat16])
def test_slice_starts_ends_only(dtype):
    """Axes and steps absent; data of every width."""
    x = data((3, 4), dtype)
    feeds0 = {"x": x, "s": arr([0, 0]), "e": arr([1, 1])}
    ref, sess = session(make_node_model("Slice", feeds0, opset=13), out_type=NP2ONNX[np.dtype(dtype)])
    for s, e in (([0, 1], [3, 4]), ([-2, -3], [BIG, -1]), ([2, 0], [1, 4]), ([-9, 9], [9, -9])):
        feeds = {"x": x, "s": arr(s), "e": arr(e)}
        if dtype == ml_dtypes.bfloat16:   # the reference does not run bfloat16: compare bits
            want = x[s[0]:e[0], s[1]:e[1]]
            got = sess.run(None, feeds)[0]
            assert got.shape == want.shape and (got.view(np.uint16) == want.view(np.uint16)).all()
        else:
            same(ref, sess, feeds)


def test_slice_mixed_constant_axes_and_batch():
    """starts/ends from the caller, axes and steps initializers, a symbolic batch dim."""
    x = data((2, 5, 6))
    m = make_node_model("Slice", {"x": x, "s": arr([1, 0]), "e": arr([4, 6])},
                        initializers={"a": arr([1, -1]), "t": arr([1, 2])}, opset=13,
                        input_shapes={"x": ["N", 5, 6]})
    ref, sess = session(m, out_type=onnx.TensorProto.FLOAT)
    for n in (1, 3):
        xb = data((n, 5, 6))
        for s, e in (([1, 0], [4, 6]), ([-1, -5], [-BIG - 1, BIG]), ([0, 5], [5, 6])):
            same(ref, sess, {"x": xb, "s": arr(s), "e": arr(e)})


def test_slice_bad_values_name_the_node():
    x = data((3, 4))
    feeds0 = {"x": x, "s": arr([0]), "e": arr([2]), "a": arr([0]), "t": arr([1])}
    _, sess = session(make_node_model("Slice", feeds0, opset=13), out_type=onnx.TensorProto.FLOAT)
    for a, t in (([2], [1]), ([-3], [1]), ([0], [0])):
        bad(sess, {**feeds0, "a": arr(a), "t": arr(t)}, "Slice")
    feeds2 = {"x": x, "s": arr([0, 0]), "e": arr([2, 2]), "a": arr([0, -2])}
    _, sess2 = session(make_node_model("Slice", feeds2, opset=13), out_type=onnx.TensorProto.FLOAT)
    bad(sess2, feeds2, "Slice")      # the same axis twice
    assert sess.run(None, feeds0)[0].shape == (2, 4)


# ---- Split ----------------------------------------------------------------------------------
@pytest.mark.parametrize("opset", [13, 18])
@pytest.mark.parametrize("axis", [0, 1, -1])
def test_split_sizes(opset, axis):
    x = data((6, 6, 2)) if axis != -1 else data((3, 2, 6))
    m = make_node_model("Split", {"x": x, "split": arr([2, 2, 2])}, {"axis": axis}, opset=opset, n_outputs=3)
    ref, sess = session(m, 3, onnx.TensorProto.FLOAT)
    for sp in ([1, 2, 3], [0, 6, 0], [6, 0, 0], [2, 2, 2]):
        same(ref, sess, {"x": x, "split": arr(sp)})
    for sp in ([1, 2, 2], [-1, 4, 3], [7, 0, -1]):
        bad(sess, {"x": x, "split": arr(sp)}, "Split")


def test_split_symbolic_dim():
    x = data((5, 3))
    m = make_node_model("Split", {"x": x, "split": arr([2, 3])}, {"axis": 0}, opset=13, n_outputs=2,
                        input_shapes={"x": ["N", 3]})
    ref, sess = session(m, 2, onnx.TensorProto.FLOAT)
    for n, sp in ((5, [2, 3]), (7, [7, 0]), (1, [0, 1])):
        same(ref, sess, {"x": data((n, 3)), "split": arr(sp)})
    bad(sess, {"x": data((4, 3)), "split": arr([2, 3])}, "Split")


# ---- Pad ------------------------------------------------------------------------------------
PADS = [[1, 0, 2, 0], [0, 2, 1, 3], [0, 0, 0, 0], [-1, 1, 0, -2], [3, 5, 4, 7]]


@pytest.mark.parametrize("opset", [11, 13, 18, 19])
@pytest.mark.parametrize("mode", ["constant", "reflect", "edge", "wrap"])
def test_pad_modes(opset, mode):
    if mode == "wrap" and opset < 19:
        pytest.skip("wrap is new in opset 19")
    x = data((3, 4))
    ref, sess = session(make_node_model("Pad", {"x": x, "pads": arr(PADS[0])}, {"mode": mode}, opset=opset),
                        out_type=onnx.TensorProto.FLOAT)
    for p in PADS:
        if mode == "reflect" and max(p) > 2:
            continue    # numpy's reflect of pads > dim - 1 differs from onnx.reference's
        if min(p) < 0:  # onnx.reference refuses negative pads: crop what np.pad gives
            if mode == "constant":
                want = _crop(np.pad(x, [(max(p[0], 0), max(p[2], 0)), (max(p[1], 0), max(p[3], 0))]), p)
                got = sess.run(None, {"x": x, "pads": arr(p)})[0]
                assert got.shape == want.shape and (got == want).all()
            continue
        same(ref, sess, {"x": x, "pads": arr(p)})


def _crop(y, p):
    r = y.ndim
    return y[tuple(slice(max(-p[k], 0), y.shape[k] - max(-p[r + k], 0)) for k in range(r))]


@pytest.mark.parametrize("dtype", [np.float64, np.int32, np.uint8, np.bool_])
def test_pad_constant_value_input(dtype):
    x = data((2, 3, 2), dtype)
    cv = np.array(1 if dtype == np.bool_ else 7, dtype)
    m = make_node_model("Pad", {"x": x, "pads": arr([0] * 6), "cv": cv}, opset=13)
    ref, sess = session(m, out_type=NP2ONNX[np.dtype(dtype)])
    for p in ([1, 0, 2, 0, 1, 1], [0, 0, 0, 2, 0, 3], [0, 0, 0, 0, 0, 0]):
        same(ref, sess, {"x": x, "pads": arr(p), "cv": cv})
    p = [0, -1, 0, 2, 1, 0]
    want = _crop(np.pad(x, [(0, 2), (0, 1), (0, 0)], constant_values=cv), p)
    got = sess.run(None, {"x": x, "pads": arr(p), "cv": cv})[0]
    assert got.shape == want.shape and (got == want).all()


@pytest.mark.parametrize("axes_input", [True, False])
def test_pad_axes(axes_input):
    x = data((2, 3, 4))
    feeds0 = {"x": x, "pads": arr([1, 1, 1, 1])}
    inits = {}
    if axes_input:
        feeds0["axes"] = arr([0, 2])
    else:
        inits["axes"] = arr([-1, 1])
    m = make_node_model("Pad", feeds0, {"mode": "edge"}, opset=18, initializers=inits)
    m.graph.node[0].input[:] = ["x", "pads", "", "axes"]
    ref, sess = session(m, out_type=onnx.TensorProto.FLOAT)
    for p in ([1, 1, 1, 1], [0, 2, 3, 0], [0, 0, 0, 0]):
        feeds = {**feeds0, "pads": arr(p)}
        same(ref, sess, feeds)
        if axes_input:
            same(ref, sess, {**feeds, "axes": arr([-1, 0])})
    if axes_input:
        bad(sess, {**feeds0, "axes": arr([0, 3])}, "Pad")
        bad(sess, {**feeds0, "axes": arr([1, -2])}, "Pad")


def test_pad_bad_values_name_the_node():
    x = data((3, 4))
    _, sess = session(make_node_model("Pad", {"x": x, "pads": arr([0, 0, 0, 0])}, opset=13),
                      out_type=onnx.TensorProto.FLOAT)
    for p in ([-2, 0, -2, 0], [0, -5, 0, 0], [BIG, 0, 0, 0], [1 << 30, 1 << 30, 0, 0]):
        bad(sess, {"x": x, "pads": arr(p)}, "Pad")
    assert sess.run(None, {"x": x, "pads": arr([-1, 0, -2, 0])})[0].shape == (0, 4)
    e = np.zeros((0, 3), np.float32)
    _, sess = session(make_node_model("Pad", {"x": e, "pads": arr([0, 0, 0, 0])}, {"mode": "edge"}, opset=13),
                      out_type=onnx.TensorProto.FLOAT)
    bad(sess, {"x": e, "pads": arr([1, 0, 0, 0])}, "Pad")
    assert sess.run(None, {"x": e, "pads": arr([0, 1, 0, 1])})[0].shape == (0, 5)


# ---- TopK -----------------------------------------------------------------------------------
@pytest.mark.parametrize("opset", [10, 11])
@pytest.mark.parametrize("largest", [1, 0])
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32, np.int64])
def test_topk(opset, largest, dtype):
    if opset == 10 and not largest:
        pytest.skip("largest is new in opset 11")
    x = data((3, 7, 2), dtype)
    if dtype == np.float32:
        x[0, 2, 0], x[1, 3, 1] = np.nan, np.inf
    attrs = {"axis": 1} if opset == 10 else {"axis": 1, "largest": largest}
    m = make_node_model("TopK", {"x": x, "k": arr([2])}, attrs, opset=opset, n_outputs=2)
    ref, sess = session(m, 2, [NP2ONNX[np.dtype(dtype)], onnx.TensorProto.INT64])
    for k in (0, 1, 3, 7):
        same(ref, sess, {"x": x, "k": arr([k])})
    for k in (8, -1):
        bad(sess, {"x": x, "k": arr([k])}, "TopK")


# ---- Squeeze / Unsqueeze --------------------------------------------------------------------
@pytest.mark.parametrize("opset", [13, 21])
def test_squeeze(opset):
    x = data((1, 3, 1, 1))
    ref, sess = session(make_node_model("Squeeze", {"x": x, "axes": arr([0, 2])}, opset=opset),
                        out_type=onnx.TensorProto.FLOAT)
    for ax in ([0, 2], [-1, 0], [3, 2], [2, -4]):
        same(ref, sess, {"x": x, "axes": arr(ax)})
    for ax in ([0, 1], [0, 4], [-5, 0], [2, -2]):
        bad(sess, {"x": x, "axes": arr(ax)}, "Squeeze")


@pytest.mark.parametrize("opset", [13, 21])
@pytest.mark.parametrize("dtype", [np.float32, np.int64, np.bool_])
def test_unsqueeze(opset, dtype):
    x = data((2, 3), dtype)
    ref, sess = session(make_node_model("Unsqueeze", {"x": x, "axes": arr([0, 3])}, opset=opset),
                        out_type=NP2ONNX[np.dtype(dtype)])
    for ax in ([0, 3], [1, 2], [-1, 0], [3, -4], [2, 1]):
        same(ref, sess, {"x": x, "axes": arr(ax)})
    for ax in ([0, 4], [-5, 0], [1, 1], [2, -2]):
        bad(sess, {"x": x, "axes": arr(ax)}, "Unsqueeze")


def test_unsqueeze_symbolic_batch():
    x = data((2, 3))
    m = make_node_model("Unsqueeze", {"x": x, "axes": arr([1])}, opset=13, input_shapes={"x": ["N", 3]})
    ref, sess = session(m, out_type=onnx.TensorProto.FLOAT)
    for n in (1, 4):
        for ax in ([0], [1], [-1]):
            same(ref, sess, {"x": data((n, 3)), "axes": arr(ax)})


# ---- Compress -------------------------------------------------------------------------------
@pytest.mark.parametrize("axis", [0, 1, -1, None])
@pytest.mark.parametrize("dtype", [np.float32, np.int64, np.bool_])
def test_compress(axis, dtype):
    x = data((3, 4), dtype)
    n = 12 if axis is None else x.shape[axis]
    attrs = {} if axis is None else {"axis": axis}
    cond0 = np.ones(n, np.bool_)
    ref, sess = session(make_node_model("Compress", {"x": x, "c": cond0}, attrs, opset=11),
                        out_type=NP2ONNX[np.dtype(dtype)])
    for c in (cond0, ~cond0, rng.random(n) > 0.5, np.arange(n) % 2 == 1):
        same(ref, sess, {"x": x, "c": c})


def test_compress_short_and_long_condition():
    x = data((5, 2))
    ref, sess = session(make_node_model("Compress", {"x": x, "c": np.ones(3, np.bool_)}, {"axis": 0}, opset=11),
                        out_type=onnx.TensorProto.FLOAT)
    same(ref, sess, {"x": x, "c": np.array([0, 1, 1], np.bool_)})
    ref, sess = session(make_node_model("Compress", {"x": x, "c": np.ones(7, np.bool_)}, {"axis": 0}, opset=11),
                        out_type=onnx.TensorProto.FLOAT)
    same(ref, sess, {"x": x, "c": np.array([1, 0, 1, 1, 0, 0, 0], np.bool_)})
    bad(sess, {"x": x, "c": np.array([1, 0, 1, 1, 0, 0, 1], np.bool_)}, "Compress")


# ---- CenterCropPad --------------------------------------------------------------------------
@pytest.mark.parametrize("axes", [None, [0, 2], [-1]])
def test_center_crop_pad(axes):
    x = data((5, 4, 6))
    n = 3 if axes is None else len(axes)
    attrs = {} if axes is None else {"axes": axes}
    ref, sess = session(make_node_model("CenterCropPad", {"x": x, "shape": arr([4] * n)}, attrs, opset=18),
                        out_type=onnx.TensorProto.FLOAT)
    for sh in ([4, 4, 4], [7, 2, 6], [5, 4, 6], [0, 9, 1], [1, 1, 11]):
        same(ref, sess, {"x": x, "shape": arr(sh[:n])})
    bad(sess, {"x": x, "shape": arr([-1, 2, 3][:n])}, "CenterCropPad")


# ---- Col2Im ---------------------------------------------------------------------------------
def test_col2im_2d():
    x = data((2, 4 * 2, 12))      # C = 2 with a 2x2 block, or C = 8 with a 1x1 block
    m = make_node_model("Col2Im", {"x": x, "img": arr([4, 5]), "blk": arr([2, 2])}, opset=18)
    ref, sess = session(m, out_type=onnx.TensorProto.FLOAT)
    for img, blk in (([4, 5], [2, 2]), ([3, 4], [1, 1]), ([5, 4], [2, 2]), ([7, 2], [2, 1])):
        same(ref, sess, {"x": x, "img": arr(img), "blk": arr(blk)})
    for img, blk in (([4, 4], [2, 2]), ([4, 5], [3, 1]), ([4, 5], [0, 2]), ([1, 5], [2, 2]),
                     ([-4, 5], [2, 2]), ([13, 3], [2, 3])):
        bad(sess, {"x": x, "img": arr(img), "blk": arr(blk)}, "Col2Im")


def test_col2im_3d_attrs_and_static_block():
    x = data((1, 2 * 4, 6))
    m = make_node_model("Col2Im", {"x": x, "img": arr([3, 3, 3])}, {"pads": [1, 0, 0, 0, 1, 0],
                        "strides": [1, 2, 1], "dilations": [1, 1, 2]}, opset=18,
                        initializers={"blk": arr([2, 1, 2])})
    ref, sess = session(m, out_type=onnx.TensorProto.FLOAT)
    for img in ([3, 3, 3], [2, 5, 3], [1, 2, 5]):
        same(ref, sess, {"x": x, "img": arr(img)})
    bad(sess, {"x": x, "img": arr([3, 5, 3])}, "Col2Im")


# ---- MaxUnpool ------------------------------------------------------------------------------
def test_maxunpool_output_shape():
    x = data((1, 2, 2, 2))
    ind = np.array([[[[5, 7], [13, 15]], [[1, 2], [8, 11]]]], np.int64)
    m = make_node_model("MaxUnpool", {"x": x, "i": ind, "os": arr([1, 2, 4, 4])},
                        {"kernel_shape": [2, 2], "strides": [2, 2]}, opset=11)
    ref, sess = session(m, out_type=onnx.TensorProto.FLOAT)
    for os_ in ([1, 2, 4, 4], [1, 2, 5, 5], [1, 2, 4, 6], [2, 3, 4, 5]):
        same(ref, sess, {"x": x, "i": ind, "os": arr(os_)})
    bad(sess, {"x": x, "i": ind, "os": arr([1, 2, -4, 4])}, "MaxUnpool")


def test_compile_time_errors_name_the_node():
    x = data((3, 4))
    m = make_node_model("Slice", {"x": x, "s": arr([0, 0]), "e": arr([1])}, opset=13)
    with pytest.raises(onnxc.InvalidGraph, match=r"node 0 \(Slice.*ends"):
        session(m, out_type=onnx.TensorProto.FLOAT)
    m = make_node_model("Split", {"x": x, "split": arr([1, 2, 1])}, opset=13, n_outputs=2)
    with pytest.raises(onnxc.InvalidGraph, match=r"node 0 \(Split.*split"):
        session(m, 2, onnx.TensorProto.FLOAT)
