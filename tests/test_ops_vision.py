"""Vision operators (Col2Im, CenterCropPad, AffineGrid, GridSample, RoiAlign) vs onnx.reference."""
from __future__ import annotations

import numpy as np
import pytest

import onnx
from onnx.reference import ReferenceEvaluator

import onnxc
from util import check, make_node_model

RNG = np.random.default_rng(7)


def _typed(m, elem=1):
    """Give the graph outputs a type (error tests never reach the reference evaluator)."""
    for vi in m.graph.output:
        vi.CopyFrom(onnx.helper.make_tensor_value_info(vi.name, elem, None))
    return m


def _f32(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


@pytest.mark.parametrize("image,block,attrs", [
    ([5, 5], [1, 5], {}),
    ([6, 7], [2, 3], {"strides": [2, 1], "pads": [1, 0, 1, 2], "dilations": [1, 2]}),
    ([4, 5, 3], [2, 2, 2], {"strides": [1, 2, 1]}),
])
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32])
def test_col2im(image, block, attrs, dtype):
    ns = len(image)
    st = attrs.get("strides", [1] * ns)
    pd = attrs.get("pads", [0] * 2 * ns)
    dl = attrs.get("dilations", [1] * ns)
    nb = [(image[k] + pd[k] + pd[ns + k] - dl[k] * (block[k] - 1) - 1) // st[k] + 1 for k in range(ns)]
    x = (RNG.standard_normal((2, 3 * int(np.prod(block)), int(np.prod(nb)))) * 10).astype(dtype)
    m = make_node_model("Col2Im", {"x": x}, attrs, opset=18,
                        initializers={"i": np.array(image, np.int64), "b": np.array(block, np.int64)})
    check(m, {"x": x})


def test_col2im_bad_block_count():
    x = _f32(1, 4, 7)
    m = make_node_model("Col2Im", {"x": x}, {}, opset=18,
                        initializers={"i": np.array([3, 3], np.int64), "b": np.array([2, 2], np.int64)})
    with pytest.raises(Exception, match="number of blocks"):
        onnxc.InferenceSession(_typed(m).SerializeToString())


@pytest.mark.parametrize("xshape,shape,axes", [
    ((10, 7, 3), [5, 10, 3], None),
    ((10, 7, 3), [9, 8], [0, 1]),
    ((4, 6, 5), [7, 2], [-1, 1]),
    ((3, 4), [3, 4], None),
])
@pytest.mark.parametrize("dtype", [np.float32, np.int64, np.float16, np.uint8])
def test_center_crop_pad(xshape, shape, axes, dtype):
    x = (RNG.standard_normal(xshape) * 10).astype(dtype)
    attrs = {} if axes is None else {"axes": axes}
    m = make_node_model("CenterCropPad", {"x": x}, attrs, opset=18,
                        initializers={"s": np.array(shape, np.int64)})
    check(m, {"x": x})


def test_center_crop_pad_runtime_shape():
    """The target shape as a graph input: one library, several crops/pads, as onnx.reference."""
    x = _f32(4, 5)
    m = _typed(make_node_model("CenterCropPad", {"x": x, "s": np.array([2, 2], np.int64)}, {}, opset=18))
    m.graph.output[0].type.tensor_type.ClearField("shape")
    sess = onnxc.InferenceSession(m.SerializeToString())
    for shape in ([2, 2], [4, 5], [6, 3], [1, 7]):
        feed = {"x": x, "s": np.array(shape, np.int64)}
        got, = sess.run(None, feed)
        want, = ReferenceEvaluator(m).run(None, feed)
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("size", [[2, 3, 5, 6], [1, 1, 1, 4], [2, 2, 3, 4, 5], [1, 1, 1, 1, 2]])
@pytest.mark.parametrize("ac", [0, 1])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_affine_grid(size, ac, dtype):
    nd = len(size) - 2
    theta = RNG.standard_normal((size[0], nd, nd + 1)).astype(dtype)
    m = make_node_model("AffineGrid", {"t": theta}, {"align_corners": ac}, opset=20,
                        initializers={"s": np.array(size, np.int64)})
    if dtype == np.float32:
        check(m, {"t": theta}, rtol=1e-5, atol=1e-5)
        return
    # onnx.reference casts its AffineGrid result to float32 whatever theta's type: compare values
    ref = ReferenceEvaluator(m).run(None, {"t": theta})[0]
    got = onnxc.InferenceSession(_typed(m, onnx.TensorProto.DOUBLE).SerializeToString()).run(None, {"t": theta})[0]
    assert got.dtype == np.float64
    np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-5)


GS16 = {"linear": "bilinear", "nearest": "nearest", "cubic": "bicubic"}


@pytest.mark.parametrize("mode", ["linear", "nearest", "cubic"])
@pytest.mark.parametrize("pad", ["zeros", "border", "reflection"])
@pytest.mark.parametrize("ac", [0, 1])
@pytest.mark.parametrize("opset,xshape,gshape", [
    (16, (2, 3, 5, 6), (2, 4, 7, 2)),
    (20, (2, 3, 5, 6), (2, 4, 7, 2)),
    (20, (1, 2, 4, 3, 5), (1, 3, 2, 4, 3)),
    (22, (2, 2, 6), (2, 5, 1)),
])
def test_grid_sample(mode, pad, ac, opset, xshape, gshape):
    x = _f32(*xshape)
    grid = (RNG.uniform(-1.6, 1.6, gshape)).astype(np.float32)
    attrs = {"mode": mode, "padding_mode": pad, "align_corners": ac}
    m = make_node_model("GridSample", {"x": x, "g": grid}, attrs, opset=max(opset, 20))
    if opset >= 20:
        check(m, {"x": x, "g": grid}, rtol=1e-4, atol=1e-5)
        return
    # onnx.reference knows only the opset-20 mode names; opset 16 computes the same thing
    ref = ReferenceEvaluator(m).run(None, {"x": x, "g": grid})[0]
    m16 = make_node_model("GridSample", {"x": x, "g": grid}, {**attrs, "mode": GS16[mode]}, opset=16)
    got = onnxc.InferenceSession(_typed(m16).SerializeToString()).run(None, {"x": x, "g": grid})[0]
    np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-5)


def test_grid_sample_double_and_exact_points():
    x = RNG.standard_normal((1, 2, 4, 4))
    grid = np.array([[[[-1, -1], [1, 1], [0, 0], [-0.5, 0.5], [0.25, -0.75], [3, -3]]]], np.float64)
    for mode in ("nearest", "linear", "cubic"):
        m = make_node_model("GridSample", {"x": x, "g": grid}, {"mode": mode}, opset=20)
        check(m, {"x": x, "g": grid}, rtol=1e-6, atol=1e-7)


def test_grid_sample_bad_mode():
    m = make_node_model("GridSample", {"x": _f32(1, 1, 2, 2), "g": _f32(1, 1, 1, 2)}, {"mode": "linear"},
                        opset=16)
    with pytest.raises(Exception, match="mode"):
        onnxc.InferenceSession(_typed(m).SerializeToString())


def _rois(n, h, w, scale):
    x0 = RNG.uniform(-2, w / scale, n)
    y0 = RNG.uniform(-2, h / scale, n)
    return np.stack([x0, y0, x0 + RNG.uniform(0, w / scale, n), y0 + RNG.uniform(0, h / scale, n)],
                    1).astype(np.float32)


@pytest.mark.parametrize("opset", [10, 16, 22])
@pytest.mark.parametrize("mode", ["avg", "max"])
@pytest.mark.parametrize("ctm", ["half_pixel", "output_half_pixel"])
@pytest.mark.parametrize("sr,scale", [(0, 1.0), (2, 0.5), (0, 0.25)])
def test_roi_align(opset, mode, ctm, sr, scale):
    x = _f32(2, 3, 10, 12)
    rois = _rois(5, 10, 12, scale)
    bi = np.array([0, 1, 1, 0, 1], np.int64)
    attrs = {"mode": mode, "sampling_ratio": sr, "spatial_scale": scale, "output_height": 3,
             "output_width": 4}
    feeds = {"x": x, "rois": rois, "bi": bi}
    if opset >= 16:
        m = make_node_model("RoiAlign", feeds, {**attrs, "coordinate_transformation_mode": ctm}, opset=opset)
        check(m, feeds, rtol=1e-4, atol=1e-5)
        return
    if ctm == "half_pixel":
        pytest.skip("opset 10 has output_half_pixel only")
    # opset 10 is output_half_pixel (onnxruntime too); onnx.reference applies opset 16's default
    ref = ReferenceEvaluator(make_node_model("RoiAlign", feeds, {**attrs, "coordinate_transformation_mode": ctm},
                                             opset=16)).run(None, feeds)[0]
    m = _typed(make_node_model("RoiAlign", feeds, attrs, opset=10))
    got = onnxc.InferenceSession(m.SerializeToString()).run(None, feeds)[0]
    np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-5)


def test_roi_align_batch_index_out_of_range():
    x = _f32(1, 1, 4, 4)
    rois = np.array([[0, 0, 2, 2]], np.float32)
    m = _typed(make_node_model("RoiAlign", {"x": x, "rois": rois, "bi": np.zeros(1, np.int64)}, {}, opset=16))
    sess = onnxc.InferenceSession(m.SerializeToString())
    sess.run(None, {"x": x, "rois": rois, "bi": np.zeros(1, np.int64)})
    with pytest.raises(Exception, match="(?i)index|range"):
        sess.run(None, {"x": x, "rois": rois, "bi": np.array([1], np.int64)})


def test_roi_align_dynamic_rois_and_float16_grid_sample():
    x = _f32(2, 3, 8, 8)
    rois = _rois(4, 8, 8, 1.0)
    bi = np.array([1, 0, 1, 1], np.int64)
    feeds = {"x": x, "rois": rois, "bi": bi}
    m = make_node_model("RoiAlign", feeds, {"output_height": 2, "output_width": 2}, opset=16,
                        input_shapes={"x": ("N", 3, 8, 8), "rois": ("R", 4), "bi": ("R",)})
    check(m, feeds, rtol=1e-4, atol=1e-5)
    xh = _f32(1, 2, 5, 5).astype(np.float16)
    gh = RNG.uniform(-1.2, 1.2, (1, 3, 4, 2)).astype(np.float16)
    m = make_node_model("GridSample", {"x": xh, "g": gh}, {"mode": "linear"}, opset=22)
    check(m, {"x": xh, "g": gh}, rtol=1e-2, atol=1e-2)
