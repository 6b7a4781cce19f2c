"""Det and CumProd vs onnx.reference."""
import numpy as np
import pytest
from onnx import helper

from util import check, make_model_from_nodes, make_node_model

rng = np.random.default_rng(11)


@pytest.mark.parametrize("shape", [(1, 1), (2, 2), (3, 3), (5, 5), (4, 3, 3), (2, 3, 6, 6), (0, 2, 2), (40, 40)])
@pytest.mark.parametrize("dt", [np.float32, np.float64])
def test_det(shape, dt):
    x = rng.standard_normal(shape).astype(dt)
    check(make_node_model("Det", {"x": x}), {"x": x}, rtol=1e-4 if dt == np.float32 else 1e-9, atol=1e-5)


def test_det_singular_and_pivoting():
    x = np.array([[[1, 2], [2, 4]], [[0, 1], [1, 0]], [[0, 0], [0, 0]], [[1e-20, 1], [1, 1]]], np.float64)
    check(make_node_model("Det", {"x": x}), {"x": x})


def test_det_float16():
    import onnx
    import onnxc
    x = rng.standard_normal((3, 3, 3)).astype(np.float16)
    m = make_node_model("Det", {"x": x})
    m.graph.output[0].CopyFrom(helper.make_tensor_value_info("y0", onnx.TensorProto.FLOAT16, (3,)))
    got = onnxc.InferenceSession(m.SerializeToString()).run(None, {"x": x})[0]
    assert got.dtype == np.float16   # numpy has no float16 det: compare with float64
    np.testing.assert_allclose(got, np.linalg.det(x.astype(np.float64)), rtol=1e-2, atol=1e-2)


@pytest.mark.parametrize("exclusive", [0, 1])
@pytest.mark.parametrize("reverse", [0, 1])
@pytest.mark.parametrize("axis", [0, 1, -1])
@pytest.mark.parametrize("dt", [np.float32, np.float64, np.int32, np.int64, np.uint32, np.uint64])
@pytest.mark.parametrize("const_axis", [True, False])
def test_cumprod(exclusive, reverse, axis, dt, const_axis):
    x = (rng.integers(1, 4, (3, 4)) if dt not in (np.float32, np.float64)
         else rng.uniform(0.5, 1.5, (3, 4))).astype(dt)
    a = np.array(axis, np.int64)
    node = helper.make_node("CumProd", ["x", "a"], ["y0"], exclusive=exclusive, reverse=reverse)
    if const_axis:
        m = make_model_from_nodes([node], {"x": x}, {"a": a}, ["y0"], 26)
        check(m, {"x": x})
    else:
        m = make_model_from_nodes([node], {"x": x, "a": a}, {}, ["y0"], 26)
        check(m, {"x": x, "a": a})


def test_cumprod_int_wraps():
    x = np.full((40,), 7, np.int64)
    a = np.array(0, np.int64)
    m = make_model_from_nodes([helper.make_node("CumProd", ["x", "a"], ["y0"])], {"x": x}, {"a": a}, ["y0"], 26)
    check(m, {"x": x})
