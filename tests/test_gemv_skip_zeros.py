"""Batch-1 layers over strips skip the zero elements of their one-row input (onnxc_gemv.h's
onnxc_sgemv_strips_dir with a nonzero list): only where the weights are finite (0 * inf is NaN),
so an MLP's Relu'd activations, inputs of zeros, NaN and inf, and weights holding inf all give
what onnx.reference gives, at 1 and 2 threads, for static and symbolic batches."""
import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper
from onnx.reference import ReferenceEvaluator

import onnxc
from onnxc import build, loader
from onnxc.compiler import Options, compile_model
from onnxc.passes.prepack import sgemm_block

rng = np.random.default_rng(7)


def mlp(batch, matmul=False, inf_row=None, layers=3):
    """relu(x W1^T + b1) -> relu(. W2^T + b2) -> . W3^T + b3 (Gemm transB=1, or MatMul + Add);
    inf_row: W2 gets +inf in that input row."""
    dims = [(96, 300), (300, 200), (200, 10)][:layers]
    inits, nodes, cur = [], [], "x"
    for i, (k, n) in enumerate(dims):
        w = (rng.standard_normal((n, k)) / np.sqrt(k)).astype(np.float32)
        if i == 1 and inf_row is not None:
            w[:, inf_row] = np.inf
        b = rng.standard_normal(n).astype(np.float32) * 0.1
        if matmul:
            inits += [numpy_helper.from_array(np.ascontiguousarray(w.T), f"w{i}"), numpy_helper.from_array(b, f"b{i}")]
            nodes += [helper.make_node("MatMul", [cur, f"w{i}"], [f"m{i}"]),
                      helper.make_node("Add", [f"m{i}", f"b{i}"], [f"g{i}"])]
        else:
            inits += [numpy_helper.from_array(w, f"w{i}"), numpy_helper.from_array(b, f"b{i}")]
            nodes.append(helper.make_node("Gemm", [cur, f"w{i}", f"b{i}"], [f"g{i}"], transB=1))
        cur = f"g{i}"
        if i < layers - 1:
            nodes.append(helper.make_node("Relu", [cur], [f"r{i}"]))
            cur = f"r{i}"
    g = helper.make_graph(nodes, "mlp", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [batch, 96])],
                          [helper.make_tensor_value_info(cur, TensorProto.FLOAT, None)], inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


def inputs(rows):
    """Random rows, then rows with many zeros (-0.0 too), all zeros, a NaN, an inf among zeros."""
    x = rng.standard_normal((5, 96)).astype(np.float32)
    x[1, rng.random(96) < 0.8] = 0.0
    x[1, ::5] = -0.0
    x[2] = 0.0
    x[3, rng.random(96) < 0.9] = 0.0
    x[3, 4] = np.nan
    x[4, rng.random(96) < 0.9] = 0.0
    x[4, 7] = np.inf
    return [x[i:i + rows] for i in range(5)] if rows == 1 else [x[:rows]]


def check(m, rows_list, tmp_path):
    path = onnxc.compiler.build_library(m, Options(), cache_dir=tmp_path)
    ref = ReferenceEvaluator(m)
    for nt in (1, 2):
        so = onnxc.SessionOptions()
        so.intra_op_num_threads = nt
        sess = onnxc.InferenceSession(str(path), so)
        for rows in rows_list:
            for x in inputs(rows):
                got, = sess.run(None, {"x": x})
                with np.errstate(invalid="ignore", over="ignore"):
                    want, = ref.run(None, {"x": x})
                np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


def generated_c(m):
    tc = build.toolchain(False, False)
    return compile_model(loader.load(m), Options(), module="m", gemm_block=sgemm_block(tc.cc, tc.flags)).sources.c


def layer_sessions(nodes, K, inits, tmp_path):
    """One batch-1 layer reading x (1 x K) into y, whose strips skip zeros: (model, sessions at 1
    and 2 threads)."""
    g = helper.make_graph(nodes, "layer", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, K])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                          [numpy_helper.from_array(a, n) for n, a in inits.items()])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    assert generated_c(m).count("(int32_t *)") == 1
    path = onnxc.compiler.build_library(m, Options(), cache_dir=tmp_path)
    sessions = []
    for nt in (1, 2):
        so = onnxc.SessionOptions()
        so.intra_op_num_threads = nt
        sessions.append(onnxc.InferenceSession(str(path), so))
    return m, sessions


@pytest.mark.parametrize("matmul", [False, True])
def test_batch1_mlp(matmul, tmp_path):
    m = mlp(1, matmul)
    assert generated_c(m).count("(int32_t *)") == 3     # every layer's strips skip zeros
    check(m, [1], tmp_path)


def test_symbolic_batch(tmp_path):
    check(mlp("n", True), [1, 3], tmp_path)


def test_weights_with_inf_are_not_skipped(tmp_path):
    """W2 holds +inf in input row 3: where the first layer leaves that row at 0 (Relu) the
    second layer's outputs are all NaN (0 * inf), where it does not, all +inf."""
    m = mlp(1, inf_row=3, layers=2)
    assert generated_c(m).count("(int32_t *)") == 1     # the layer with inf reads every row
    path = onnxc.compiler.build_library(m, Options(), cache_dir=tmp_path)
    sess = onnxc.InferenceSession(str(path))
    ref = ReferenceEvaluator(m)
    seen = set()
    for _ in range(40):
        x = rng.standard_normal((1, 96)).astype(np.float32)
        with np.errstate(invalid="ignore", over="ignore"):
            want, = ref.run(None, {"x": x})
        got, = sess.run(None, {"x": x})
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
        seen.add("nan" if np.isnan(want).all() else "inf" if np.isinf(want).all() else "?")
    assert seen == {"nan", "inf"}


def test_every_zero_pattern_of_eight(tmp_path):
    """The nonzero list is built eight inputs at a time from a table indexed by their zero mask:
    inputs that run through all 256 masks (with -0.0 for some zeros, NaN and inf for some
    nonzeros) and a tail of 5 past the last whole group give numpy's sums, at 1 and 2 threads."""
    K, N = 261, 40                    # 32 groups of 8, then 5
    w = (rng.standard_normal((N, K)) / np.sqrt(K)).astype(np.float32)
    _, sessions = layer_sessions([helper.make_node("Gemm", ["x", "w"], ["y"], transB=1)], K, {"w": w}, tmp_path)
    # runs 0-7: 8 x 32 groups, each of the 256 masks once, checked by value; 8-10: a NaN, an inf,
    # a -inf among the nonzeros (the outputs follow them)
    for run in range(11):
        x = rng.standard_normal((1, K)).astype(np.float32) + 3.0   # no accidental zeros
        for grp in range(32):
            mask = (run * 32 + grp * 37) % 256
            for i in range(8):
                if not mask >> i & 1:
                    x[0, grp * 8 + i] = -0.0 if (grp + i) % 3 == 0 else 0.0
        x[0, 256 + run % 5] = 0.0     # the tail
        if run >= 8:
            k = int(np.flatnonzero(x[0])[run])
            x[0, k] = [np.nan, np.inf, -np.inf][run - 8]
        with np.errstate(invalid="ignore", over="ignore"):
            want = (x.astype(np.float64) @ w.T.astype(np.float64)).astype(np.float32)
        assert np.isfinite(want).all() == (run < 8)
        for sess in sessions:
            got, = sess.run(None, {"x": x})
            np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
    assert sorted({(r * 32 + g * 37) % 256 for r in range(8) for g in range(32)}) == list(range(256))


def test_sparse_inputs_split_between_threads(tmp_path):
    """An MNIST-sized layer (784 -> 512) over inputs with 64, 170 and 784 nonzero elements: the
    rows read (64 x 512 to 784 x 512 multiply-adds) fall below, between and above the split's
    thresholds (ONNXC_GEMV_PAR_MIN, 65536 now, 131072 before). Two threads own whole columns,
    so their outputs equal one thread's to the bit, and onnx.reference's within rounding."""
    K, N = 784, 512
    w = (rng.standard_normal((N, K)) / np.sqrt(K)).astype(np.float32)
    b = (rng.standard_normal(N) * 0.1).astype(np.float32)
    m, sessions = layer_sessions([helper.make_node("Gemm", ["x", "w", "b"], ["g"], transB=1),
                                  helper.make_node("Relu", ["g"], ["y"])], K, {"w": w, "b": b}, tmp_path)
    ref = ReferenceEvaluator(m)
    for nnz in (64, 170, 784):
        x = np.zeros((1, K), np.float32)
        x[0, rng.choice(K, nnz, replace=False)] = rng.random(nnz).astype(np.float32)   # pixels in (0, 1)
        one, = sessions[0].run(None, {"x": x})
        two, = sessions[1].run(None, {"x": x})
        want, = ref.run(None, {"x": x})
        np.testing.assert_array_equal(two, one)
        np.testing.assert_allclose(one, want, rtol=1e-4, atol=1e-5)
