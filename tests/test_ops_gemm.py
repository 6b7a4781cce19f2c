"""Gemm and MatMul against onnx.reference, plus the SGEMM kernel's blocking edges."""
import platform
import re
from pathlib import Path

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

import onnxc
from onnxc.ops import gemm as gemm_op
from util import (NP2ONNX, assert_close, check, make_model_from_nodes, make_node_model, poisoned, run_both,
                  typed_outputs)

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
                                   (200, 70, 33), (13, 1600, 40), (49, 512, 300),
                                   (3, 133, 70), (8, 70, 515), (5, 64, 16)])
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


@pytest.mark.parametrize("nt", [1, 2])
@pytest.mark.parametrize("sa,sb,res", [
    ((1, 4, 128, 64), (1, 4, 64, 128), False),     # 4 GEMMs: two per thread, own workspaces
    ((2, 3, 40, 64), (3, 64, 50), True),           # broadcast batch, 6 GEMMs, fused residual
    ((3, 96, 64), (3, 64, 96), False),             # 3 GEMMs at 2 threads: each split instead
])
def test_matmul_batched_threads(sa, sb, res, nt):
    a, b = rand(sa), rand(sb)
    feeds = {"a": a, "b": b}
    nodes = [helper.make_node("MatMul", ["a", "b"], ["y"])]
    if res:
        feeds["z"] = rand(np.broadcast_shapes(sa[:-2], sb[:-2]) + (sa[-2], sb[-1]))
        nodes.append(helper.make_node("Add", ["y", "z"], ["s"]))
    m = make_model_from_nodes(nodes, feeds, {}, ["s" if res else "y"])
    want = a.astype(np.float64) @ b.astype(np.float64) + (feeds["z"] if res else 0)
    typed_outputs(m, [want.astype(np.float32)])
    so = onnxc.SessionOptions()
    so.intra_op_num_threads = nt
    with poisoned():
        got = onnxc.InferenceSession(m.SerializeToString(), so).run(None, feeds)[0]
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


def test_matmul_batched_symbolic_threads():
    x, y = rand((4, 64, 64)), rand((4, 64, 64))
    m = make_node_model("MatMul", {"x": x, "y": y}, input_shapes={"x": ["B", 64, 64], "y": ["B", 64, 64]})
    run_both(m, {"x": x, "y": y})
    so = onnxc.SessionOptions()
    so.intra_op_num_threads = 2
    sess = onnxc.InferenceSession(m.SerializeToString(), so)
    for n in (1, 3, 4, 9):
        x, y = rand((n, 64, 64)), rand((n, 64, 64))
        np.testing.assert_allclose(sess.run(None, {"x": x, "y": y})[0], x @ y, rtol=1e-4, atol=1e-4)


def test_matmul_errors():
    with pytest.raises(onnxc.InvalidGraph, match="inner dimensions"):
        build(make_node_model("MatMul", {"a": rand((3, 4)), "b": rand((5, 6))}))
    with pytest.raises(onnxc.InvalidGraph, match="broadcast"):
        build(make_node_model("MatMul", {"a": rand((2, 3, 4)), "b": rand((3, 4, 6))}), rank=3)


# ---- the C kernels directly: leading dims, transposes, threads, workspace bounds -----------
KERNEL_TEST_C = r"""
#include <stdio.h>
#include <stdlib.h>
#include "onnxc_gemm.h"

static int check(int ta, int tb, int64_t M, int64_t N, int64_t K, float alpha, float beta, int nt, int mode)
{
    /* mode 0: onnxc_sgemm; 1: onnxc_sgemm_wpack + wmul (A as the weights, never transposed) */
    if (mode == 1) ta = 0;
    const int64_t lda = (ta ? M : K) + 3, ldb = (tb ? K : N) + 5, ldc = N + 2;
    float *A = malloc(sizeof(float) * (ta ? K : M) * lda + 4), *B = malloc(sizeof(float) * (tb ? N : K) * ldb + 4);
    float *C = malloc(sizeof(float) * M * ldc + 4);
    double *R = malloc(sizeof(double) * M * ldc + 8);
    for (int64_t i = 0; i < (ta ? K : M) * lda; ++i) A[i] = (float)((i * 37 % 101) - 50) / 50.0f;
    for (int64_t i = 0; i < (tb ? N : K) * ldb; ++i) B[i] = (float)((i * 53 % 97) - 48) / 48.0f;
    for (int64_t i = 0; i < M * ldc; ++i) { C[i] = beta == 0.0f ? NAN : (float)(i % 7); R[i] = C[i]; }
    int64_t wb = ONNXC_SGEMM_WORK_BYTES(M, N, K), wb2 = ONNXC_SGEMM_WORK_BYTES(N, M, K);
    if (mode == 1 && wb2 > wb) wb = wb2;
    unsigned char *work = malloc((size_t)wb + 64);
    memset(work, 0xAB, (size_t)wb + 64);   /* canary past the declared size */
    if (mode == 0) {
        onnxc_sgemm(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, work, nt);
    } else {
        /* B must be plain (K x N) for wmul */
        float *Bp = malloc(sizeof(float) * K * N + 4);
        for (int64_t k = 0; k < K; ++k) for (int64_t j = 0; j < N; ++j) Bp[k * N + j] = tb ? B[j * ldb + k] : B[k * ldb + j];
        for (int swapped = 0; swapped < 2; ++swapped) {
            unsigned char *wp = malloc((size_t)ONNXC_SGEMM_WPACK_BYTES(M, K) + 64);
            memset(wp, 0xCD, (size_t)ONNXC_SGEMM_WPACK_BYTES(M, K) + 64);
            for (int64_t i = 0; i < M * ldc; ++i) C[i] = (float)R[i];
            onnxc_sgemm_wpack(swapped, M, K, A, lda, wp, nt);
            onnxc_sgemm_wmul(swapped, M, N, K, alpha, wp, Bp, N, beta, C, ldc, work, nt);
            for (int b = 0; b < 64; ++b) if (wp[ONNXC_SGEMM_WPACK_BYTES(M, K) + b] != 0xCD) { printf("wpack overrun\n"); return 1; }
            free(wp);
            if (!swapped) { /* compared after the loop for swapped = 1; check 0 here */
                for (int64_t i = 0; i < M; ++i) for (int64_t j = 0; j < N; ++j) {
                    double s = 0; for (int64_t k = 0; k < K; ++k) s += (double)A[i * lda + k] * Bp[k * N + j];
                    double want = alpha * s + (beta == 0.0f ? 0.0 : beta * R[i * ldc + j]);
                    if (fabs(want - C[i * ldc + j]) > 1e-3 * (1 + fabs(want))) { printf("wmul mismatch\n"); return 1; }
                }
            }
        }
        free(Bp);
    }
    for (int b = 0; b < 64; ++b) if (work[wb + b] != 0xAB) { printf("workspace overrun %d\n", b); return 1; }
    for (int64_t i = 0; i < M; ++i)
        for (int64_t j = 0; j < N; ++j) {
            double s = 0;
            for (int64_t k = 0; k < K; ++k)
                s += (double)(ta ? A[k * lda + i] : A[i * lda + k]) * (tb ? B[j * ldb + k] : B[k * ldb + j]);
            double want = alpha * s + (beta == 0.0f ? 0.0 : beta * R[i * ldc + j]);
            if (!(fabs(want - C[i * ldc + j]) <= 1e-3 * (1 + fabs(want)))) {
                printf("mismatch mode %d ta %d tb %d M %lld N %lld K %lld at %lld,%lld: %g vs %g\n", mode, ta, tb,
                       (long long)M, (long long)N, (long long)K, (long long)i, (long long)j, C[i * ldc + j], want);
                return 1;
            }
        }
    for (int64_t i = 0; i < M; ++i)   /* the padding columns of C are untouched */
        for (int64_t j = N; j < ldc; ++j)
            if (!(C[i * ldc + j] == (float)R[i * ldc + j] || (C[i * ldc + j] != C[i * ldc + j] && R[i * ldc + j] != R[i * ldc + j]))) {
                printf("wrote outside C\n"); return 1;
            }
    free(A); free(B); free(C); free(R); free(work);
    return 0;
}

int main(void)
{
    static const int64_t shapes[][3] = {{1, 1, 1}, {1, 37, 300}, {37, 1, 300}, {2, 3, 1}, {13, 17, 5}, {100, 77, 513},
        {7, 300, 1000}, {300, 33, 257}, {1030, 70, 20}, {49, 512, 300}, {512, 49, 600}, {25, 1600, 30},
        {9, 143, 4}, {200, 200, 0}, {64, 3136, 147}, {8, 199, 517}, {3, 64, 16}, {5, 131, 7},
        {2, 600, 300}};
    int bad = 0;
    for (unsigned s = 0; s < sizeof shapes / sizeof shapes[0]; ++s)
        for (int t = 0; t < 4; ++t)
            for (int nt = 1; nt <= 3; nt += 2) {
                const float beta = (s + t) % 3 == 0 ? 0.0f : ((s + t) % 3 == 1 ? 1.0f : -0.5f);
                bad |= check(t & 1, t >> 1, shapes[s][0], shapes[s][1], shapes[s][2], 1.25f, beta, nt, 0);
                if (t == 0)
                    bad |= check(0, 0, shapes[s][0], shapes[s][1], shapes[s][2], 0.5f, beta, nt, 1);
            }
    printf("%s\n", bad ? "FAIL" : "OK");
    return bad;
}
"""


def test_sgemm_kernel_direct(tmp_path):
    """onnxc_sgemm and the prepacked path with odd leading dims, every transpose, 1 and 3
    threads, beta = 0 over a NaN-filled C, and canaries past the declared workspace sizes."""
    import subprocess
    from onnxc import build
    from onnxc.resources import runtime_dir
    tc = build.toolchain()
    (tmp_path / "k.c").write_text(KERNEL_TEST_C)
    res = subprocess.run([tc.cc, *tc.flags, "-I", str(runtime_dir()), "k.c", "-o", "k", "-lm"], cwd=tmp_path,
                         capture_output=True, text=True)
    assert res.returncode == 0, res.stderr
    run = subprocess.run([str(tmp_path / "k")], capture_output=True, text=True, timeout=300)
    assert run.returncode == 0 and run.stdout.strip().endswith("OK"), run.stdout + run.stderr


def test_work_bytes_match_header(tmp_path):
    """The planner's workspace sizes (Python) equal the C macros for a spread of shapes."""
    import subprocess
    from onnxc import build
    from onnxc.resources import runtime_dir
    shapes = [(1, 1, 1), (7, 300, 1000), (5000, 3, 7000), (64, 3136, 576), (2000, 9000, 100)]
    prog = '#include <stdio.h>\n#include "onnxc_gemm.h"\nint main(void){\n' + "".join(
        f'printf("%lld %lld\\n", (long long)ONNXC_SGEMM_WORK_BYTES({m}, {n}, {k}), '
        f'(long long)ONNXC_SGEMM_WPACK_BYTES({m}, {k}));\n' for m, n, k in shapes) + "return 0;}\n"
    (tmp_path / "w.c").write_text(prog)
    tc = build.toolchain()
    res = subprocess.run([tc.cc, *tc.flags, "-I", str(runtime_dir()), "w.c", "-o", "w"], cwd=tmp_path,
                         capture_output=True, text=True)
    assert res.returncode == 0, res.stderr
    out = subprocess.run([str(tmp_path / "w")], capture_output=True, text=True).stdout.split("\n")
    for (m, n, k), line in zip(shapes, out):
        work, wpack = map(int, line.split())
        assert work == gemm_op.sgemm_work_bytes(m, n, k)
        assert wpack == gemm_op.sgemm_wpack_bytes(m, k)


def test_zero_sized():
    """K = 0 gives zeros (plus beta * C); M or N = 0 gives empty outputs."""
    a, b, c = np.zeros((3, 0), np.float32), np.zeros((0, 4), np.float32), rand((4,))
    check(make_node_model("MatMul", {"a": a, "b": b}), {"a": a, "b": b})
    check(make_node_model("Gemm", {"a": a, "b": b, "c": c}, {"beta": 2.0}), {"a": a, "b": b, "c": c})
    check(make_node_model("Gemm", {"a": a.astype(np.float64), "b": b.astype(np.float64)}),
          {"a": a.astype(np.float64), "b": b.astype(np.float64)})
    e, f = np.zeros((0, 5), np.int64), rand((5, 4), np.int64)
    check(make_node_model("MatMul", {"e": e, "f": f}), {"e": e, "f": f})


# ---- batch-1 layers: op(B) prepacked as column strips (passes/prepack.py, onnxc_gemv.h) ----------

def _gemv_prepacked(model) -> list:
    from onnxc import compiler
    c = compiler.compile_model(model, gemm_block=(8, 48))
    return [bool((n.attrs.get("_prepacked") or {}).get("gemv")) for n in c.graph.nodes
            if n.op_type in ("Gemm", "FusedGemm")]


@pytest.mark.parametrize("M,N,K", [(1, 512, 784), (1, 120, 400), (1, 10, 84), (1, 130, 7), (3, 200, 33),
                                   (8, 17, 129), (1, 1, 1), (6, 300, 5), (7, 129, 64)])
@pytest.mark.parametrize("tb", [0, 1])
def test_gemm_strips(M, N, K, tb):
    b = rand((N, K) if tb else (K, N))
    a, c = rand((M, K)), rand((N,))
    m = make_node_model("Gemm", {"a": a}, {"transB": tb, "alpha": 0.75, "beta": 1.5},
                        initializers={"b": b, "c": c})
    assert _gemv_prepacked(m) == [True]
    with poisoned():
        check(m, {"a": a}, **tol(np.float32, K))


@pytest.mark.parametrize("cshape", [(1, 1), (5, 1), (5, 70), None])
def test_gemm_strips_c_shapes_fused(cshape):
    """Gemm + residual Add + Relu fused (FusedGemm) on the strips path; C broadcast."""
    a, b, z = rand((5, 90)), rand((70, 90)), rand((5, 70))
    inits = {"b": b}
    if cshape is not None:
        inits["c"] = rand(cshape)
    nodes = [helper.make_node("Gemm", ["a", "b"] + (["c"] if cshape is not None else []), ["g"], transB=1),
             helper.make_node("Add", ["g", "z"], ["s"]), helper.make_node("Relu", ["s"], ["y"])]
    feeds = {"a": a, "z": z}
    m = make_model_from_nodes(nodes, feeds, inits, ["y"])
    assert _gemv_prepacked(m) == [True]
    check(m, feeds, **tol(np.float32, 90))


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
def test_gemm_strips_nan_inf():
    a, b = rand((2, 300)), rand((40, 300))
    a[0, 5], b[7, 2], b[9, 9] = np.nan, -np.inf, np.inf
    a[1, 9] = 0.0              # 0 * inf = NaN in row 1, column 9
    m = make_node_model("Gemm", {"a": a}, {"transB": 1}, initializers={"b": b})
    got = check(m, {"a": a}, **tol(np.float32, 300))[0]
    assert np.isnan(got[0]).all() and np.isnan(got[1, 9]) and np.isinf(got[1, 7])


def test_gemm_strips_symbolic_batch():
    """A symbolic row count keeps the plain B: few rows take the strips, many the SGEMM."""
    w, bias = rand((130, 784)), rand((130,))
    x = rand((3, 784))
    m = make_node_model("Gemm", {"x": x}, {"transB": 1}, initializers={"w": w, "b": bias},
                        input_shapes={"x": ["N", 784]})
    assert _gemv_prepacked(m) == [True]
    run_both(m, {"x": x})
    for nt in (1, 2):
        so = onnxc.SessionOptions()
        so.intra_op_num_threads = nt
        sess = onnxc.InferenceSession(m.SerializeToString(), so)
        for n in (1, 8, 9, 64, 2):
            x = rand((n, 784))
            np.testing.assert_allclose(sess.run(None, {"x": x})[0], x @ w.T + bias, rtol=1e-4, atol=1e-3)


def test_gemv_strips_layout():
    from onnxc.passes.prepack import GEMV_PAD, gemv_strips
    text = (ROOT / "runtime_c" / "onnxc_gemv.h").read_text()
    assert f"#define ONNXC_GEMV_PAD {GEMV_PAD} " in text
    b = np.arange(3 * 150, dtype=np.float32).reshape(3, 150)
    s = gemv_strips(b)
    assert s.size == 3 * 160
    assert (s[:3 * 128].reshape(3, 128) == b[:, :128]).all()
    tail = s[3 * 128:].reshape(3, 32)
    assert (tail[:, :22] == b[:, 128:]).all() and (tail[:, 22:] == 0).all()
    s = gemv_strips(b, 64)                          # 64, 64, then the padded 32-wide rest
    assert s.size == 3 * 160
    assert (s[:3 * 64].reshape(3, 64) == b[:, :64]).all()
    assert (s[3 * 64:6 * 64].reshape(3, 64) == b[:, 64:128]).all()
    assert (s[6 * 64:].reshape(3, 32)[:, :22] == b[:, 128:]).all()
    for bad in (0, 24, -16):
        with pytest.raises(ValueError, match="strip width"):
            gemv_strips(b, bad)


def test_gemv_strip_width_is_the_builds_tile():
    """The strip width asked of the compiler: 8 vectors of the build's ISA (64 floats with AVX2),
    128 for the portable C."""
    from onnxc import build
    from onnxc.passes.prepack import _kernel_macros, gemv_strip_width
    tc = build.toolchain()
    sw = gemv_strip_width(tc.cc, tc.flags)
    assert sw in (32, 64, 128)
    assert _kernel_macros(tc.cc, tc.flags)["ONNXC_GEMV_TILE_W"] == sw
    plain = tuple(f for f in tc.flags if not f.startswith(("-march", "-mtune"))) + ("-DONNXC_GEMM_PLAIN_C",)
    assert gemv_strip_width(tc.cc, plain) == 128
    cpu = Path("/proc/cpuinfo").read_text() if Path("/proc/cpuinfo").exists() else ""
    if "-march=native" in tc.flags and " avx2" in cpu and " avx512f" not in cpu:
        assert sw == 64


def test_gemv_max_rows_follow_the_isa():
    """Every layout macro is asked in one query (a macro the regex cannot read turns off all
    prepacking): the strips serve 1 row with AVX2's 2-row groups, up to 8 with AVX-512's 6-row ones."""
    from onnxc import build
    from onnxc.passes.prepack import GEMV_MAX_M, _kernel_macros, gemv_max_rows, sgemm_block
    tc = build.toolchain()
    found = _kernel_macros(tc.cc, tc.flags)
    assert found is not None and sgemm_block(tc.cc, tc.flags) is not None
    assert gemv_max_rows(tc.cc, tc.flags) == found["ONNXC_GEMV_MAX_M"] in (1, 8)
    if platform.machine() in ("x86_64", "AMD64"):
        base = tuple(f for f in tc.flags if not f.startswith(("-march", "-mtune")))
        assert gemv_max_rows(tc.cc, base + ("-mavx2", "-mfma")) == 1
        assert gemv_max_rows(tc.cc, base + ("-mavx512f", "-mavx512bw", "-mfma")) == 8
    assert gemv_max_rows(tc.cc, ("-DONNXC_GEMM_PLAIN_C",)) == GEMV_MAX_M


def test_gemm_rows_around_the_strips_limit():
    """A symbolic batch picks the strips up to the build's limit and the prepacked SGEMM above it,
    whose last row tile takes every height from 1 to MR: each matches the reference."""
    rng = np.random.default_rng(7)
    w = rng.standard_normal((40, 37)).astype(np.float32)
    bias = rng.standard_normal(40).astype(np.float32)
    node = helper.make_node("Gemm", ["x", "w", "b"], ["y"], transB=1)
    g = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 37])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["n", 40])],
                          [numpy_helper.from_array(w, "w"), numpy_helper.from_array(bias, "b")])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    sess = onnxc.InferenceSession(m.SerializeToString())
    for n in range(1, 18):
        x = rng.standard_normal((n, 37)).astype(np.float32)
        y = sess.run(None, {"x": x})[0]
        np.testing.assert_allclose(y, x @ w.T + bias, rtol=1e-5, atol=1e-5)


def _compile_isa(src, name, flags, tmp_path):
    """Compile a test driver against runtime_c with these ISA flags instead of -march/-mtune
    (skips when the compiler lacks AVX2); returns the flags used."""
    import subprocess
    from onnxc import build
    from onnxc.resources import runtime_dir
    tc = build.toolchain()
    used = [f for f in tc.flags if not f.startswith(("-march", "-mtune"))] + flags
    (tmp_path / f"{name}.c").write_text(src)
    res = subprocess.run([tc.cc, *used, "-I", str(runtime_dir()), f"{name}.c", "-o", name, "-lm"], cwd=tmp_path,
                         capture_output=True, text=True)
    if res.returncode != 0 and "-mavx2" in flags:
        pytest.skip("no AVX2 compiler support")
    assert res.returncode == 0, res.stderr
    return tc.cc, used


GEMV_TEST_C = r"""
#include <stdio.h>
#include <stdlib.h>
#include "onnxc_gemv.h"
static float *rd(FILE *f, int64_t n) { float *p = malloc(sizeof(float) * (n + 1)); if (fread(p, sizeof(float), n, f) != (size_t)n) exit(2); return p; }
int main(int argc, char **argv)
{
    FILE *f = fopen(argv[1], "rb");
    int64_t h[5];
    float ab[2];
    if (fread(h, sizeof h, 1, f) != 1 || fread(ab, sizeof ab, 1, f) != 1) return 2;
    const int64_t M = h[0], N = h[1], K = h[2];
    float *A = rd(f, M * K), *Bs = rd(f, ONNXC_GEMV_STRIPS_FLOATS(N, K)), *B = rd(f, K * N);
    float *C = rd(f, M * N), *C2 = malloc(sizeof(float) * (M * N + 1)), *C3 = malloc(sizeof(float) * (M * N + 1));
    int32_t *nz = malloc(ONNXC_GEMV_NZ_BYTES(K));
    memcpy(C2, C, sizeof(float) * M * N);
    memcpy(C3, C, sizeof(float) * M * N);
    onnxc_sgemv_strips(M, N, K, ab[0], A, K, Bs, h[4], ab[1], C, N, (int)h[3]);
    onnxc_sgemv_kn(M, N, K, ab[0], A, K, B, N, N, ab[1], C2, N, (int)h[3]);
    /* back to front, A's zeros skipped (one row) */
    onnxc_sgemv_strips_dir(M, N, K, ab[0], A, K, Bs, h[4], ab[1], C3, N, (int)h[3], 1, nz);
    FILE *o = fopen(argv[2], "wb");
    fwrite(C, sizeof(float), M * N, o);
    fwrite(C2, sizeof(float), M * N, o);
    fwrite(C3, sizeof(float), M * N, o);
    fclose(o);
    return 0;
}
"""


@pytest.mark.parametrize("flags", [["-march=native"], ["-mtune=generic"], ["-mavx2", "-mfma"],
                                   ["-DONNXC_GEMM_PLAIN_C"]])
def test_gemv_kernels_every_isa(flags, tmp_path):
    """onnxc_sgemv_strips / onnxc_sgemv_kn / onnxc_sgemv_strips_dir skipping a one-row A's zeros,
    with every vector width (AVX-512, SSE, AVX2, plain C): tails of every size, row groups,
    alpha/beta (beta = 0 over NaN), K = 0, 2 threads, A mostly or all zeros (-0.0 too) with a NaN
    or an inf among them; strips of the build's tile width and of widths narrower and wider than
    every tile."""
    import subprocess
    from onnxc.passes.prepack import gemv_strip_width, gemv_strips
    cc, used = _compile_isa(GEMV_TEST_C, "g", flags, tmp_path)
    tile = gemv_strip_width(cc, tuple(used))
    for n, (M, N, K, alpha, beta, nt) in enumerate([
            (1, 512, 784, 1.0, 0.0, 1), (7, 130, 33, 0.5, 1.5, 1), (13, 17, 5, 1.0, 1.0, 2),
            (6, 1, 1, 2.0, 0.0, 1), (3, 40, 0, 1.0, 0.5, 1), (4, 1100, 1024, 1.0, 1.0, 2),
            (1, 255, 129, -1.0, 0.0, 1), (12, 64, 48, 1.0, 0.0, 1), (1, 200, 70, 1.0, 0.0, 2),
            (2, 300, 9, 1.0, 1.0, 1), (1, 512, 512, 1.0, 1.0, 1), (1, 1000, 300, 1.0, 0.0, 2),
            (1, 10, 512, 1.0, 1.0, 1), (1, 37, 64, 0.5, 0.0, 1), (3, 70, 50, 1.0, 0.0, 1),
            (1, 130, 40, 1.0, 1.0, 2)]):
        sw = (tile, 16, 256)[n % 3]
        a, b, c = rand((M, K)), rand((K, N)), rand((M, N))
        if n >= 10:   # Relu'd inputs: most elements zero, the last case all of them
            a[np.random.default_rng(n).random(a.shape) < (0.5, 0.9, 0.3, 0.97, 0.6, 1.0)[n - 10]] = 0.0
            a[:, ::7] *= -1.0        # -0.0 is skipped too
            if n == 11:
                a[0, 5] = np.nan
            if n == 12:
                a[0, 3] = np.inf
        if beta == 0.0:
            c[:] = np.nan
        with open(tmp_path / "in.bin", "wb") as fh:
            fh.write(np.array([M, N, K, nt, sw], np.int64).tobytes() + np.array([alpha, beta], np.float32).tobytes())
            for arr in (a, gemv_strips(b, sw), b, c):
                fh.write(np.ascontiguousarray(arr, np.float32).tobytes())
        run = subprocess.run([str(tmp_path / "g"), "in.bin", "out.bin"], cwd=tmp_path, capture_output=True, timeout=120)
        assert run.returncode == 0, run.stderr
        out = np.fromfile(tmp_path / "out.bin", np.float32).reshape(3, M, N)
        with np.errstate(invalid="ignore"):
            want = alpha * (a.astype(np.float64) @ b) + (beta * c if beta != 0.0 else 0.0)
        for got in out:
            np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4 * max(1, K) ** 0.5)


# ---- SGEMM register-block edges, every ISA branch, against numpy in float64 ------------------
SGEMM_EDGE_C = r"""
#include <stdio.h>
#include <stdlib.h>
#include "onnxc_gemm.h"
/* records: int64 mode, ta, tb, M, N, K, nt, ldc; float alpha, beta; then A (op(A) stored as ta says),
 * B (as tb says), C (M x ldc; mode 4: N x ldc, element (i, j) at j*ldc + i). Writes C back.
 * mode 0 onnxc_sgemm, 1/2 wpack+wmul (swapped 0/1), 3 bpacked (B packed in NR panels),
 * 4 one micro-kernel call storing its tile transposed (M <= MR, N <= NR), 5/6 onnxc_sgemm_direct
 * (alpha 1, beta 0 or 1) over B in place / over B packed in NR panels. */
static float *rd(FILE *f, int64_t n) { float *p = malloc(sizeof(float) * (n + 1)); if (fread(p, sizeof(float), n, f) != (size_t)n) exit(2); return p; }
int main(int argc, char **argv)
{
    FILE *f = fopen(argv[1], "rb"), *o = fopen(argv[2], "wb");
    int64_t h[8];
    float ab[2];
    while (fread(h, sizeof h, 1, f) == 1 && fread(ab, sizeof ab, 1, f) == 1) {
        const int64_t mode = h[0], ta = h[1], tb = h[2], M = h[3], N = h[4], K = h[5], nt = h[6], ldc = h[7];
        const int64_t lda = ta ? M : K, ldb = tb ? K : N, nc = mode == 4 ? N * ldc : M * ldc;
        float *A = rd(f, M * K), *B = rd(f, K * N), *C = rd(f, nc);
        void *work = malloc(ONNXC_SGEMM_WORK_BYTES(M, N, K) + ONNXC_SGEMM_WORK_BYTES(N, M, K) + 64);
        void *pk = malloc(ONNXC_SGEMM_WPACK_BYTES(M + N, K) + 64);
        if (mode == 0) {
            onnxc_sgemm((int)ta, (int)tb, M, N, K, ab[0], A, lda, B, ldb, ab[1], C, ldc, work, (int)nt);
        } else if (mode == 1 || mode == 2) {   /* A plain, B plain */
            onnxc_sgemm_wpack((int)mode - 1, M, K, A, K, pk, (int)nt);
            onnxc_sgemm_wmul((int)mode - 1, M, N, K, ab[0], pk, B, N, ab[1], C, ldc, work, (int)nt);
        } else if (mode == 3) {
            onnxc__sgemm_prepack(N, K, B, tb ? ldb : 1, tb ? 1 : ldb, onnxc__align64(pk), ONNXC_SGEMM_NR, (int)nt);
            onnxc_sgemm_bpacked((int)ta, M, N, K, ab[0], A, lda, onnxc__align64(pk), ab[1], C, ldc, work, (int)nt);
        } else if (mode == 5) {
            onnxc_sgemm_direct(M, N, K, A, K, B, ONNXC_SGEMM_NR, N, 0, ab[1], C, ldc, work);
        } else if (mode == 6) {
            float *bp = onnxc__align64(pk);
            for (int64_t j = 0; j < N; j += ONNXC_SGEMM_NR)
                onnxc__sgemm_pack(onnxc__gmin(ONNXC_SGEMM_NR, N - j), K, B + j, 1, N, bp + j * K, ONNXC_SGEMM_NR);
            onnxc_sgemm_direct(M, N, K, A, K, bp, K * ONNXC_SGEMM_NR, ONNXC_SGEMM_NR, 1, ab[1], C, ldc, work);
        } else {   /* A plain (M x K), B plain (K x N) */
            float *ap = onnxc__align64(work), *bp = ap + ONNXC_SGEMM_MR * K + 16;
            onnxc__sgemm_pack(M, K, A, K, 1, ap, ONNXC_SGEMM_MR);
            onnxc__sgemm_pack(N, K, B, 1, N, bp, ONNXC_SGEMM_NR);
            onnxc__sgemm_kernel(K, ap, bp, C, 1, ldc, (int)M, (int)N, ab[0], ab[1]);
        }
        fwrite(C, sizeof(float), nc, o);
        free(A); free(B); free(C); free(work); free(pk);
    }
    fclose(o);
    return 0;
}
"""


def _sgemm_edge_jobs(mr, nr):
    """Shapes around the register block (MR x NR) and the depth block (KC) of one ISA branch."""
    kc = gemm_op.SGEMM_KC
    jobs = []
    for i, (M, N, K) in enumerate([(mr, nr, kc), (mr + 1, nr - 1, kc + 1), (mr - 1, nr + 1, kc - 1),
                                   (2 * mr + 3, 3 * nr - 5, 2 * kc + 7), (4 * mr, 2 * nr + 16, 40),
                                   (33, 7, 300), (9, 5 * nr - 7, 3), (130, 66, 257), (5, 17, 513),
                                   (3 * mr + mr // 2, nr + 2, 70), (mr + mr // 4, 49, 300)]):
        for mode in range(4):
            for ta, tb in ((0, 0), (1, 1), (0, 1), (1, 0)) if mode in (0, 3) else ((0, 0),):
                alpha, beta = ((1.0, 0.0), (1.0, 1.0), (0.5, -1.5), (-2.0, 0.0))[(i + mode + ta) % 4]
                jobs.append((mode, ta, tb, M, N, K, 1 + (i + mode) % 2, alpha, beta))
    # bpacked with one column panel at 2 threads: the direct path split by row panels (the last
    # share with a row tail, or none), alpha 1 and beta 0 or 1 as it needs
    for M, N, K, beta in ((33, 10, 512, 0.0), (4 * mr + 3, nr, 300, 1.0), (2 * mr, 5, 1024, 0.0),
                          (3 * mr + 1, nr - 1, 2 * kc + 5, 1.0)):
        jobs.append((3, 0, 1, M, N, K, 2, 1.0, beta))
    for M, N in ((mr, nr), (mr, nr - 3), (mr, 5), (mr - 1, nr), (1, 1), (mr, 1), (mr // 2, nr - 1),
                 (mr // 2 + 1, 3), (max(1, mr // 4), nr)):   # transposed tile stores, row-narrow kernels
        for alpha, beta in ((1.0, 0.0), (1.0, 1.0), (0.75, -0.5)):
            jobs.append((4, 0, 0, M, N, 37, 1, alpha, beta))
    for i, (M, N, K) in enumerate([(mr, nr, kc), (mr + 1, nr - 1, 64), (2 * mr - 1, 3 * nr + 5, 1),
                                   (1, 1, 7), (mr - 1, 2 * nr, 128), (130, 66, 64), (7, 5, 33),
                                   (33, 10, 200), (mr + 3, 17, 40), (2 * mr, 33, 50)]):
        # onnxc_sgemm_direct: row and column tails, in place and packed; column panels of 1, 2 or
        # all of a panel's vectors (a classifier's 10 columns)
        for mode in (5, 6):
            jobs.append((mode, 0, 0, M, N, K, 1, 1.0, float((i + mode) % 2)))
    return jobs


@pytest.mark.parametrize("flags", [["-march=native"], ["-mtune=generic"], ["-mavx2", "-mfma"],
                                   ["-DONNXC_GEMM_PLAIN_C"]])
def test_sgemm_register_block_edges(flags, tmp_path):
    """onnxc_sgemm (every transpose; small N takes the transposed orientation), wmul both ways,
    bpacked and single micro-kernel calls storing transposed tiles: M, N, K around MR, NR, KC
    (narrow edge panels, partial tiles), alpha/beta (beta = 0 over a NaN-filled C), inf and NaN
    in the operands, 1 and 2 threads."""
    import subprocess
    from onnxc.passes.prepack import sgemm_block
    cc, used = _compile_isa(SGEMM_EDGE_C, "e", flags, tmp_path)
    mr, nr = sgemm_block(cc, tuple(used))
    jobs, wants = _sgemm_edge_jobs(mr, nr), []
    with open(tmp_path / "in.bin", "wb") as fh:
        for n, (mode, ta, tb, M, N, K, nt, alpha, beta) in enumerate(jobs):
            a, b = rand((M, K)), rand((K, N))
            if n % 3 == 0:
                a[M // 2, K // 3] = np.inf
                b[K // 2, N - 1] = np.nan
            if n % 5 == 0:
                b[K - 1, 0] = -np.inf
            ldc = (M if mode == 4 else N) + 3
            c = rand((N, ldc) if mode == 4 else (M, ldc))
            if beta == 0.0:
                c[:] = np.nan
            with np.errstate(invalid="ignore", over="ignore"):
                prod = alpha * (a.astype(np.float64) @ b)
            want = c.astype(np.float64).copy()
            view = want[:, :M].T if mode == 4 else want[:, :N]
            view[...] = prod + (beta * view if beta != 0.0 else 0.0)
            wants.append(want)
            fh.write(np.array([mode, ta, tb, M, N, K, nt, ldc], np.int64).tobytes())
            fh.write(np.array([alpha, beta], np.float32).tobytes())
            for arr in (a.T if ta else a, b.T if tb else b, c):
                fh.write(np.ascontiguousarray(arr, np.float32).tobytes())
    run = subprocess.run([str(tmp_path / "e"), "in.bin", "out.bin"], cwd=tmp_path, capture_output=True, timeout=300)
    assert run.returncode == 0, run.stderr
    out, off = np.fromfile(tmp_path / "out.bin", np.float32), 0
    for job, want in zip(jobs, wants):
        got = out[off:off + want.size].reshape(want.shape)
        off += want.size
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4 * max(1, job[5]) ** 0.5, err_msg=str(job))
    assert off == out.size
