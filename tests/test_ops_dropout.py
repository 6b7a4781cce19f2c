"""Dropout: inference is checked against onnx.reference; training draws come from onnxc's own
generator, so those check the mask/scale relation, the keep rate and repeatability; with a seed
they are numpy's legacy RandomState(seed) draws, checked exactly."""
import numpy as np
import onnx
import pytest
from onnx import helper

import onnxc
from util import check, make_model_from_nodes, make_node_model

F = onnx.TensorProto
rng = np.random.default_rng(0)


@pytest.mark.parametrize("opset", [7, 10, 12, 13, 22])
@pytest.mark.parametrize("mask", [False, True])
def test_inference(opset, mask):
    x = rng.standard_normal((3, 4, 5)).astype(np.float32)
    x[0, 0, 0] = np.nan
    outs = ["y0", "y1"] if mask else ["y0"]
    m = make_node_model("Dropout", {"x": x}, {"ratio": 0.3} if opset < 12 else {}, opset=opset,
                        output_names=outs)
    if mask and opset < 10:
        # the mask has the data type before opset 10 (onnx.reference returns bool there)
        m.graph.output[0].CopyFrom(helper.make_tensor_value_info("y0", F.FLOAT, x.shape))
        m.graph.output[1].CopyFrom(helper.make_tensor_value_info("y1", F.FLOAT, x.shape))
        y, mk = onnxc.InferenceSession(m.SerializeToString()).run(None, {"x": x})
        np.testing.assert_array_equal(y, x)
        assert mk.dtype == np.float32 and (mk == 1).all()
        return
    check(m, {"x": x})


@pytest.mark.parametrize("dtype", [np.float64, np.float16])
def test_inference_types_training_false(dtype):
    x = rng.standard_normal((6, 7)).astype(dtype)
    m = make_node_model("Dropout", {"x": x, "r": np.array(0.4, np.float32), "t": np.array(False)},
                        opset=13, output_names=["y0", "y1"])
    check(m, {"x": x, "r": np.array(0.4, np.float32), "t": np.array(False)})


def test_training_zero_ratio():
    x = rng.standard_normal((4, 5)).astype(np.float32)
    feeds = {"x": x, "r": np.array(0.0, np.float32), "t": np.array(True)}
    check(make_node_model("Dropout", feeds, opset=22, output_names=["y0", "y1"]), feeds)


@pytest.mark.parametrize("opset", [12, 22])
def test_training(opset):
    x = rng.uniform(1, 2, (200, 100)).astype(np.float32)
    feeds = {"x": x, "r": np.array(0.25, np.float32), "t": np.array(True)}
    m = make_node_model("Dropout", feeds, {"seed": 3}, opset=opset, output_names=["y0", "y1"])
    m.graph.output[0].CopyFrom(helper.make_tensor_value_info("y0", F.FLOAT, x.shape))
    m.graph.output[1].CopyFrom(helper.make_tensor_value_info("y1", F.BOOL, x.shape))
    s = onnxc.InferenceSession(m.SerializeToString())
    y, mask = s.run(None, feeds)
    y2, mask2 = s.run(None, feeds)
    np.testing.assert_array_equal(y, y2)
    np.testing.assert_array_equal(mask, mask2)
    assert mask.dtype == np.bool_ and abs(mask.mean() - 0.75) < 0.02
    np.testing.assert_allclose(y, np.where(mask, x / 0.75, 0), rtol=1e-6)
    # training_mode false at run time: identity
    y, mask = s.run(None, {**feeds, "t": np.array(False)})
    np.testing.assert_array_equal(y, x)
    assert mask.all()
    # ratio out of range: a clean run-time error
    with pytest.raises(Exception):
        s.run(None, {**feeds, "r": np.array(1.5, np.float32)})


def test_old_is_test_false():
    x = rng.uniform(1, 2, (1000,)).astype(np.float32)
    node = helper.make_node("Dropout", ["x"], ["y0", "y1"], ratio=0.5, is_test=0)
    m = make_model_from_nodes([node], {"x": x}, {}, ["y0", "y1"], 6)
    m.graph.output[0].CopyFrom(helper.make_tensor_value_info("y0", F.FLOAT, x.shape))
    m.graph.output[1].CopyFrom(helper.make_tensor_value_info("y1", F.FLOAT, x.shape))
    y, mask = onnxc.InferenceSession(m.SerializeToString()).run(None, {"x": x})
    assert set(np.unique(mask)) <= {0.0, 1.0} and abs(mask.mean() - 0.5) < 0.06
    np.testing.assert_allclose(y, mask * x * 2, rtol=1e-6)



@pytest.mark.parametrize("seed,shape,ratio", [(0, (3, 4, 5), 0.75), (7, (2000,), 0.5), (2 ** 32 - 1, (31, 67), 0.1)])
def test_training_seeded_is_numpys_stream(seed, shape, ratio):
    """np.random.seed(seed); keep = np.random.uniform(0, 1, shape) >= ratio (onnx's reference
    data): 2000 elements draw past MT19937's 624-word state refill."""
    x = rng.standard_normal(shape).astype(np.float32)
    feeds = {"x": x, "r": np.array(ratio, np.float32), "t": np.array(True)}
    m = make_node_model("Dropout", feeds, {"seed": seed}, opset=13, output_names=["y0", "y1"])
    m.graph.output[0].CopyFrom(helper.make_tensor_value_info("y0", F.FLOAT, x.shape))
    m.graph.output[1].CopyFrom(helper.make_tensor_value_info("y1", F.BOOL, x.shape))
    y, mask = onnxc.InferenceSession(m.SerializeToString()).run(None, feeds)
    want = np.random.RandomState(seed).uniform(0, 1.0, shape) >= np.float32(ratio)
    np.testing.assert_array_equal(mask, want)
    np.testing.assert_allclose(y, want * x * np.float32(1 / (1 - ratio)), rtol=1e-6)
