import ml_dtypes
import numpy as np
import onnx
import pytest
from onnx.reference import ReferenceEvaluator

import onnxc
import util
from util import assert_close, check, make_node_model, typed_outputs

BF16 = np.dtype(ml_dtypes.bfloat16)
util.NP2ONNX.setdefault(BF16, onnx.TensorProto.BFLOAT16)  # util's table lacks bfloat16
rng = np.random.default_rng(0)
LOW = (np.float16, BF16)
TOL = {np.dtype(np.float32): (1e-5, 1e-6), np.dtype(np.float64): (1e-12, 1e-14),
       np.dtype(np.float16): (2e-3, 1e-5), BF16: (1.6e-2, 1e-5)}


def special(shape, dtype=np.float32, scale=3.0):
    x = (rng.standard_normal(shape) * scale).astype(np.float32)
    flat = x.reshape(-1)
    if flat.size >= 4:
        flat[:4] = [np.nan, np.inf, -np.inf, 0.0]
    return x.astype(dtype)


def model(op, inputs, attrs=None, opset=17, initializers=None):
    m = make_node_model(op, inputs, attrs, opset=opset, initializers=initializers)
    if opset > 21:
        m.ir_version = 11 if opset <= 24 else 13
    return m


def run_onnxc(m, feeds):
    return onnxc.InferenceSession(m.SerializeToString()).run(None, feeds)


def check_low(op, feeds, attrs=None, opset=17, initializers=None):
    """float16/bfloat16: onnx.reference on the same values in float32, rounded to the low type,
    against onnxc computing in float from the low-precision inputs (float16-level tolerance)."""
    feeds32 = {k: (v.astype(np.float32) if v.dtype in LOW else v) for k, v in feeds.items()}
    inits32 = {k: (v.astype(np.float32) if v.dtype in LOW else v) for k, v in (initializers or {}).items()}
    ref = ReferenceEvaluator(model(op, feeds32, attrs, opset, inits32)).run(None, feeds32)
    # the output takes the type of the first floating input (Pow: the base; Where: X)
    low = next(v.dtype for v in list(feeds.values()) + list((initializers or {}).values())
               if v.dtype in LOW or v.dtype.kind == "f")
    if low not in LOW:
        low = next(v.dtype for v in feeds.values() if v.dtype in LOW)
    else:
        ref = [r.astype(low) if r.dtype == np.float32 else r for r in ref]
    m = typed_outputs(model(op, feeds, attrs, opset, initializers), ref)
    got = run_onnxc(m, feeds)
    rtol, atol = TOL[np.dtype(low)]
    for r, g in zip(ref, got):
        assert g.dtype == r.dtype and g.shape == r.shape
        if r.dtype in LOW or r.dtype.kind == "f":
            np.testing.assert_allclose(g.astype(np.float64), r.astype(np.float64), rtol=rtol, atol=atol,
                                       equal_nan=True)
        else:
            np.testing.assert_array_equal(g, r)


def check_any(op, feeds, attrs=None, opset=17, initializers=None):
    dts = [v.dtype for v in list(feeds.values()) + list((initializers or {}).values())]
    if any(d in LOW for d in dts):
        return check_low(op, feeds, attrs, opset, initializers)
    rtol, atol = next((TOL[d] for d in dts if d in TOL), (0, 0))
    return check(model(op, feeds, attrs, opset, initializers), feeds, rtol=rtol, atol=atol)


# op -> (attrs, opset, input generator(shape, dtype))
def _domain(lo, hi):
    def gen(shape, dt):
        x = rng.uniform(lo, hi, shape).astype(np.float32)
        x.reshape(-1)[:2] = [np.nan, hi * 2]            # NaN and an out-of-domain value
        return x.astype(dt)
    return gen


FLOAT_UNARY = {
    "Relu": ({}, 17, special), "Sigmoid": ({}, 17, special), "Tanh": ({}, 17, special),
    "Exp": ({}, 17, special), "Log": ({}, 17, _domain(0, 50)), "Sqrt": ({}, 17, _domain(0, 50)),
    "Abs": ({}, 17, special), "Neg": ({}, 17, special), "Sign": ({}, 17, special),
    "Floor": ({}, 17, special), "Ceil": ({}, 17, special), "Reciprocal": ({}, 17, special),
    "Erf": ({}, 17, special), "Sin": ({}, 17, special), "Cos": ({}, 17, special),
    "Tan": ({}, 17, _domain(-1.5, 1.5)), "Asin": ({}, 17, _domain(-1, 1)), "Acos": ({}, 17, _domain(-1, 1)),
    "Atan": ({}, 17, special), "Sinh": ({}, 17, _domain(-8, 8)), "Cosh": ({}, 17, _domain(-8, 8)),
    "Asinh": ({}, 17, special), "Acosh": ({}, 17, _domain(1, 20)), "Atanh": ({}, 17, _domain(-0.99, 0.99)),
    "Softplus": ({}, 17, special), "Softsign": ({}, 17, special),
    "LeakyRelu": ({"alpha": 0.1}, 17, special), "Elu": ({"alpha": 0.7}, 17, special),
    "Celu": ({"alpha": 2.0}, 17, special), "Selu": ({}, 17, special),
    "ThresholdedRelu": ({"alpha": 0.5}, 17, special), "HardSigmoid": ({}, 17, special),
    "HardSwish": ({}, 17, special), "Mish": ({}, 18, special), "Swish": ({"alpha": 0.8}, 24, special),
    "Gelu": ({}, 20, special), "IsNaN": ({}, 17, special), "IsInf": ({}, 17, special),
    "Shrink": ({"lambd": 0.8, "bias": 0.3}, 17, special),
}


def schema_opset(op, dtype, opset):
    """The first opset from `opset` whose schema accepts dtype for input 0 (None if none does)."""
    name = "bfloat16" if np.dtype(dtype) == BF16 else {"float32": "float", "float64": "double"}.get(
        np.dtype(dtype).name, np.dtype(dtype).name)
    for v in range(opset, onnx.defs.onnx_opset_version() + 1):
        s = onnx.defs.get_schema(op, v)
        tc = {t.type_param_str: t.allowed_type_strs for t in s.type_constraints}
        if f"tensor({name})" in tc.get(s.inputs[0].type_str, ()):
            return v
    return None


# onnx.reference computes these in float32 (Erf) or with float32 constants (function bodies)
REF_F32 = {"Erf", "Gelu", "HardSwish", "Celu", "Mish", "Swish", "Selu", "HardSigmoid", "ThresholdedRelu"}


@pytest.mark.parametrize("op", list(FLOAT_UNARY))
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16, BF16], ids=str)
def test_float_unary(op, dtype):
    attrs, opset, gen = FLOAT_UNARY[op]
    opset = schema_opset(op, dtype, opset)
    if opset is None:
        pytest.skip(f"{op}'s schema has no {np.dtype(dtype).name}")
    x = gen((3, 5, 7), dtype)
    if dtype == np.float64 and op in REF_F32:
        m = model(op, {"x": x}, attrs, opset)
        assert_close(*reversed(run_both_typed(m, {"x": x})), rtol=1e-6, atol=1e-7)
        return
    check_any(op, {"x": x}, attrs, opset)


def run_both_typed(m, feeds):
    ref = ReferenceEvaluator(m).run(None, feeds)
    return run_onnxc(typed_outputs(m, ref), feeds), ref


def test_round_half_to_even():
    x = np.array([0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 2.4, 2.6, np.nan, np.inf, -0.0, 1e30], np.float32)
    check(model("Round", {"x": x}), {"x": x})
    check_low("Round", {"x": x.astype(np.float16)})


@pytest.mark.parametrize("approximate", ["none", "tanh"])
@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_gelu(approximate, dtype):
    x = special((4, 33), dtype)
    check_any("Gelu", {"x": x}, {"approximate": approximate}, opset=20)


@pytest.mark.parametrize("neg,pos", [(1, 1), (1, 0), (0, 1), (0, 0)])
def test_isinf_flags(neg, pos):
    x = special((5, 6))
    check(model("IsInf", {"x": x}, {"detect_negative": neg, "detect_positive": pos}), {"x": x})


def ints(dtype, shape):
    info = np.iinfo(dtype)
    x = rng.integers(info.min, info.max, shape, endpoint=True, dtype=dtype)
    x.reshape(-1)[:3] = [info.min, info.max, 0]
    return x


INT_TYPES = [np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32, np.uint64]


@pytest.mark.parametrize("op", ["Abs", "Neg", "Sign", "Relu", "BitwiseNot"])
@pytest.mark.parametrize("dtype", INT_TYPES, ids=lambda d: np.dtype(d).name)
def test_int_unary(op, dtype):
    if op == "Neg" and not np.issubdtype(dtype, np.signedinteger):
        pytest.skip("Neg's schema has no unsigned types")
    if op == "Relu" and (not np.issubdtype(dtype, np.signedinteger)):
        pytest.skip("Relu's schema has no unsigned types")
    x = ints(dtype, (4, 9))
    check(model(op, {"x": x}, opset=18), {"x": x})


@pytest.mark.parametrize("op", ["Add", "Sub", "Mul", "Div", "Max", "Min", "BitwiseAnd", "BitwiseOr",
                                "BitwiseXor", "Equal", "Less", "Greater"])
@pytest.mark.parametrize("dtype", INT_TYPES, ids=lambda d: np.dtype(d).name)
def test_int_binary(op, dtype):
    a, b = ints(dtype, (4, 6)), ints(dtype, (6,))
    b[b == 0] = 3
    check(model(op, {"a": a, "b": b}, opset=18), {"a": a, "b": b})


@pytest.mark.parametrize("fmod", [0, 1])
@pytest.mark.parametrize("dtype", INT_TYPES, ids=lambda d: np.dtype(d).name)
def test_int_mod(fmod, dtype):
    a, b = ints(dtype, (4, 6)), ints(dtype, (6,))
    b[b == 0] = 3
    if np.issubdtype(dtype, np.signedinteger):
        b[1] = -1
        a[0, 1] = np.iinfo(dtype).min   # INT_MIN % -1 traps in C
    check(model("Mod", {"a": a, "b": b}, {"fmod": fmod}), {"a": a, "b": b})


@pytest.mark.parametrize("fmod", [0, 1])
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16, BF16], ids=str)
def test_float_mod(fmod, dtype):
    a, b = special((5, 6), dtype), special((6,), dtype)
    a[1, :3] = [5, -5, 0]
    b[:3] = [-3, 3, -2]
    check_any("Mod", {"a": a, "b": b}, {"fmod": fmod})


def test_int_division_by_zero_does_not_crash():
    a = np.array([5, -7, np.iinfo(np.int32).min], np.int32)
    b = np.array([0, 0, -1], np.int32)
    m = typed_outputs(make_node_model("Div", {"a": a, "b": b}), [a])
    got = run_onnxc(m, {"a": a, "b": b})[0]
    assert got[2] == np.iinfo(np.int32).min


@pytest.mark.parametrize("direction", ["LEFT", "RIGHT"])
@pytest.mark.parametrize("dtype", INT_TYPES, ids=lambda d: np.dtype(d).name)
def test_bitshift(direction, dtype):
    bits = np.iinfo(dtype).bits
    a = ints(dtype, (3, 2 * bits))
    b = np.arange(2 * bits).astype(dtype)     # includes shifts >= the width
    if np.issubdtype(dtype, np.signedinteger):
        b[-1] = -1
    check(model("BitShift", {"a": a, "b": b}, {"direction": direction}, opset=28), {"a": a, "b": b})


def test_bitshift_direction_is_checked():
    a = np.ones(3, np.uint8)
    with pytest.raises(onnxc.InvalidGraph, match="direction"):
        typed_outputs(m := model("BitShift", {"a": a, "b": a}, {"direction": "UP"}), [a])
        run_onnxc(m, {"a": a, "b": a})


@pytest.mark.parametrize("op", ["Add", "Sub", "Mul", "Div", "Pow", "Max", "Min", "Sum", "Mean"])
@pytest.mark.parametrize("shapes", [((2, 3, 4), (2, 3, 4)), ((2, 3, 4), (4,)), ((2, 1, 4), (3, 1)),
                                    ((1,), (5, 6)), ((), (2, 2)), ((6, 1, 5), (1, 7, 1))])
def test_binary_broadcast(op, shapes):
    a, b = special(shapes[0]), special(shapes[1])
    if op == "Pow":
        a = np.abs(a)
    if op == "Mean":  # onnx.reference's Mean accumulates in place and cannot broadcast
        m = typed_outputs(make_node_model(op, {"a": a, "b": b}), [(a + b) / 2])
        np.testing.assert_allclose(run_onnxc(m, {"a": a, "b": b})[0], (a + b) / 2, rtol=1e-6)
        return
    check(make_node_model(op, {"a": a, "b": b}), {"a": a, "b": b}, rtol=1e-5)


@pytest.mark.parametrize("op", ["Add", "Sub", "Mul", "Div", "Pow", "Max", "Min", "Sum", "Mean", "PRelu",
                                "Equal", "Less", "GreaterOrEqual"])
@pytest.mark.parametrize("dtype", [np.float16, BF16], ids=str)
def test_binary_low_precision(op, dtype):
    a, b = special((3, 4, 5), dtype), special((5,), dtype)
    if op == "Pow":
        a = np.abs(a)
    check_low(op, {"a": a, "b": b}, opset=18)


@pytest.mark.parametrize("n", [1, 3, 4])
@pytest.mark.parametrize("op", ["Max", "Min", "Sum", "Mean"])
def test_variadic(op, n):
    xs = {f"x{i}": special((2, 3) if i % 2 else (3,), np.float16) for i in range(n)}
    if op == "Mean":
        xs = {k: special((2, 3), np.float16) for k in xs}
    check_low(op, xs)


POW_BASES = [np.int32, np.int64, np.float16, np.float32, np.float64, BF16]
POW_EXPS = [np.uint8, np.int8, np.int32, np.int64, np.float16, np.float32, np.float64]


@pytest.mark.parametrize("bt", POW_BASES, ids=str)
@pytest.mark.parametrize("et", POW_EXPS, ids=str)
def test_pow_type_pairs(bt, et):
    a = np.array([[0, 1, 2, 3, 5, -2, -3, 7]], np.float32)
    b = np.array([0, 1, 2, 3, 2, 3, 1, 4], np.float32)
    if np.dtype(bt).kind == "f":
        a = a * 0.75
    if np.dtype(et).kind == "f" and np.dtype(bt).kind == "f":
        b = b * 0.5
        a = np.abs(a)
    check_any("Pow", {"a": a.astype(bt), "b": b.astype(et)}, opset=15)


def test_pow_int_base_float_exponent_truncates():
    a = np.array([2, 3, -4, 10], np.int32)
    b = np.array([0.5, 2.5, 2.0, 12.0], np.float32)    # 10**12 is out of int32 range
    check(model("Pow", {"a": a, "b": b}, opset=15), {"a": a, "b": b})


@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.int32, np.uint64, np.int64], ids=str)
def test_prelu_broadcast(dtype):
    x = (rng.standard_normal((2, 3, 4, 5)) * 4).astype(dtype) if np.dtype(dtype).kind == "f" \
        else rng.integers(-9 if np.dtype(dtype).kind == "i" else 0, 9, (2, 3, 4, 5)).astype(dtype)
    for slope_shape in [(5,), (3, 1, 1), (1,), (2, 3, 4, 5)]:
        slope = rng.uniform(0, 2, slope_shape).astype(np.float32).astype(dtype)
        check_any("PRelu", {"x": x, "slope": slope}, opset=16)


def test_prelu_slope_must_broadcast_to_x():
    x, slope = np.ones((3, 1), np.float32), np.ones((3, 4), np.float32)
    with pytest.raises(onnxc.InvalidGraph, match="slope"):
        m = typed_outputs(model("PRelu", {"x": x, "slope": slope}), [slope])
        run_onnxc(m, {"x": x, "slope": slope})


@pytest.mark.parametrize("dtype", [np.int8, np.uint8, np.int32, np.int64])
def test_shrink_int(dtype):
    x = ints(dtype, (4, 8)) % 7 - (3 if np.dtype(dtype).kind == "i" else 0)
    x = x.astype(dtype)
    check(model("Shrink", {"x": x}, {"lambd": 1.5, "bias": 0.5}), {"x": x})


@pytest.mark.parametrize("dtype", [np.float32, np.float16, BF16, np.int64, np.uint8, np.bool_], ids=str)
def test_where(dtype):
    c = rng.integers(0, 2, (3, 1, 5)).astype(bool)
    x = special((4, 5)).astype(dtype) if np.dtype(dtype).kind == "f" or dtype == BF16 \
        else rng.integers(0, 2 if dtype == np.bool_ else 100, (4, 5)).astype(dtype)
    y = np.array(7).astype(dtype)
    feeds = {"c": c, "x": x, "y": y}
    if dtype in LOW:   # selection is exact: compare bit for bit with numpy
        m = typed_outputs(model("Where", feeds), [np.where(c, x, y)])
        got = run_onnxc(m, feeds)[0]
        np.testing.assert_array_equal(got.view(np.uint16), np.where(c, x, y).view(np.uint16))
    else:
        check(model("Where", feeds), feeds)


@pytest.mark.parametrize("op", ["Equal", "Less", "Greater", "LessOrEqual", "GreaterOrEqual"])
def test_compare(op):
    a = rng.integers(0, 3, (3, 4)).astype(np.float32)
    b = rng.integers(0, 3, (4,)).astype(np.float32)
    a[0, :2] = np.nan
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


@pytest.mark.parametrize("dtype", [np.float16, BF16, np.int8, np.uint64], ids=str)
def test_clip_types(dtype):
    x = special((4, 5)).astype(dtype) if dtype in LOW else ints(dtype, (4, 5))
    lo, hi = np.array(-1 if dtype != np.uint64 else 3).astype(dtype), np.array(100).astype(dtype)
    check_any("Clip", {"x": x, "lo": lo, "hi": hi}, opset=13)


def test_type_outside_schema_is_rejected():
    a = np.ones(3, np.int32)
    with pytest.raises(onnxc.InvalidGraph, match="does not accept"):
        m = typed_outputs(model("Exp", {"a": a}), [a])
        run_onnxc(m, {"a": a})


def test_symbolic_batch_chain():
    x = special((7, 4))
    m = make_node_model("Relu", {"x": x}, input_shapes={"x": ["N", 4]})
    m.graph.output[0].CopyFrom(onnx.helper.make_tensor_value_info("y0", onnx.TensorProto.FLOAT, ["N", 4]))
    s = onnxc.InferenceSession(m.SerializeToString())
    assert s.get_inputs()[0].shape == ["N", 4]
    for n in (1, 7, 32):
        x = special((n, 4))
        np.testing.assert_array_equal(s.run(None, {"x": x})[0], np.where(x < 0, 0, x))


def _expanded_model(op, x_shape, m_shape, nodes_after=()):
    """op(x, Expand(m, shape)) with the shape an input: m's broadcast dims are known only while
    running, and may be 1 there against x's numbers."""
    nodes = [onnx.helper.make_node("Expand", ["m", "s"], ["me"]), onnx.helper.make_node(op, ["x", "me"], ["y"]), *nodes_after]
    g = onnx.helper.make_graph(nodes, "g", [onnx.helper.make_tensor_value_info("x", 1, x_shape),
                                       onnx.helper.make_tensor_value_info("m", 1, m_shape),
                                       onnx.helper.make_tensor_value_info("s", 7, [len(x_shape)])],
                          [onnx.helper.make_tensor_value_info("y", 1, None)])
    return onnx.helper.make_model(g, opset_imports=[onnx.helper.make_opsetid("", 18)], ir_version=8)


@pytest.mark.parametrize("op", ["Add", "Mul", "Max", "MatMul"])
def test_broadcast_dims_that_are_one_only_while_running(op):
    """An operand Expanded to a shape given as data (an exported attention mask): its dims may be
    1 against the other operand's numbers (numpy broadcasting), or equal; anything else fails
    cleanly, naming the node."""
    g = np.random.default_rng(5)
    x = g.standard_normal((2, 3, 5, 7)).astype(np.float32)
    m = g.standard_normal((2, 1, 7, 4) if op == "MatMul" else (2, 1, 1, 7)).astype(np.float32)
    model = _expanded_model(op, [2, 3, 5, 7], list(m.shape))
    sess = onnxc.InferenceSession(model.SerializeToString())
    shapes = ([2, 1, 5, 7], [2, 3, 5, 7], [2, 1, 1, 7], [1, 1, 1, 7], [2, 3, 1, 7]) if op != "MatMul" else \
        ([2, 1, 7, 4], [2, 3, 7, 4], [1, 1, 7, 4])
    for shape in shapes:
        feeds = {"x": x, "m": m, "s": np.array(shape, np.int64)}
        want = ReferenceEvaluator(model).run(None, feeds)[0]
        got = sess.run(None, feeds)[0]
        assert got.shape == want.shape and np.allclose(got, want, rtol=1e-5, atol=1e-5), shape
    bad = [2, 2, 5, 7] if op != "MatMul" else [2, 2, 7, 4]
    with pytest.raises(onnxc.Error, match=f"{op}.*run-time dimensions"):
        sess.run(None, {"x": x, "m": m, "s": np.array(bad, np.int64)})
