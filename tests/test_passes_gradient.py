"""Gradient (ai.onnx.preview.training) expanded at compile time: every rule against central
differences in float64 (onnx.reference evaluates the forward graph), with broadcasting, several
opsets, substituted inputs, second order, and the refusals."""
from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import helper, numpy_helper
from onnx.reference import ReferenceEvaluator

import onnxc
import onnxc.backend
from onnxc.passes.gradient import expand_gradients
from util import NP2ONNX

TRAINING = "ai.onnx.preview.training"
node = helper.make_node


def build(nodes, feeds, y, xs, zs=(), opset=17, inits=None, grad_inputs=None, shapes=None, outs=None):
    """Forward nodes + Gradient(xs, zs, y); outputs y then dy/dx for each x."""
    inits = inits or {}
    shapes = shapes or {}
    outs = outs or [f"d_{x}" for x in xs]
    grad = node("Gradient", list(grad_inputs or list(xs) + list(zs)), outs, domain=TRAINING,
                name="grad", xs=list(xs), y=y, **({"zs": list(zs)} if zs else {}))
    ins = [helper.make_tensor_value_info(n, NP2ONNX[a.dtype], shapes.get(n, a.shape)) for n, a in feeds.items()]
    g = helper.make_graph(list(nodes) + [grad], "g", ins,
                          [onnx.ValueInfoProto(name=y)] + [onnx.ValueInfoProto(name=o) for o in outs if o],
                          [numpy_helper.from_array(a, n) for n, a in inits.items()])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset), helper.make_opsetid(TRAINING, 1)],
                          ir_version=8 if opset < 21 else 10)
    typed = onnx.shape_inference.infer_shapes(m)
    types = {v.name: v for v in list(typed.graph.value_info) + list(typed.graph.output)}
    et = NP2ONNX[next(iter(feeds.values())).dtype]
    for vi in m.graph.output:
        vi.CopyFrom(types[vi.name] if vi.name in types and vi.name == y
                    else helper.make_tensor_value_info(vi.name, et, None))
    return m


def forward(nodes, feeds, y, inits, opset):
    """The forward graph alone, evaluated by onnx.reference."""
    g = helper.make_graph(list(nodes), "f", [helper.make_tensor_value_info(n, NP2ONNX[a.dtype], a.shape)
                                             for n, a in feeds.items()],
                          [onnx.ValueInfoProto(name=y)],
                          [numpy_helper.from_array(a, n) for n, a in (inits or {}).items()])
    return ReferenceEvaluator(helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)]))


def numeric(fn, feeds, x, eps=1e-6):
    base = {k: v.copy() for k, v in feeds.items()}
    out = np.zeros(feeds[x].shape, np.float64)
    flat = base[x].reshape(-1)
    for i in range(flat.size):
        old = flat[i]
        flat[i] = old + eps
        hi = fn(base)
        flat[i] = old - eps
        lo = fn(base)
        flat[i] = old
        out.reshape(-1)[i] = (hi - lo) / (2 * eps)
    return out


def check(nodes, feeds, y, xs, zs=(), opset=17, inits=None, level=99, rtol=1e-5, atol=1e-6, eps=1e-6):
    m = build(nodes, feeds, y, xs, zs, opset, inits)
    so = onnxc.SessionOptions()
    so.graph_optimization_level = level
    got = onnxc.InferenceSession(m.SerializeToString(), so).run(None, feeds)
    ev = forward(nodes, feeds, y, inits, opset)
    np.testing.assert_allclose(got[0], ev.run(None, feeds)[0], rtol=1e-12, atol=1e-12)

    def fn(f):      # the seed dy/dy = ones makes Gradient's result d(sum y)/dx
        return float(np.sum(ev.run(None, f)[0]))
    for x, dx in zip(xs, got[1:]):
        assert dx.shape == feeds[x].shape and dx.dtype == feeds[x].dtype, (x, dx.shape, dx.dtype)
        np.testing.assert_allclose(dx, numeric(fn, feeds, x, eps), rtol=rtol, atol=atol, err_msg=f"d{y}/d{x}")
    return got


def rnd(seed, *shape, low=None):
    r = np.random.default_rng(seed).standard_normal(shape)
    if low is not None:
        r = np.abs(r) + low
    return np.asarray(r, np.float64)


# --- elementwise binary ops, with broadcasting ---------------------------------------------------

BCAST = [((2, 3, 4), (2, 3, 4)), ((2, 3, 4), (3, 1)), ((2, 3, 4), (4,)), ((2, 1, 4), (3, 1)),
         ((2, 3, 4), ()), ((), ())]


@pytest.mark.parametrize("op", ["Add", "Sub", "Mul", "Div"])
@pytest.mark.parametrize("sa,sb", BCAST)
def test_binary(op, sa, sb):
    feeds = {"a": rnd(1, *sa), "b": rnd(2, *sb, low=0.5)}
    check([node(op, ["a", "b"], ["y"])], feeds, "y", ["a", "b"])


@pytest.mark.parametrize("opset", [9, 12, 13, 18])
def test_binary_opsets_and_reuse(opset):
    # a is read twice (contributions add up); ReduceSum spelling changes at 13
    feeds = {"a": rnd(3, 2, 3), "b": rnd(4, 3)}
    nodes = [node("Mul", ["a", "b"], ["t"]), node("Add", ["t", "a"], ["u"]), node("Mul", ["u", "a"], ["y"])]
    check(nodes, feeds, "y", ["a", "b"], opset=opset)


@pytest.mark.parametrize("op,low", [("Neg", None), ("Identity", None), ("Relu", None), ("Sigmoid", None),
                                    ("Tanh", None), ("Exp", None), ("Log", 0.3), ("Sqrt", 0.3)])
def test_unary(op, low):
    x = rnd(5, 3, 4, low=low)
    if op == "Relu":
        x[np.abs(x) < 1e-3] = 0.5            # away from the kink
    check([node(op, ["x"], ["t"]), node("Mul", ["t", "w"], ["y"])], {"x": x, "w": rnd(6, 4)}, "y", ["x", "w"])


@pytest.mark.parametrize("exp", [np.array(3.0), np.array([2.0, 0.5, -1.0]), np.array(2, np.int64)])
def test_pow_constant_exponent(exp):
    feeds = {"x": rnd(7, 2, 3, low=0.5)}
    check([node("Pow", ["x", "p"], ["y"])], feeds, "y", ["x"], inits={"p": exp})


def test_pow_overridable_exponent():
    # an initializer that is also a graph input is fed at run time: not a compile-time constant
    feeds = {"x": rnd(42, 2, 3, low=0.5), "p": np.array(2.5)}
    check([node("Pow", ["x", "p"], ["y"])], feeds, "y", ["x"], inits={"p": np.array(5.0)})


def test_pow_variable_exponent():
    feeds = {"x": rnd(8, 2, 3, low=0.5), "p": rnd(9, 3)}
    check([node("Pow", ["x", "p"], ["y"])], feeds, "y", ["x", "p"])


def test_sum_and_cast():
    feeds = {"a": rnd(10, 2, 3), "b": rnd(11, 3), "c": rnd(12, 2, 1)}
    nodes = [node("Sum", ["a", "b", "c"], ["s"]), node("Cast", ["s"], ["t"], to=onnx.TensorProto.FLOAT),
             node("Cast", ["t"], ["u"], to=onnx.TensorProto.DOUBLE), node("Mul", ["u", "a"], ["y"])]
    # y is quadratic, so a wide step is exact but for the float32 rounding of the round trip
    check(nodes, feeds, "y", ["a", "b", "c"], rtol=1e-3, atol=1e-4, eps=1e-2)


# --- MatMul and Gemm -----------------------------------------------------------------------------

@pytest.mark.parametrize("sa,sb", [((3, 4), (4, 5)), ((2, 3, 4), (4, 5)), ((3, 4), (2, 4, 5)),
                                   ((2, 1, 3, 4), (3, 4, 2)), ((4,), (4, 5)), ((4,), (2, 4, 5)),
                                   ((3, 4), (4,)), ((2, 3, 4), (4,)), ((4,), (4,))])
def test_matmul(sa, sb):
    feeds = {"a": rnd(13, *sa), "b": rnd(14, *sb)}
    check([node("MatMul", ["a", "b"], ["t"]), node("Mul", ["t", "t"], ["y"])], feeds, "y", ["a", "b"])


@pytest.mark.parametrize("ta", [0, 1])
@pytest.mark.parametrize("tb", [0, 1])
@pytest.mark.parametrize("cshape", [(3, 5), (5,), (1, 5), (3, 1), ()])
def test_gemm(ta, tb, cshape):
    a = rnd(15, 4, 3) if ta else rnd(15, 3, 4)
    b = rnd(16, 5, 4) if tb else rnd(16, 4, 5)
    feeds = {"a": a, "b": b, "c": rnd(17, *cshape)}
    check([node("Gemm", ["a", "b", "c"], ["t"], transA=ta, transB=tb, alpha=0.7, beta=1.3),
           node("Tanh", ["t"], ["y"])], feeds, "y", ["a", "b", "c"])


@pytest.mark.parametrize("opset", [9, 11])
def test_gemm_old_opsets(opset):
    feeds = {"a": rnd(18, 3, 4), "b": rnd(19, 4, 5), "c": rnd(20, 5)}
    check([node("Gemm", ["a", "b", "c"], ["y"])], feeds, "y", ["a", "b", "c"], opset=opset)


# --- shape ops and reductions --------------------------------------------------------------------

@pytest.mark.parametrize("opset", [11, 13, 17])
def test_shape_ops(opset):
    x = rnd(21, 2, 3, 4)
    feeds = {"x": x, "w": rnd(22, 4, 6)}
    ax = {"axes": [1]} if opset < 13 else {}
    axin = ["ax"] if opset >= 13 else []
    nodes = [node("Reshape", ["x", "shp"], ["r"]), node("Transpose", ["r"], ["t"], perm=[1, 0]),
             node("Transpose", ["t"], ["u"]), node("Flatten", ["u"], ["f"], axis=1),
             node("Unsqueeze", ["f"] + axin, ["q"], **ax), node("Squeeze", ["q"] + axin, ["s"], **ax),
             node("MatMul", ["s", "w"], ["m"]), node("Mul", ["m", "m"], ["y"])]
    inits = {"shp": np.array([6, 4], np.int64)}
    if opset >= 13:
        inits["ax"] = np.array([1], np.int64)
    check(nodes, feeds, "y", ["x", "w"], opset=opset, inits=inits)


@pytest.mark.parametrize("op", ["ReduceSum", "ReduceMean"])
@pytest.mark.parametrize("opset", [11, 13, 18])
@pytest.mark.parametrize("axes,keepdims", [([1], 0), ([0, 2], 1), ([-1], 0), (None, 0), (None, 1)])
def test_reduce(op, opset, axes, keepdims):
    as_input = opset >= (13 if op == "ReduceSum" else 18)
    inits = {}
    ins = ["x"]
    attrs = {"keepdims": keepdims}
    if axes is not None and as_input:
        inits["ax"] = np.array(axes, np.int64)
        ins.append("ax")
    elif axes is not None:
        attrs["axes"] = axes
    feeds = {"x": rnd(23, 2, 3, 4), "w": rnd(24, 2, 3, 4)}
    nodes = [node("Mul", ["x", "w"], ["p"]), node(op, ["p"] + ins[1:], ["r"], **attrs),
             node("Mul", ["r", "r"], ["y"])]
    check(nodes, feeds, "y", ["x", "w"], opset=opset, inits=inits)


def test_reduce_noop_with_empty_axes():
    feeds = {"x": rnd(25, 2, 3)}
    check([node("ReduceSum", ["x"], ["r"], noop_with_empty_axes=1), node("Mul", ["r", "r"], ["y"])],
          feeds, "y", ["x"], opset=13)


def test_where_and_expand():
    feeds = {"a": rnd(26, 3, 1), "b": rnd(27, 4)}
    nodes = [node("Expand", ["a", "shp"], ["e"]), node("Greater", ["e", "b"], ["c"]),
             node("Where", ["c", "e", "b"], ["w"]), node("Mul", ["w", "e"], ["y"])]
    check(nodes, feeds, "y", ["a", "b"], opset=13, inits={"shp": np.array([3, 4], np.int64)})


# --- Gradient semantics ----------------------------------------------------------------------------

def test_zs_unused_x_and_levels():
    feeds = {"a": rnd(28, 2, 3), "z": rnd(29, 3), "u": rnd(30, 2, 3)}
    nodes = [node("Mul", ["a", "z"], ["t"]), node("Sigmoid", ["t"], ["y"])]
    for level in (0, 99):
        m = build(nodes, feeds, "y", ["a", "u"], ["z"])
        so = onnxc.SessionOptions()
        so.graph_optimization_level = level
        y, da, du = onnxc.InferenceSession(m.SerializeToString(), so).run(None, feeds)
        s = 1 / (1 + np.exp(-feeds["a"] * feeds["z"]))
        np.testing.assert_allclose(da, s * (1 - s) * feeds["z"], rtol=1e-12)
        assert du.shape == (2, 3) and not du.any()       # y does not depend on u


def test_float32_and_skipped_output():
    feeds = {"a": rnd(31, 3).astype(np.float32), "b": rnd(32, 3).astype(np.float32)}
    m = build([node("Mul", ["a", "b"], ["y"])], feeds, "y", ["a", "b"], outs=["", "d_b"])
    y, db = onnxc.InferenceSession(m.SerializeToString()).run(None, feeds)
    assert db.dtype == np.float32
    np.testing.assert_array_equal(db, feeds["a"])


def test_substituted_inputs():
    # Gradient(xs=[h], y) fed h1: dy/dh at h = h1, where y = tanh(h) * w, h = a + 1
    feeds = {"a": rnd(33, 3), "w": rnd(34, 3), "h1": rnd(35, 3)}
    nodes = [node("Add", ["a", "one"], ["h"]), node("Tanh", ["h"], ["t"]), node("Mul", ["t", "w"], ["y"])]
    m = build(nodes, feeds, "y", ["h", "w"], grad_inputs=["h1", "w"], inits={"one": np.array(1.0)})
    y, dh, dw = onnxc.InferenceSession(m.SerializeToString()).run(None, feeds)
    np.testing.assert_allclose(y, np.tanh(feeds["a"] + 1) * feeds["w"], rtol=1e-12)
    np.testing.assert_allclose(dh, (1 - np.tanh(feeds["h1"]) ** 2) * feeds["w"], rtol=1e-12)
    np.testing.assert_allclose(dw, np.tanh(feeds["h1"]), rtol=1e-12)


def test_second_order():
    # y = x^3 (as x*x*x); dy/dx = 3x^2; d2y/dx2 = 6x
    feeds = {"x": rnd(36, 4)}
    g1 = node("Gradient", ["x"], ["dx"], domain=TRAINING, name="g1", xs=["x"], y="y")
    g2 = node("Gradient", ["x"], ["ddx"], domain=TRAINING, name="g2", xs=["x"], y="dx")
    g = helper.make_graph([node("Mul", ["x", "x"], ["s"]), node("Mul", ["s", "x"], ["y"]), g2, g1], "g",
                          [helper.make_tensor_value_info("x", onnx.TensorProto.DOUBLE, [4])],
                          [helper.make_tensor_value_info(n, onnx.TensorProto.DOUBLE, [4]) for n in ("dx", "ddx")])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid(TRAINING, 1)])
    dx, ddx = onnxc.InferenceSession(m.SerializeToString()).run(None, feeds)
    np.testing.assert_allclose(dx, 3 * feeds["x"] ** 2, rtol=1e-12)
    np.testing.assert_allclose(ddx, 6 * feeds["x"], rtol=1e-12)


def test_symbolic_batch():
    feeds = {"a": rnd(37, 5, 3), "b": rnd(38, 3)}
    m = build([node("Mul", ["a", "b"], ["y"])], feeds, "y", ["a", "b"], shapes={"a": ["N", 3]})
    sess = onnxc.InferenceSession(m.SerializeToString())
    for n in (5, 2):
        f = {"a": feeds["a"][:n], "b": feeds["b"]}
        y, da, db = sess.run(None, f)
        np.testing.assert_allclose(da, np.broadcast_to(f["b"], (n, 3)), rtol=1e-12)
        np.testing.assert_allclose(db, f["a"].sum(0), rtol=1e-12)


def test_undecidable_broadcast_is_refused():
    feeds = {"a": rnd(39, 5, 3), "b": rnd(40, 5, 3)}
    m = build([node("Add", ["a", "b"], ["y"])], feeds, "y", ["a", "b"], shapes={"a": ["N", 3], "b": ["M", 3]})
    with pytest.raises(onnxc.NotImplemented, match="broadcast along axis 0"):
        expand_gradients(m)


def test_unsupported_op_is_refused():
    feeds = {"x": rnd(41, 3)}
    m = build([node("Sin", ["x"], ["s"], name="my_sin"), node("Mul", ["s", "x"], ["y"])], feeds, "y", ["x"])
    with pytest.raises(onnxc.NotImplemented, match=r"no gradient rule for node 'my_sin' \(Sin\)"):
        onnxc.InferenceSession(m.SerializeToString())
    assert not onnxc.backend.is_compatible(m)
    good = build([node("Exp", ["x"], ["s"]), node("Mul", ["s", "x"], ["y"])], feeds, "y", ["x"])
    assert onnxc.backend.is_compatible(good)


def test_integer_x_is_refused():
    feeds = {"x": np.arange(3, dtype=np.int64)}
    m = build([node("Mul", ["x", "x"], ["y"])], feeds, "y", ["x"])
    with pytest.raises(onnxc.NotImplemented, match="float tensors only"):
        expand_gradients(m)


@pytest.mark.parametrize("dtype", [np.float32, np.float16, "bfloat16"])
def test_low_precision_types(dtype):
    import ml_dtypes
    dt = np.dtype(ml_dtypes.bfloat16 if dtype == "bfloat16" else dtype)
    a, b = rnd(43, 2, 3), rnd(44, 3)
    feeds = {"a": a.astype(dt), "b": b.astype(dt)}
    m = build([node("Mul", ["a", "b"], ["t"]), node("Tanh", ["t"], ["y"])], feeds, "y", ["a", "b"])
    try:
        y, da, db = onnxc.InferenceSession(m.SerializeToString()).run(None, feeds)
    except onnxc.NotImplemented as e:
        pytest.skip(f"{dt} not supported by an op on the path: {e}")
    a, b = feeds["a"].astype(np.float64), feeds["b"].astype(np.float64)
    s = 1 - np.tanh(a * b) ** 2
    tol = {np.float32: 1e-5, np.float16: 1e-2}.get(dt.type, 3e-2)
    assert da.dtype == dt and db.dtype == dt
    np.testing.assert_allclose(da.astype(np.float64), s * b, rtol=tol, atol=tol)
    np.testing.assert_allclose(db.astype(np.float64), (s * a).sum(0), rtol=tol, atol=tol)
