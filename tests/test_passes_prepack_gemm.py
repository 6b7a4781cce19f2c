"""Compile-time packing of a constant right operand (passes/prepack_gemm.py): which Gemm/MatMul
nodes get panels, the blob keeps the plain B only where a small-row path still reads it, and
native and portable builds (different register blocks) compute what onnx.reference does for
static and symbolic row counts, fused epilogues included, at 1 and 2 threads."""
import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper
from onnx.reference import ReferenceEvaluator

import onnxc
from onnxc import loader
from onnxc.compiler import Options, compile_model

rng = np.random.default_rng(23)


def gemm_model(rows, K, N, *, trans_a=0, trans_b=0, tail=None, matmul=False, lead=(), alpha=0.5):
    """y = tail(A @ B + bias) with B (and bias) constant; rows int or a symbolic name."""
    a_shape = ([K, rows] if trans_a else [rows, K]) if not matmul else [*lead, rows, K]
    b = (rng.standard_normal((N, K) if trans_b else (K, N)) * 0.2).astype(np.float32)
    bias = rng.standard_normal(N).astype(np.float32)
    inits = [numpy_helper.from_array(b, "B"), numpy_helper.from_array(bias, "bias")]
    if matmul:
        nodes = [helper.make_node("MatMul", ["A", "B"], ["m"]), helper.make_node("Add", ["m", "bias"], ["g"])]
    else:
        nodes = [helper.make_node("Gemm", ["A", "B", "bias"], ["g"], transA=trans_a, transB=trans_b, alpha=alpha)]
    out = "g"
    if tail == "relu":
        nodes.append(helper.make_node("Relu", ["g"], ["y"]))
        out = "y"
    elif tail == "clip":
        inits += [numpy_helper.from_array(np.float32(-0.5), "lo"), numpy_helper.from_array(np.float32(0.75), "hi")]
        nodes.append(helper.make_node("Clip", ["g", "lo", "hi"], ["y"]))
        out = "y"
    elif tail == "gelu":
        nodes.append(helper.make_node("Gelu", ["g"], ["y"]))
        out = "y"
    elif tail == "residual":
        inits.append(numpy_helper.from_array(rng.standard_normal(N).astype(np.float32), "r"))
        nodes.append(helper.make_node("Add", ["g", "r"], ["y"]))
        out = "y"
    x = helper.make_tensor_value_info("A", TensorProto.FLOAT, a_shape)
    y = helper.make_tensor_value_info(out, TensorProto.FLOAT, None)
    g = helper.make_graph(nodes, "g", [x], [y], inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 20)], ir_version=9)


def feed(m, rows):
    shape = [d.dim_value if d.dim_value else rows for d in m.graph.input[0].type.tensor_type.shape.dim]
    return {"A": rng.standard_normal(shape).astype(np.float32)}


def packed_nodes(m, block=(8, 48), **kw):
    c = compile_model(loader.load(m), Options(optimization_level=99), gemm_block=block, **kw)
    return c, [n for n in c.graph.nodes if n.attrs.get("_panels")]


def test_which_nodes_get_panels():
    _, nodes = packed_nodes(gemm_model(32, 100, 70))
    assert len(nodes) == 1 and nodes[0].attrs["_panels"]["only"]          # static rows > 8
    _, nodes = packed_nodes(gemm_model(4, 100, 70))
    assert nodes == []                                                  # few rows: the strips
    _, nodes = packed_nodes(gemm_model(4, 100, 70), gemv_rows=1)        # strips for 1 row only (AVX2)
    assert len(nodes) == 1 and nodes[0].attrs["_panels"]["only"] and nodes[0].attrs["_panels"]["min"] == 1
    _, nodes = packed_nodes(gemm_model("batch", 100, 70), gemv_rows=1)  # both: 1 row strips, else panels
    assert len(nodes) == 1 and nodes[0].attrs["_panels"]["only"] and nodes[0].attrs["_prepacked"]["max_m"] == 1
    _, nodes = packed_nodes(gemm_model("batch", 100, 70, trans_a=1))
    assert len(nodes) == 1 and not nodes[0].attrs["_panels"]["only"]     # no strips: plain B kept
    _, nodes = packed_nodes(gemm_model("batch", 100, 70, matmul=True, lead=(2,)))
    assert len(nodes) == 1 and nodes[0].attrs["_panels"]["only"]         # MatMul: strips serve few rows
    c, nodes = packed_nodes(gemm_model("n", 100, 70, matmul=True), gemv_rows=1)   # MatMul: strips at 4, panels at 5
    mm = [n for n in c.graph.nodes if n.op_type in ("MatMul", "FusedMatMul")]
    assert len(mm) == 1 and mm[0].attrs["_prepacked"]["index"] == 4 and mm[0].attrs["_panels"]["index"] == 5
    c, nodes = packed_nodes(gemm_model(1, 100, 70, matmul=True), gemv_rows=1)     # one static row: strips only
    mm = [n for n in c.graph.nodes if n.op_type in ("MatMul", "FusedMatMul")]
    assert nodes == [] and mm[0].attrs["_prepacked"]["gemv"] and 1 in mm[0].attrs["_unread"]
    firmware = compile_model(loader.load(gemm_model(32, 100, 70)), Options(optimization_level=99))
    assert not any(n.attrs.get("_panels") for n in firmware.graph.nodes)    # no block known: none


def test_blob_holds_one_copy_when_only_panels_are_read():
    m = gemm_model(32, 300, 96)
    plain = compile_model(loader.load(m), Options(optimization_level=2), gemm_block=(8, 48))
    packed, _ = packed_nodes(m)
    # 300 x 96 floats packed in 48-wide panels: no padding, the plain B left out
    assert len(packed.sources.weights) <= len(plain.sources.weights) + 64 * 3
    assert "onnxc_sgemm_bpacked" in packed.sources.c and "#error" in packed.sources.c


CASES = {
    "gemm_static": (dict(rows=40, K=300, N=100), [40]),
    "gemm_transB_relu": (dict(rows="n", K=784, N=130, trans_b=1, tail="relu"), [1, 7, 9, 33]),
    "gemm_transA": (dict(rows="n", K=64, N=50, trans_a=1, tail="residual"), [3, 12]),
    "matmul_3d_gelu": (dict(rows=20, K=256, N=200, matmul=True, lead=(3,), tail="gelu"), [20]),
    "matmul_symbolic": (dict(rows="s", K=513, N=49, matmul=True, lead=(2,)), [1, 5, 64]),
    "matmul_batch1_relu": (dict(rows=1, K=300, N=70, matmul=True, tail="relu"), [1]),
    "matmul_rows_residual": (dict(rows="n", K=200, N=33, matmul=True, tail="residual"), [1, 2, 9]),
    # the tile epilogue (bias and clamp on each finished tile): row shares, column shares (few
    # rows at 2 threads), two depth blocks, one column panel (N <= NR), Gemm's one-row C
    "matmul_bias_relu_tiles": (dict(rows="n", K=300, N=130, matmul=True, tail="relu"), [7, 40, 200]),
    "matmul_bias_narrow": (dict(rows="n", K=100, N=12, matmul=True), [30, 97]),
    "gemm_bias_clip_tiles": (dict(rows="n", K=200, N=70, tail="clip", alpha=1.0), [13, 130]),
    "gemm_plain_bias_tiles": (dict(rows="n", K=300, N=70, alpha=1.0), [5, 64]),
    "gemm_linear_relu_tiles": (dict(rows="n", K=300, N=70, trans_b=1, alpha=1.0, tail="relu"), [2, 7, 64]),
}


@pytest.mark.parametrize("portable", [False, True])
@pytest.mark.parametrize("case", list(CASES))
def test_results(case, portable, tmp_path):
    kw, row_counts = CASES[case]
    m = gemm_model(**kw)
    path = onnxc.compiler.build_library(m, Options(portable=portable), cache_dir=tmp_path)
    ref_eval = ReferenceEvaluator(m)
    for nt in (1, 2):
        so = onnxc.SessionOptions()
        so.intra_op_num_threads = nt
        sess = onnxc.InferenceSession(str(path), so)
        for rows in row_counts:
            f = feed(m, rows)
            f["A"][0, :3] = [np.nan, np.inf, -np.inf] if f["A"].ndim == 2 else f["A"][0, :3]
            got, = sess.run(None, f)
            ref, = ref_eval.run(None, f)
            np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-4 * max(1, kw["K"] / 64))


# few rows (<= ONNXC_SGEMM_FEW_ROWS) unevenly split by row panels: threads take column panels
# instead (onnxc__sgemm_bcols_share), each packing all of A; several depth blocks, partial panels
FEW_ROW_CASES = {
    "gemm_49_rows": (dict(rows=49, K=600, N=517, tail="relu"), [49]),
    "gemm_9_rows_transA": (dict(rows="n", K=300, N=1000, trans_a=1), [9, 17, 95]),
    "matmul_folded_49": (dict(rows=7, K=257, N=130, matmul=True, lead=(7,), tail="residual"), [7]),
}


@pytest.mark.parametrize("case", list(FEW_ROW_CASES))
def test_few_rows_column_split(case, tmp_path):
    kw, row_counts = FEW_ROW_CASES[case]
    m = gemm_model(**kw)
    path = onnxc.compiler.build_library(m, Options(), cache_dir=tmp_path)
    ref_eval = ReferenceEvaluator(m)
    for nt in (2, 3, 4):
        so = onnxc.SessionOptions()
        so.intra_op_num_threads = nt
        sess = onnxc.InferenceSession(str(path), so)
        for rows in row_counts:
            f = feed(m, rows)
            f["A"].reshape(-1)[[5, 300, 301]] = [np.nan, np.inf, -np.inf]
            got, = sess.run(None, f)
            ref, = ref_eval.run(None, f)
            np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-4 * max(1, kw["K"] / 64))


def full_c_model(K, N, residual):
    """relu(Gemm(A, B, 2 * C) [+ Z]): C a whole matrix computed by a node (Y may take its
    storage), Z a residual input; B constant (panels)."""
    b = (rng.standard_normal((K, N)) * 0.2).astype(np.float32)
    nodes = [helper.make_node("Mul", ["C", "two"], ["c2"]),
             helper.make_node("Gemm", ["A", "B", "c2"], ["g"], alpha=0.5, beta=1.5)]
    last = "g"
    if residual:
        nodes.append(helper.make_node("Add", ["g", "Z"], ["s"]))
        last = "s"
    nodes.append(helper.make_node("Relu", [last], ["y"]))
    inputs = [helper.make_tensor_value_info(n, TensorProto.FLOAT, ["n", d])
              for n, d in [("A", K), ("C", N)] + ([("Z", N)] if residual else [])]
    g = helper.make_graph(nodes, "g", inputs, [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                          [numpy_helper.from_array(b, "B"), numpy_helper.from_array(np.float32(2), "two")])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 20)], ir_version=9)


@pytest.mark.parametrize("residual", [False, True])
def test_each_thread_fills_and_activates_its_share(residual, tmp_path):
    """The start of Y (C, or beta C + Z) and the activation run on each thread's share of the
    product (rows, or columns for few rows): every share, thread count and row count gives
    onnx.reference's values, and the same bits whatever the thread count."""
    K, N = 300, 517
    m = full_c_model(K, N, residual)
    path = onnxc.compiler.build_library(m, Options(), cache_dir=tmp_path)
    ref_eval = ReferenceEvaluator(m)
    sessions = []
    for nt in (1, 2, 3):
        so = onnxc.SessionOptions()
        so.intra_op_num_threads = nt
        sessions.append(onnxc.InferenceSession(str(path), so))
    for rows in (9, 33, 49, 130, 400):     # column shares (few rows), row shares, a partial panel
        f = {name: rng.standard_normal((rows, d)).astype(np.float32)
             for name, d in [("A", K), ("C", N)] + ([("Z", N)] if residual else [])}
        f["C"][1, :3] = [np.nan, np.inf, -np.inf]
        ref, = ref_eval.run(None, f)
        outs = [s.run(None, f)[0] for s in sessions]
        for got in outs:
            np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-4 * K / 64)
            np.testing.assert_array_equal(got, outs[0])
