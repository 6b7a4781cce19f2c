"""Gemm and MatMul against onnx.reference, plus the SGEMM kernel's blocking edges."""
import re
from pathlib import Path

import numpy as np
import pytest
from onnx import helper

import onnxc
from onnxc.ops import gemm as gemm_op
from util import NP2ONNX, assert_close, check, make_model_from_nodes, make_node_model, run_both, typed_outputs

rng = np.random.default_rng(7)
ROOT = Path(__file__).resolve().parent.parent
INTS = [np.int32, np.int64, np.uint32, np.uint64]


def rand(shape, dtype=np.float32):
    if np.dtype(dtype).kind in "iu":
        lo = 0 if np.dtype(dtype).kind == "u" else -5
        return rng.integers(lo, 6, shape).astype(dtype)
    return rng.standard_normal(shape).astype(dtype)


def tol(dtype, k):
    """float32 sums of k products: error grows with k."""
    return dict(rtol=1e-4, atol=1e-5 * max(1, k) ** 0.5) if dtype == np.float32 else dict(rtol=1e-10, atol=1e-10)


def test_blocking_constants_match_header():
    text = (ROOT / "runtime_c" / "onnxc_gemm.h").read_text()
    for name in ("KC", "MCH", "NC", "MR_MAX", "NR_MAX"):
        m = re.search(rf"#define ONNXC_SGEMM_{name} (\d+)", text)
        assert m and int(m.group(1)) == getattr(gemm_op, f"SGEMM_{name}"), name


def build(model, dtype=np.float32, rank=2):
    """Build only (error tests): outputs declared with a type and unknown dims."""
    for vi in model.graph.output:
        vi.CopyFrom(helper.make_tensor_value_info(vi.name, NP2ONNX[np.dtype(dtype)], [None] * rank))
    return onnxc.InferenceSession(model.SerializeToString())


def check_numpy(model, feeds, want, **tols):
    """For opsets onnx.reference does not implement: compare with a numpy result."""
    typed_outputs(model, want)
    got = onnxc.InferenceSession(model.SerializeToString()).run(None, feeds)
    assert_close(want, got, **tols)


# ---- Gemm ---------------------------------------------------------------------------------
def gemm_inputs(M, N, K, ta, tb, dtype):
    a = rand((K, M) if ta else (M, K), dtype)
    b = rand((N, K) if tb else (K, N), dtype)
    return a, b


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("M,N,K", [(37, 53, 300), (67, 131, 600), (1, 77, 129), (45, 1, 70), (2, 2, 1),
                                   (200, 70, 33), (13, 1600, 40), (49, 512, 300)])
def test_gemm_trans_combos(dtype, M, N, K):
    """All four transA/transB combinations in one model, alpha/beta and a row-vector C."""
    ins, nodes, outs = {}, [], []
    c = rand((N,), dtype)
    for ta in (0, 1):
        for tb in (0, 1):
            a, b = gemm_inputs(M, N, K, ta, tb, dtype)
            ins[f"a{ta}{tb}"], ins[f"b{ta}{tb}"] = a, b
            nodes.append(helper.make_node("Gemm", [f"a{ta}{tb}", f"b{ta}{tb}", "c"], [f"y{ta}{tb}"],
                                          transA=ta, transB=tb, alpha=0.75, beta=-1.25))
            outs.append(f"y{ta}{tb}")
    feeds = {**ins, "c": c}
    check(make_model_from_nodes(nodes, feeds, {}, outs, opset=13), feeds, **tol(dtype, K))


@pytest.mark.parametrize("cshape", [(23, 31), (31,), (1, 31), (23, 1), (1, 1), (1,), (), None])
def test_gemm_c_broadcast(cshape):
    a, b = rand((23, 300)), rand((300, 31))
    feeds = {"a": a, "b": b}
    if cshape is not None:
        feeds["c"] = rand(cshape)
    check(make_node_model("Gemm", feeds, {"alpha": 2.0, "beta": 0.5}), feeds, **tol(np.float32, 300))


def test_gemm_c_initializer_and_inplace():
    """C as a constant and C computed by a previous node (the planner may give Y C's buffer)."""
    a, b, c = rand((17, 40)), rand((40, 19)), rand((17, 19))
    nodes = [helper.make_node("Relu", ["c"], ["c2"]),
             helper.make_node("Gemm", ["a", "b", "c2"], ["y"], beta=3.0),
             helper.make_node("Gemm", ["a", "w", "cw"], ["z"], transB=1)]
    m = make_model_from_nodes(nodes, {"a": a, "b": b, "c": c}, {"w": rand((19, 40)), "cw": rand((19,))},
                              ["y", "z"], opset=13)
    check(m, {"a": a, "b": b, "c": c}, **tol(np.float32, 40))


@pytest.mark.parametrize("opset", [1, 6, 7, 9, 11, 13])
def test_gemm_opsets(opset):
    a, b = rand((9, 30)), rand((11, 30))
    c = rand((9, 11)) if opset < 7 else rand((11,))
    attrs = {"transB": 1, "alpha": 0.5}
    if opset < 7:
        attrs["broadcast"] = 0   # onnx.reference then adds C without beta: keep beta = 1
    else:
        attrs["beta"] = 2.0
    m = make_node_model("Gemm", {"a": a, "b": b, "c": c}, attrs, opset=opset)
    if opset == 1:   # onnx.reference has no Gemm-1
        check_numpy(m, {"a": a, "b": b, "c": c}, [0.5 * a @ b.T + c])
    else:
        check(m, {"a": a, "b": b, "c": c})


@pytest.mark.parametrize("opset", [1, 6])
def test_gemm_old_broadcast_attr(opset):
    a, b, c = rand((9, 30)), rand((30, 11)), rand((11,))
    feeds = {"a": a, "b": b, "c": c}
    check_numpy(make_node_model("Gemm", feeds, {"broadcast": 1, "beta": 0.5}, opset=opset), feeds,
                [a @ b + 0.5 * c], rtol=1e-5, atol=1e-5)
    m = make_node_model("Gemm", feeds, {"broadcast": 0}, opset=opset)
    with pytest.raises(onnxc.InvalidGraph, match="broadcast"):
        build(m)


@pytest.mark.parametrize("dtype", INTS)
@pytest.mark.parametrize("opset", [9, 13])
def test_gemm_int(dtype, opset):
    a, b, c = rand((7, 40), dtype), rand((40, 9), dtype), rand((9,), dtype)
    feeds = {"a": a, "b": b, "c": c}
    check(make_node_model("Gemm", feeds, opset=opset), feeds)                       # exact
    check(make_node_model("Gemm", feeds, {"alpha": 2.0, "beta": 3.0, "transB": 0}, opset=opset), feeds)
    if opset >= 11:   # C optional
        feeds2 = {"a": a, "b": b}
        check(make_node_model("Gemm", feeds2, {"transA": 0}, opset=opset), feeds2)


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
def test_gemm_nan_inf_propagate():
    a, b, c = rand((20, 300)), rand((300, 40)), rand((20, 40))
    a[0, 5], a[3, 0], b[7, 2], b[9, 9] = np.nan, np.inf, -np.inf, 0.0
    a[4, :] = 0.0
    b[:, 11] = np.inf          # 0 * inf = NaN in row 4, column 11
    c[1, 1] = np.nan
    feeds = {"a": a, "b": b, "c": c}
    got = check(make_node_model("Gemm", feeds, {"beta": 1.0}), feeds, **tol(np.float32, 300))[0]
    assert np.isnan(got[0]).all() and np.isnan(got[1, 1]) and np.isnan(got[4, 11])
    # beta = 0: C is not used at all (onnx.reference and onnxruntime agree), even when it holds NaN
    c[:] = np.nan
    check(make_node_model("Gemm", feeds, {"beta": 0.0}), feeds, **tol(np.float32, 300))


def test_gemm_symbolic_batch():
    w, bias = rand((784, 130)), rand((130,))
    x = rand((3, 784))
    m = make_node_model("Gemm", {"x": x}, initializers={"w": w, "b": bias}, input_shapes={"x": ["N", 784]})
    ref, _ = run_both(m, {"x": x})
    sess = onnxc.InferenceSession(m.SerializeToString())
    assert sess.get_inputs()[0].shape == ["N", 784]
    for n in (1, 7, 32, 1100, 5):
        x = rand((n, 784))
        want = x @ w + bias
        np.testing.assert_allclose(sess.run(None, {"x": x})[0], want, rtol=1e-4, atol=1e-3)


def test_gemm_errors():
    a, b = rand((4, 5)), rand((6, 3))
    with pytest.raises(onnxc.InvalidGraph, match="inner dimensions"):
        build(make_node_model("Gemm", {"a": a, "b": b}, opset=13))
    with pytest.raises(onnxc.InvalidGraph, match="cannot be broadcast"):
        build(make_node_model("Gemm", {"a": a, "b": rand((3, 5)), "c": rand((4, 2))}, {"transB": 1}, opset=13))
    a16 = a.astype(np.float16)
    m = make_node_model("Gemm", {"a": a16, "b": b.T.copy().astype(np.float16)}, opset=13)
    with pytest.raises(onnxc.NotImplemented, match="float16"):
        build(m, np.float16)


# ---- MatMul -------------------------------------------------------------------------------
@pytest.mark.parametrize("sa,sb", [
    ((300,), (300,)), ((70,), (70, 33)), ((41, 70), (70,)), ((3, 41, 70), (70,)), ((70,), (2, 70, 5)),
    ((37, 300), (300, 53)), ((2, 3, 19, 40), (40, 23)), ((4, 19, 40), (4, 40, 23)),
    ((2, 1, 19, 40), (3, 40, 23)), ((19, 40), (5, 40, 23)), ((1, 6, 30), (2, 1, 30, 7)),
    ((1, 1), (1, 1)), ((64, 576), (576, 3136))])
def test_matmul_shapes(sa, sb):
    a, b = rand(sa), rand(sb)
    check(make_node_model("MatMul", {"a": a, "b": b}), {"a": a, "b": b}, **tol(np.float32, sa[-1]))


@pytest.mark.parametrize("dtype", [np.float64] + INTS)
@pytest.mark.parametrize("opset", [9, 13])
def test_matmul_types(dtype, opset):
    a, b = rand((2, 9, 30), dtype), rand((30, 11), dtype)
    c, d = rand((3, 1, 5, 8), dtype), rand((4, 8, 6), dtype)
    nodes = [helper.make_node("MatMul", ["a", "b"], ["y"]), helper.make_node("MatMul", ["c", "d"], ["z"])]
    feeds = {"a": a, "b": b, "c": c, "d": d}
    check(make_model_from_nodes(nodes, feeds, {}, ["y", "z"], opset=opset), feeds, **tol(dtype, 30))


def test_matmul_opset1():
    a, b = rand((5, 30)), rand((30, 7))
    check(make_node_model("MatMul", {"a": a, "b": b}, opset=1), {"a": a, "b": b})


def test_matmul_int_wraps():
    a = np.full((2, 3), np.iinfo(np.int32).max, np.int32)
    b = np.full((3, 2), 3, np.int32)
    check(make_node_model("MatMul", {"a": a, "b": b}), {"a": a, "b": b})


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
def test_matmul_nan_inf():
    a, b = rand((33, 260)), rand((260, 50))
    a[2, 3], b[5, 7], b[6, 8] = np.nan, np.inf, -np.inf
    feeds = {"a": a, "b": b}
    got = check(make_node_model("MatMul", feeds), feeds, **tol(np.float32, 260))[0]
    assert np.isnan(got[2]).all()
    # one side a vector (the kernel's matrix-vector path)
    v = rand((260,))
    v[0] = np.nan
    check(make_node_model("MatMul", {"a": a, "v": v}), {"a": a, "v": v}, **tol(np.float32, 260))


def test_matmul_symbolic_batch():
    w = rand((64, 48))
    x = rand((2, 5, 64))
    m = make_node_model("MatMul", {"x": x}, initializers={"w": w}, input_shapes={"x": ["N", "S", 64]})
    run_both(m, {"x": x})
    sess = onnxc.InferenceSession(m.SerializeToString())
    for n, s in ((1, 1), (3, 17), (8, 130), (2, 5)):
        x = rand((n, s, 64))
        np.testing.assert_allclose(sess.run(None, {"x": x})[0], x @ w, rtol=1e-4, atol=1e-4)
    # batched on both sides, broadcast symbolic batch
    x, y = rand((2, 7, 16)), rand((2, 16, 9))
    m = make_node_model("MatMul", {"x": x, "y": y}, input_shapes={"x": ["B", 7, 16], "y": ["B", 16, 9]})
    run_both(m, {"x": x, "y": y})
    sess = onnxc.InferenceSession(m.SerializeToString())
    for n in (1, 4, 11):
        x, y = rand((n, 7, 16)), rand((n, 16, 9))
        np.testing.assert_allclose(sess.run(None, {"x": x, "y": y})[0], x @ y, rtol=1e-4, atol=1e-4)


def test_matmul_errors():
    with pytest.raises(onnxc.InvalidGraph, match="inner dimensions"):
        build(make_node_model("MatMul", {"a": rand((3, 4)), "b": rand((5, 6))}))
    with pytest.raises(onnxc.InvalidGraph, match="broadcast"):
        build(make_node_model("MatMul", {"a": rand((2, 3, 4)), "b": rand((3, 4, 6))}), rank=3)
