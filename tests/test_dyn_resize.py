"""Resize (opsets 10-19) and Upsample (9) with scales, sizes or roi fed as graph inputs: one
library per model, run with several values (up/down-sampling, identity axes, policies, axes
attribute, antialias, every coordinate transformation, integer types), compared to
onnx.reference; bad values raise an onnxc error naming the node."""
import numpy as np
import pytest
from onnx import helper
from onnx.reference import ReferenceEvaluator

import onnxc
from util import assert_close, make_model_from_nodes, typed_outputs

rng = np.random.default_rng(31)
CTMS = ["half_pixel", "half_pixel_symmetric", "pytorch_half_pixel", "align_corners", "asymmetric"]


def session(op, ins, feeds, attrs, opset, inits=None, input_shapes=None):
    node = helper.make_node(op, ins, ["y0"], **attrs)
    m = make_model_from_nodes([node], feeds, inits or {}, ["y0"], opset, input_shapes=input_shapes)
    ref = ReferenceEvaluator(m)
    typed_outputs(m, ref.run(None, feeds))
    return ref, onnxc.InferenceSession(m.SerializeToString())


def run_all(ref, sess, feeds_list, tol=1e-5):
    for f in feeds_list:
        assert_close(ref.run(None, f), sess.run(None, f), tol, tol)


def f32(*v):
    return np.array(v, np.float32)


def i64(*v):
    return np.array(v, np.int64)


SCALES = [f32(1, 1, 2.0, 1.5), f32(1, 1, 0.6, 0.8), f32(1, 1, 1.0, 3.0), f32(1, 2, 1, 1), f32(1, 1, 1, 1)]


@pytest.mark.parametrize("mode", ["nearest", "linear", "cubic"])
@pytest.mark.parametrize("ctm", CTMS)
def test_scales_input(mode, ctm):
    x = rng.standard_normal((2, 3, 5, 4)).astype(np.float32)
    ref, sess = session("Resize", ["x", "", "s"], {"x": x, "s": SCALES[0]},
                        {"mode": mode, "coordinate_transformation_mode": ctm}, 19)
    run_all(ref, sess, [{"x": x, "s": s} for s in SCALES])


@pytest.mark.parametrize("nm", ["round_prefer_floor", "round_prefer_ceil", "floor", "ceil"])
@pytest.mark.parametrize("opset", [11, 13, 18, 19])
def test_sizes_input(nm, opset):
    x = rng.standard_normal((1, 2, 4, 6)).astype(np.float32)
    ctm = "asymmetric" if opset < 18 else "half_pixel"
    ins, inits = ["x", "", "", "z"], None
    if opset == 11:     # roi and scales may not be omitted: empty tensors
        ins, inits = ["x", "roi", "sc", "z"], {"roi": f32(), "sc": f32()}
    ref, sess = session("Resize", ins, {"x": x, "z": i64(1, 2, 7, 3)},
                        {"mode": "nearest", "nearest_mode": nm, "coordinate_transformation_mode": ctm},
                        opset, inits)
    run_all(ref, sess, [{"x": x, "z": z} for z in (i64(1, 2, 7, 3), i64(1, 2, 4, 6), i64(2, 1, 1, 12),
                                                  i64(1, 2, 0, 3))])


@pytest.mark.parametrize("policy", ["stretch", "not_larger", "not_smaller"])
@pytest.mark.parametrize("axes", [None, [2, 3], [3, 2], [3]])
def test_policy_axes(policy, axes):
    x = rng.standard_normal((1, 2, 4, 6)).astype(np.float32)
    k = 4 if axes is None else len(axes)
    attrs = {"mode": "linear", "keep_aspect_ratio_policy": policy}
    if axes is not None:
        attrs["axes"] = axes
    sizes = [i64(*v[-k:]) for v in ([1, 2, 7, 3], [1, 2, 3, 12], [1, 2, 4, 6], [1, 2, 9, 9])]
    ref, sess = session("Resize", ["x", "", "", "z"], {"x": x, "z": sizes[0]}, attrs, 19)
    run_all(ref, sess, [{"x": x, "z": z} for z in sizes])
    scales = [f32(*v[-k:]) for v in ([1, 1, 0.5, 2.5], [1, 1, 1.5, 0.25])]
    if policy == "stretch":
        ref, sess = session("Resize", ["x", "", "s"], {"x": x, "s": scales[0]}, attrs, 19)
        run_all(ref, sess, [{"x": x, "s": s} for s in scales])


@pytest.mark.parametrize("mode", ["linear", "cubic"])
def test_antialias_and_exclude_outside(mode):
    x = rng.standard_normal((1, 2, 16, 9)).astype(np.float32)
    for attrs in ({"mode": mode, "antialias": 1}, {"mode": mode, "exclude_outside": 1, "cubic_coeff_a": -0.5}):
        ref, sess = session("Resize", ["x", "", "s"], {"x": x, "s": f32(1, 1, 0.5, 0.7)}, attrs, 19)
        run_all(ref, sess, [{"x": x, "s": s} for s in (f32(1, 1, 0.5, 0.7), f32(1, 1, 1.7, 2.0),
                                                       f32(1, 1, 0.13, 0.34), f32(1, 1, 1, 1))])
        ref, sess = session("Resize", ["x", "", "", "z"], {"x": x, "z": i64(1, 2, 5, 4)}, attrs, 19)
        run_all(ref, sess, [{"x": x, "z": z} for z in (i64(1, 2, 5, 4), i64(1, 2, 3, 17), i64(1, 2, 1, 1))])


@pytest.mark.parametrize("opset", [11, 13, 19])
@pytest.mark.parametrize("roi_type", [np.float32, np.float64])
def test_tf_crop_and_resize_roi_input(opset, roi_type):
    x = rng.standard_normal((1, 2, 5, 6)).astype(np.float32)
    attrs = {"mode": "linear", "coordinate_transformation_mode": "tf_crop_and_resize",
             "extrapolation_value": 7.5}
    rois = [np.array(r, roi_type) for r in ([0, 0, 0.1, 0.2, 1, 1, 0.8, 0.9], [0, 0, -0.5, 0.3, 1, 1, 1.4, 0.6],
                                            [0, 0, 0, 0, 1, 1, 1, 1])]
    ins, inits = ["x", "r", "", "z"], None
    if opset == 11:
        ins, inits = ["x", "r", "sc", "z"], {"sc": f32()}
    ref, sess = session("Resize", ins, {"x": x, "r": rois[0], "z": i64(1, 2, 4, 3)}, attrs, opset, inits)
    run_all(ref, sess, [{"x": x, "r": r, "z": z} for r in rois for z in (i64(1, 2, 4, 3), i64(1, 2, 1, 8))])
    # roi fed, scales constant
    ref, sess = session("Resize", ["x", "r", "s"], {"x": x, "r": rois[0]}, attrs, opset,
                        inits={"s": f32(1, 1, 0.8, 1.5)})
    run_all(ref, sess, [{"x": x, "r": r} for r in rois])


@pytest.mark.parametrize("dtype", [np.float64, np.uint8, np.int32, np.int64])
def test_dtypes(dtype):
    x = (rng.standard_normal((1, 1, 4, 5)) * 50).astype(dtype)
    for mode in ("nearest", "cubic"):
        ref, sess = session("Resize", ["x", "", "s"], {"x": x, "s": f32(1, 1, 1.5, 0.7)}, {"mode": mode}, 19)
        run_all(ref, sess, [{"x": x, "s": s} for s in (f32(1, 1, 1.5, 0.7), f32(1, 1, 2, 2))])


def test_resize10_and_upsample9():
    """Resize-10 and Upsample-9 are Resize-19 with asymmetric coordinates and floor rounding
    (onnx.reference lacks Resize-10's signature and Upsample's linear mode)."""
    x = rng.standard_normal((1, 2, 3, 4)).astype(np.float32)
    for mode in ("nearest", "linear"):
        ref, _ = session("Resize", ["x", "", "s"], {"x": x, "s": f32(1, 1, 2, 3)},
                         {"mode": mode, "coordinate_transformation_mode": "asymmetric",
                          "nearest_mode": "floor"}, 19)
        sessions = []
        for op, opset in (("Resize", 10), ("Upsample", 9)):
            m = make_model_from_nodes([helper.make_node(op, ["x", "s"], ["y0"], mode=mode)],
                                      {"x": x, "s": f32(1, 1, 2, 3)}, {}, ["y0"], opset)
            m.graph.output[0].CopyFrom(helper.make_tensor_value_info("y0", 1, None))
            sessions.append(onnxc.InferenceSession(m.SerializeToString()))
        for s in (f32(1, 1, 2, 3), f32(2, 1, 1, 1), f32(1, 1, 0.5, 1.5)):
            want = ref.run(None, {"x": x, "s": s})
            for sess in sessions:
                assert_close(want, sess.run(None, {"x": x, "s": s}))


def test_symbolic_batch():
    x = rng.standard_normal((2, 1, 3, 4)).astype(np.float32)
    ref, sess = session("Resize", ["x", "", "s"], {"x": x, "s": f32(1, 1, 2, 0.5)}, {"mode": "linear"}, 19,
                        input_shapes={"x": ["N", 1, 3, 4]})
    for n in (1, 3):
        xb = rng.standard_normal((n, 1, 3, 4)).astype(np.float32)
        run_all(ref, sess, [{"x": xb, "s": s} for s in (f32(1, 1, 2, 0.5), f32(1, 1, 1, 1.75))])


def test_bad_values_name_the_node():
    x = rng.standard_normal((1, 1, 3, 4)).astype(np.float32)
    _, sess = session("Resize", ["x", "", "s"], {"x": x, "s": f32(1, 1, 2, 2)}, {"mode": "linear"}, 19)
    for s in (f32(1, 1, 0, 2), f32(1, 1, -1, 2), f32(1, 1, np.nan, 1), f32(1, 1, np.inf, 1), f32(1, 1, 1e30, 1)):
        with pytest.raises(onnxc.Error, match=r"node 0 \(Resize"):
            sess.run(None, {"x": x, "s": s})
    _, sess = session("Resize", ["x", "", "", "z"], {"x": x, "z": i64(1, 1, 6, 8)}, {"mode": "nearest"}, 19)
    for z in (i64(1, 1, -1, 8), i64(1, 1, 6, 1 << 50)):
        with pytest.raises(onnxc.Error, match=r"node 0 \(Resize"):
            sess.run(None, {"x": x, "z": z})
    attrs = {"mode": "linear", "coordinate_transformation_mode": "tf_crop_and_resize"}
    _, sess = session("Resize", ["x", "r", "", "z"], {"x": x, "r": f32(0, 0, 0, 0, 1, 1, 1, 1),
                                                      "z": i64(1, 1, 2, 2)}, attrs, 19)
    with pytest.raises(onnxc.Error, match=r"node 0 \(Resize"):
        sess.run(None, {"x": x, "r": f32(0, 0, np.nan, 0, 1, 1, 1, 1), "z": i64(1, 1, 2, 2)})
    assert sess.run(None, {"x": x, "r": f32(0, 0, 0, 0, 1, 1, 1, 1), "z": i64(1, 1, 2, 2)})[0].shape == (1, 1, 2, 2)


def test_wrong_length_is_refused_at_compile_time():
    x = rng.standard_normal((1, 1, 3, 4)).astype(np.float32)
    node = helper.make_node("Resize", ["x", "", "s"], ["y0"], mode="nearest")
    m = make_model_from_nodes([node], {"x": x, "s": f32(2, 2)}, {}, ["y0"], 19)
    m.graph.output[0].CopyFrom(helper.make_tensor_value_info("y0", 1, None))
    with pytest.raises(onnxc.InvalidGraph, match=r"node 0 \(Resize.*scales has 2 values, expected 4"):
        onnxc.InferenceSession(m.SerializeToString())
