"""Resize / Upsample with compile-time scales or sizes, checked against onnx.reference."""
import numpy as np
import pytest

from util import check, make_node_model

rng = np.random.default_rng(5)
CTMS = ["half_pixel", "half_pixel_symmetric", "pytorch_half_pixel", "align_corners", "asymmetric"]


def resize(x, attrs, scales=None, sizes=None, roi=None, opset=19):
    inits = {"roi": np.array(roi if roi is not None else [], np.float32),
             "scales": np.array(scales if scales is not None else [], np.float32)}
    if sizes is not None:
        inits["sizes"] = np.array(sizes, np.int64)
    return make_node_model("Resize", {"x": x}, attrs, opset=opset, initializers=inits)


@pytest.mark.parametrize("mode", ["nearest", "linear", "cubic"])
@pytest.mark.parametrize("ctm", CTMS)
@pytest.mark.parametrize("scales", [[1, 1, 2.0, 1.5], [1, 1, 0.6, 0.8], [1, 1, 1.0, 3.0]])
def test_modes_scales(mode, ctm, scales):
    x = rng.standard_normal((2, 3, 5, 4)).astype(np.float32)
    check(resize(x, {"mode": mode, "coordinate_transformation_mode": ctm}, scales=scales), {"x": x},
          rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("nm", ["round_prefer_floor", "round_prefer_ceil", "floor", "ceil"])
def test_nearest_modes_sizes(nm):
    x = rng.standard_normal((1, 2, 4, 6)).astype(np.float32)
    check(resize(x, {"mode": "nearest", "nearest_mode": nm}, sizes=[1, 2, 7, 3]), {"x": x})


@pytest.mark.parametrize("mode", ["linear", "cubic"])
@pytest.mark.parametrize("scales", [[1, 1, 0.5, 0.7], [1, 1, 1.7, 2.0]])
def test_antialias_exclude_outside(mode, scales):
    x = rng.standard_normal((1, 2, 8, 9)).astype(np.float32)
    check(resize(x, {"mode": mode, "antialias": 1}, scales=scales), {"x": x}, rtol=1e-5, atol=1e-5)
    check(resize(x, {"mode": mode, "exclude_outside": 1, "cubic_coeff_a": -0.5}, scales=scales), {"x": x},
          rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("policy", ["stretch", "not_larger", "not_smaller"])
def test_axes_and_aspect_policy(policy):
    x = rng.standard_normal((2, 6, 5)).astype(np.float32)
    check(resize(x, {"mode": "linear", "axes": [2, 1], "keep_aspect_ratio_policy": policy}, sizes=[7, 9]),
          {"x": x}, rtol=1e-5, atol=1e-5)


def test_tf_crop_and_resize_extrapolation():
    x = rng.standard_normal((1, 1, 6, 6)).astype(np.float32)
    check(resize(x, {"mode": "linear", "coordinate_transformation_mode": "tf_crop_and_resize",
                     "extrapolation_value": 10.0}, sizes=[1, 1, 5, 4],
                 roi=[0, 0, -0.2, 0.3, 1, 1, 0.9, 1.4]), {"x": x}, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("dtype", [np.float64, np.float16, np.uint8, np.int32])
def test_dtypes(dtype):
    x = (rng.standard_normal((1, 2, 4, 4)) * 50 + 100).astype(dtype)
    check(resize(x, {"mode": "cubic"}, scales=[1, 1, 1.5, 2]), {"x": x}, rtol=1e-3, atol=1e-3)


def test_opset10_and_upsample():
    x = rng.standard_normal((1, 2, 3, 4)).astype(np.float32)
    m = make_node_model("Resize", {"x": x}, {"mode": "nearest"}, opset=10,
                        initializers={"scales": np.array([1, 1, 2, 3], np.float32)})
    import onnxc
    from onnx import helper, TensorProto
    m.graph.output[0].CopyFrom(helper.make_tensor_value_info("y0", TensorProto.FLOAT, None))
    got = onnxc.InferenceSession(m.SerializeToString()).run(None, {"x": x})[0]
    np.testing.assert_array_equal(got, x.repeat(2, axis=2).repeat(3, axis=3))
    m = make_node_model("Upsample", {"x": x}, {"mode": "nearest"}, opset=9,
                        initializers={"scales": np.array([1, 1, 2, 3], np.float32)})
    check(m, {"x": x})
