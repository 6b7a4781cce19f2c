"""Attention fusion (passes/fuse_attention.py): which exported attention graphs become one
FusedAttention node, which stay as they are, and every optimisation level and thread count
computes what onnx.reference does (NaN, inf and fully masked rows included)."""
import numpy as np
import pytest
from onnx import helper

import onnxc
from passutil import graph_ops, rand, run_levels
from util import assert_close, make_model_from_nodes

rng = np.random.default_rng(29)
TOL = dict(rtol=1e-4, atol=1e-5)
LEVELS = (1, 99)   # unfused and fused (each level compiles the model: all four in one test)
N = helper.make_node


def torch_attention(B=2, S=7, H=3, D=4, scale="Mul", mask="b11s", opset=17, out_transpose=True, k_two_steps=False):
    """The graph torch.onnx.export writes for a self-attention block: Linear -> Reshape (B, S, H, D)
    -> Transpose per head; K^T by perm (0, 2, 3, 1); scores scaled, masked, Softmax, times V; heads
    merged by Transpose and Reshape. Batch and sequence are symbolic dims."""
    E = H * D
    x = rand(rng, (B, S, E))
    inits = {n: rand(rng, (E, E)) * 0.5 for n in ("wq", "wk", "wv")}
    inits["split"] = np.array([0, 0, H, D], np.int64)
    inits["merge"] = np.array([0, 0, E], np.int64)
    nodes = []
    for n in "qkv":
        nodes += [N("MatMul", ["x", f"w{n}"], [f"{n}3"]), N("Reshape", [f"{n}3", "split"], [f"{n}4"])]
    nodes += [N("Transpose", ["q4"], ["q"], perm=[0, 2, 1, 3]), N("Transpose", ["v4"], ["v"], perm=[0, 2, 1, 3])]
    if k_two_steps:     # K by the head perm, then its last two axes swapped (eliminate_pairs merges them)
        nodes += [N("Transpose", ["k4"], ["kh"], perm=[0, 2, 1, 3]), N("Transpose", ["kh"], ["kt"], perm=[0, 1, 3, 2])]
    else:
        nodes.append(N("Transpose", ["k4"], ["kt"], perm=[0, 2, 3, 1]))
    nodes.append(N("MatMul", ["q", "kt"], ["s0"]))
    cur = "s0"
    c = np.float32(1 / np.sqrt(D))
    if scale == "Mul":
        nodes.append(N("Mul", [cur, "c"], ["s1"]))
    elif scale == "MulFirst":
        nodes.append(N("Mul", ["c", cur], ["s1"]))
    elif scale == "Div":
        nodes.append(N("Div", [cur, "c"], ["s1"]))
        c = np.float32(np.sqrt(D))
    if scale:
        inits["c"] = np.array(c, np.float32)
        cur = "s1"
    feeds = {"x": x}
    shapes = {"x": ["batch", "seq", E]}
    if mask:
        mshape = {"b11s": (B, 1, 1, S), "b1ss": (B, 1, S, S), "ss": (S, S), "s1": (S, 1)}[mask]
        m = np.where(rng.random(mshape) < 0.2, np.float32(-1e9), np.float32(0)).astype(np.float32)
        if mask == "s1":    # one value per query row (the keys' stride is 0): a -inf row is all NaN
            m = rand(rng, mshape)
            m[2, 0] = -np.inf
        feeds["mask"] = m
        shapes["mask"] = {"b11s": ["batch", 1, 1, "seq"], "b1ss": ["batch", 1, "seq", "seq"], "ss": ["seq", "seq"],
                          "s1": ["seq", 1]}[mask]
        nodes.append(N("Add", ["mask", cur], ["s2"]) if mask == "ss" else N("Add", [cur, "mask"], ["s2"]))
        cur = "s2"
    axis = {} if opset >= 13 else {"axis": 3}
    nodes += [N("Softmax", [cur], ["p"], **axis), N("MatMul", ["p", "v"], ["o"])]
    if out_transpose:
        nodes += [N("Transpose", ["o"], ["ot"], perm=[0, 2, 1, 3]), N("Reshape", ["ot", "merge"], ["y"])]
    else:
        nodes.append(N("Identity", ["o"], ["y"]))
    m = make_model_from_nodes(nodes, feeds, inits, ["y"], opset=opset, input_shapes=shapes)
    return m, feeds


def fused(m) -> bool:
    ops = graph_ops(m)
    return ops.get("FusedAttention") == 1 and "Softmax" not in ops and "Transpose" not in ops


@pytest.mark.parametrize("scale", ["Mul", "MulFirst", "Div", None])
@pytest.mark.parametrize("mask", ["b11s", "b1ss", "ss", "s1", None])
def test_torch_export_pattern(scale, mask):
    m, feeds = torch_attention(scale=scale, mask=mask)
    assert fused(m)
    assert graph_ops(m, 1).get("Softmax") == 1          # BASIC leaves it
    run_levels(m, feeds, levels=LEVELS, **TOL)


@pytest.mark.parametrize("opset", [11, 13, 21])
def test_opsets_and_k_in_two_transposes(opset):
    m, feeds = torch_attention(opset=opset, k_two_steps=opset != 11)
    assert fused(m)
    run_levels(m, feeds, levels=LEVELS, **TOL)


def test_nan_inf_and_fully_masked_rows_every_thread_count():
    """NaN and inf in the input make their rows NaN; a row whose mask is -inf everywhere is NaN
    (softmax of all -inf), as in onnx.reference; 1-3 threads over 2 x 5 heads."""
    m, feeds = torch_attention(B=2, S=9, H=5, D=8, mask="b1ss")
    feeds["x"][0, 2, 3] = np.nan
    feeds["x"][1, 4, 0] = np.inf
    feeds["mask"][1, 0, 6, :] = -np.inf
    feeds["mask"][0, 0, 1, 3] = -np.inf
    assert fused(m)
    ref = run_levels(m, feeds, **TOL)
    assert np.isnan(ref[0]).any()
    data = m.SerializeToString()
    for nt in (1, 2, 3):
        so = onnxc.SessionOptions()
        so.intra_op_num_threads = nt
        assert_close(ref, onnxc.InferenceSession(data, so).run(None, feeds), **TOL)


def test_long_keys_several_query_blocks_and_dims_at_run_time():
    """1100 keys: blocks of 59 query rows (59 + 59 + 12 for 130 queries); the same library runs
    other sequence lengths."""
    m, feeds = torch_attention(B=1, S=130, H=2, D=8, mask="b11s", out_transpose=True)
    feeds_long = {"x": rand(rng, (1, 1100, 16)), "mask": np.zeros((1, 1, 1, 1100), np.float32)}
    feeds_long["mask"][0, 0, 0, ::7] = -1e9
    assert fused(m)
    run_levels(m, feeds, levels=(0, 99), **TOL)
    run_levels(m, feeds_long, levels=(0, 99), **TOL)


def _direct(qshape, kshape, vshape, q_perm=None, k_perm=None, v_perm=None, out_perm=None, opset=17):
    """Attention over graph inputs, each optionally through a Transpose of its own."""
    feeds = {"qx": rand(rng, qshape), "kx": rand(rng, kshape), "vx": rand(rng, vshape)}
    nodes, names = [], {}
    for n, perm in (("q", q_perm), ("k", k_perm), ("v", v_perm)):
        if perm is None:
            names[n] = f"{n}x"
        else:
            nodes.append(N("Transpose", [f"{n}x"], [n], perm=perm))
            names[n] = n
    nodes += [N("MatMul", [names["q"], names["k"]], ["s"]), N("Softmax", ["s"], ["p"]),
              N("MatMul", ["p", names["v"]], ["o" if out_perm else "y"])]
    if out_perm:
        nodes.append(N("Transpose", ["o"], ["y"], perm=out_perm))
    return make_model_from_nodes(nodes, feeds, {}, ["y"], opset=opset), feeds


@pytest.mark.parametrize("case", [
    # Q, K^T, V as contiguous inputs: K^T's unit stride is along the keys
    dict(qshape=(2, 3, 5, 4), kshape=(2, 3, 4, 6), vshape=(2, 3, 6, 7)),
    # the same with two whole 16-key panels and a partial one (K^T's rows copied into the panels)
    dict(qshape=(1, 2, 9, 8), kshape=(1, 2, 8, 37), vshape=(1, 2, 37, 5)),
    # K^T from K (B, H, Skv, D) by perm (0, 1, 3, 2); V read with its keys contiguous
    dict(qshape=(2, 3, 5, 4), kshape=(2, 3, 6, 4), vshape=(2, 3, 7, 6), k_perm=[0, 1, 3, 2], v_perm=[0, 1, 3, 2]),
    # Q transposed so that its queries are contiguous; output merged by the head perm
    dict(qshape=(2, 3, 4, 5), kshape=(2, 3, 4, 6), vshape=(2, 3, 6, 7), q_perm=[0, 1, 3, 2], out_perm=[0, 2, 1, 3]),
])
def test_operand_layouts(case):
    m, feeds = _direct(**case)
    ops = graph_ops(m)
    assert ops == {"FusedAttention": 1}, ops
    run_levels(m, feeds, levels=LEVELS, **TOL)


def test_output_transpose_that_would_scatter_columns_stays():
    m, feeds = _direct((2, 3, 5, 4), (2, 3, 4, 6), (2, 3, 6, 7), out_perm=[0, 3, 1, 2])
    assert graph_ops(m) == {"FusedAttention": 1, "Transpose": 1}
    run_levels(m, feeds, levels=LEVELS, **TOL)


def test_transposed_operand_read_elsewhere_is_kept_and_read_as_is():
    """V's Transpose output is also a graph output: the Transpose stays, the fused node reads it."""
    m, feeds = _direct((1, 2, 5, 4), (1, 2, 4, 5), (1, 5, 2, 3), v_perm=[0, 2, 1, 3])
    m.graph.output.append(helper.make_empty_tensor_value_info("v"))
    ops = graph_ops(m)
    assert ops == {"FusedAttention": 1, "Transpose": 1}, ops
    run_levels(m, feeds, levels=LEVELS, **TOL)


def _unfusable(kind):
    m, feeds = _direct((2, 3, 5, 4), (2, 3, 4, 6), (2, 3, 6, 7))
    g = m.graph
    if kind == "axis":
        g.node[1].attribute.append(helper.make_attribute("axis", 2))
    elif kind == "scores_output":
        g.output.append(helper.make_empty_tensor_value_info("s"))
    elif kind == "broadcast_k":
        feeds["kx"] = rand(rng, (1, 3, 4, 6))
        g.input[1].CopyFrom(helper.make_tensor_value_info("kx", 1, (1, 3, 4, 6)))
    elif kind == "per_head_scale":
        g.node[0].output[0] = "s0"
        g.node.insert(1, N("Mul", ["s0", "hs"], ["s"]))
        g.initializer.append(helper.make_tensor("hs", 1, (1, 3, 1, 1), [0.5, 1.0, 2.0]))
    elif kind == "double":
        for k in list(feeds):
            feeds[k] = feeds[k].astype(np.float64)
        for vi in g.input:
            vi.type.tensor_type.elem_type = 11
    return m, feeds


@pytest.mark.parametrize("kind", ["axis", "scores_output", "broadcast_k", "per_head_scale", "double"])
def test_what_does_not_fuse(kind):
    m, feeds = _unfusable(kind)
    assert "FusedAttention" not in graph_ops(m)
    run_levels(m, feeds, levels=LEVELS, **TOL)


def sdpa_attention(B=2, S=7, H=3, D=4, fill=0.0, runtime_mask=False):
    """torch's scaled_dot_product_attention as its exporter writes it: Q and K^T each times
    sqrt(scale), K^T through Reshape (B*H, S, D) -> Transpose (0, 2, 1) -> Reshape (B, H, D, S), and
    the probabilities' NaN (fully masked rows) replaced by 0 before the product with V."""
    E = H * D
    inits = {n: rand(rng, (E, E)) * 0.5 for n in ("wq", "wk", "wv")}
    inits.update(split=np.array([0, 0, H, D], np.int64), merge=np.array([0, 0, E], np.int64),
                 flat=np.array([-1, S, D], np.int64), unflat=np.array([B, H, D, S], np.int64),
                 sq=np.array(D ** -0.25, np.float32), fill=np.array(fill, np.float32))
    nodes = []
    for n in "qkv":
        nodes += [N("MatMul", ["x", f"w{n}"], [f"{n}3"]), N("Reshape", [f"{n}3", "split"], [f"{n}4"]),
                  N("Transpose", [f"{n}4"], [f"{n}h"], perm=[0, 2, 1, 3])]
    nodes += [N("Reshape", ["kh", "flat"], ["k3d"]), N("Transpose", ["k3d"], ["k3t"], perm=[0, 2, 1]),
              N("Reshape", ["k3t", "unflat"], ["kt"]),
              N("Mul", ["qh", "sq"], ["qs"]), N("Mul", ["sq", "kt"], ["ks"]),
              N("MatMul", ["qs", "ks"], ["s"])]
    feeds = {"x": rand(rng, (B, S, E))}
    m = np.where(rng.random((B, 1, 1, S)) < 0.3, -np.inf, 0).astype(np.float32)
    m[0, 0, 0, :] = -np.inf                                       # batch 0: every key masked
    feeds["mask"] = m
    if runtime_mask:   # the mask Expanded to a shape given while running: dims known only then
        feeds["mshape"] = np.array([B, 1, S, S], np.int64)
        nodes.append(N("Expand", ["mask", "mshape"], ["mask_e"]))
    nodes += [N("Add", ["s", "mask_e" if runtime_mask else "mask"], ["sm"]), N("Softmax", ["sm"], ["p"]),
              N("IsNaN", ["p"], ["isn"]), N("Where", ["isn", "fill", "p"], ["pz"]),
              N("MatMul", ["pz", "vh"], ["o"]), N("Transpose", ["o"], ["ot"], perm=[0, 2, 1, 3]),
              N("Reshape", ["ot", "merge"], ["y"])]
    return make_model_from_nodes(nodes, feeds, inits, ["y"], opset=18), feeds


@pytest.mark.parametrize("fill", [0.0, -0.0, 0.25])
def test_sdpa_export_pattern(fill):
    m, feeds = sdpa_attention(fill=fill)
    assert fused(m), graph_ops(m)
    ref = run_levels(m, feeds, levels=LEVELS, **TOL)
    assert not np.isnan(ref[0]).any()      # the masked batch entry is the fill's weighted sum, not NaN


def test_mask_dims_known_only_while_running():
    m, feeds = sdpa_attention(runtime_mask=True)
    assert fused(m), graph_ops(m)
    run_levels(m, feeds, levels=LEVELS, **TOL)
    bad = dict(feeds, mshape=np.array([2, 1, 3, 7], np.int64))   # broadcasts to neither
    sess = onnxc.InferenceSession(m.SerializeToString())
    with pytest.raises(onnxc.Error, match="FusedAttention|Add|MatMul|shape|dim"):
        sess.run(None, bad)
