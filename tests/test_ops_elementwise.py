import numpy as np
import onnx
import pytest

import onnxc
from util import check, make_node_model, typed_outputs

rng = np.random.default_rng(0)


def special(shape, dtype=np.float32):
    x = rng.standard_normal(shape).astype(dtype) * 3
    flat = x.reshape(-1)
    if flat.size >= 4:
        flat[:4] = [np.nan, np.inf, -np.inf, 0.0]
    return x


UNARY = ["Relu", "Sigmoid", "Tanh", "Exp", "Abs", "Neg", "Floor", "Ceil", "Reciprocal", "Erf",
         "Sin", "Cos", "Softplus", "Sign", "LeakyRelu", "Elu", "HardSigmoid"]


@pytest.mark.parametrize("op", UNARY)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_unary(op, dtype):
    x = special((3, 5, 7), dtype)
    check(make_node_model(op, {"x": x}), {"x": x}, rtol=2e-6 if dtype == np.float32 else 1e-12)


@pytest.mark.parametrize("op", ["Log", "Sqrt"])
def test_unary_positive_domain(op):
    x = np.abs(special((4, 9)))
    check(make_node_model(op, {"x": x}), {"x": x})


@pytest.mark.parametrize("op", ["Add", "Sub", "Mul", "Div", "Pow", "Max", "Min", "Sum", "Mean"])
@pytest.mark.parametrize("shapes", [((2, 3, 4), (2, 3, 4)), ((2, 3, 4), (4,)), ((2, 1, 4), (3, 1)),
                                    ((1,), (5, 6)), ((), (2, 2)), ((6, 1, 5), (1, 7, 1))])
def test_binary_broadcast(op, shapes):
    a, b = special(shapes[0]), special(shapes[1])
    if op == "Pow":
        a = np.abs(a)
    if op == "Mean":  # onnx.reference's Mean accumulates in place and cannot broadcast
        m = make_node_model(op, {"a": a, "b": b})
        typed_outputs(m, [(a + b) / 2])
        got = onnxc.InferenceSession(m.SerializeToString()).run(None, {"a": a, "b": b})[0]
        np.testing.assert_allclose(got, (a + b) / 2, rtol=1e-6)
        return
    check(make_node_model(op, {"a": a, "b": b}), {"a": a, "b": b}, rtol=1e-5)


@pytest.mark.parametrize("op", ["Add", "Sub", "Mul", "Div", "Mod"])
@pytest.mark.parametrize("dtype", [np.int32, np.int64, np.uint8, np.int8])
def test_binary_int(op, dtype):
    info = np.iinfo(dtype)
    a = rng.integers(info.min, info.max, (4, 6), endpoint=True).astype(dtype)
    b = rng.integers(info.min, info.max, (6,), endpoint=True).astype(dtype)
    b[b == 0] = 3
    attrs = {"fmod": 0} if op == "Mod" else {}
    check(make_node_model(op, {"a": a, "b": b}, attrs), {"a": a, "b": b})


def test_int_division_by_zero_does_not_crash():
    a = np.array([5, -7, np.iinfo(np.int32).min], np.int32)
    b = np.array([0, 0, -1], np.int32)
    m = typed_outputs(make_node_model("Div", {"a": a, "b": b}), [a])
    got = onnxc.InferenceSession(m.SerializeToString()).run(None, {"a": a, "b": b})[0]
    assert got[2] == np.iinfo(np.int32).min


@pytest.mark.parametrize("op", ["Equal", "Less", "Greater", "LessOrEqual", "GreaterOrEqual"])
def test_compare(op):
    a = rng.integers(0, 3, (3, 4)).astype(np.float32)
    b = rng.integers(0, 3, (4,)).astype(np.float32)
    check(make_node_model(op, {"a": a, "b": b}, opset=16), {"a": a, "b": b})


@pytest.mark.parametrize("op", ["And", "Or", "Xor"])
def test_logic(op):
    a = rng.integers(0, 2, (3, 4)).astype(bool)
    b = rng.integers(0, 2, (3, 4)).astype(bool)
    check(make_node_model(op, {"a": a, "b": b}), {"a": a, "b": b})


@pytest.mark.parametrize("opset", [6, 11, 13])
def test_clip(opset):
    x = special((4, 5))
    if opset < 11:
        m = make_node_model("Clip", {"x": x}, {"min": -1.0, "max": 2.0}, opset=opset)
        check(m, {"x": x})
    else:
        lo, hi = np.array(-1.0, np.float32), np.array(2.0, np.float32)
        check(make_node_model("Clip", {"x": x}, initializers={"lo": lo, "hi": hi}, opset=opset), {"x": x})
        check(make_node_model("Clip", {"x": x, "lo": lo}, opset=opset), {"x": x, "lo": lo})


def test_symbolic_batch_chain():
    x = special((7, 4))
    m = make_node_model("Relu", {"x": x}, input_shapes={"x": ["N", 4]})
    m.graph.output[0].CopyFrom(onnx.helper.make_tensor_value_info("y0", onnx.TensorProto.FLOAT, ["N", 4]))
    s = onnxc.InferenceSession(m.SerializeToString())
    assert s.get_inputs()[0].shape == ["N", 4]
    for n in (1, 7, 32):
        x = special((n, 4))
        np.testing.assert_array_equal(s.run(None, {"x": x})[0], np.where(x < 0, 0, x))
