"""Winograd F(4x4,3x3) / F(2x2,3x3) float Conv (ops/conv.py winograd_*, passes/prepack.py,
runtime_c/onnxc_winograd.h): which convs take it, its matrices, and results against
onnx.reference within rtol 1e-4 / atol 1e-5 on N(0,0.05) weights and N(0,1) inputs (edge tiles,
pads, batches, residual + activation epilogues, threads, non-finite inputs)."""
from fractions import Fraction

import numpy as np
import pytest
from onnx import helper
from onnx.reference import ReferenceEvaluator

import onnxc
from onnxc import loader
from onnxc.compiler import Options, compile_model
from onnxc.ops.conv import winograd_matrices
from util import make_model_from_nodes, typed_outputs

TOL = dict(rtol=1e-4, atol=1e-5)


def model(n, c, h, w, m, pads=(1, 1, 1, 1), res=False, act="Relu", seed=0, batch=None, scale=0.05):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, c, h, w)).astype(np.float32)
    wt = (rng.standard_normal((m, c, 3, 3)) * scale).astype(np.float32)
    b = rng.standard_normal(m).astype(np.float32)
    oh, ow = h + pads[0] + pads[2] - 2, w + pads[1] + pads[3] - 2
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c"], pads=list(pads))]
    inputs, last = {"x": x}, "c"
    if res:
        inputs["z"] = rng.standard_normal((n, m, oh, ow)).astype(np.float32)
        nodes.append(helper.make_node("Add", ["c", "z"], ["s"]))
        last = "s"
    if act:
        nodes.append(helper.make_node(act, [last], ["y"]))
    else:
        nodes.append(helper.make_node("Identity", [last], ["y"]))
    shapes = {"x": [batch, c, h, w], "z": [batch, m, oh, ow]} if batch else None
    mdl = make_model_from_nodes(nodes, inputs, {"w": wt, "b": b}, ["y"], input_shapes=shapes)
    typed_outputs(mdl, ReferenceEvaluator(mdl).run(None, inputs))
    return mdl, inputs


def run(mdl, feeds, nt=1):
    ref = ReferenceEvaluator(mdl).run(None, feeds)
    so = onnxc.SessionOptions()
    so.intra_op_num_threads = nt
    got = onnxc.InferenceSession(mdl.SerializeToString(), so).run(None, feeds)
    return ref[0], got[0]


def wino(mdl):
    c = compile_model(loader.load(mdl), Options(), gemm_block=(8, 48))
    return [n.attrs.get("_prepacked_wino") for n in c.graph.nodes if n.op_type in ("Conv", "FusedConv")]


@pytest.mark.parametrize("m", [2, 4])
def test_matrices_compute_correlation(m):
    AT, G, BT = winograd_matrices(m)
    rng = np.random.default_rng(m)
    g, d = rng.integers(-5, 6, 3), rng.integers(-5, 6, m + 2)
    u = [sum(Fraction(int(v)) * row[k] for k, v in enumerate(g)) for row in G]
    v = [sum(Fraction(int(x)) * row[k] for k, x in enumerate(d)) for row in BT]
    y = [sum(a * b * c for a, b, c in zip(row, u, v)) for row in AT]
    assert y == [sum(int(g[k]) * int(d[i + k]) for k in range(3)) for i in range(m)]


def test_selection():
    assert wino(model(1, 64, 56, 56, 64)[0])[0]["m"] == 4
    assert wino(model(1, 256, 14, 14, 256)[0])[0]["m"] == 2
    assert wino(model(1, 8, 20, 20, 32)[0]) == [None]          # few channels
    assert wino(model(1, 64, 28, 28, 64)[0])[0]["m"] == 2      # F(4,3) pays from ~100 tiles
    assert wino(model(1, 64, 7, 7, 64)[0])[0]["m"] == 2
    assert wino(model(1, 64, 5, 5, 64, pads=(0, 0, 0, 0))[0]) == [None]   # few tiles
    # accuracy: larger weights take F(2,3), then im2col
    assert wino(model(1, 16, 48, 48, 16, scale=1.0)[0])[0]["m"] == 2
    assert wino(model(1, 64, 56, 56, 64, scale=1.0)[0]) == [None]
    firmware = compile_model(loader.load(model(1, 64, 56, 56, 64)[0]), Options())
    assert "_prepacked_wino" not in firmware.graph.nodes[0].attrs   # no block known: im2col


CASES = [
    (1, 64, 56, 56, 64, (1, 1, 1, 1)),
    (1, 32, 29, 31, 48, (1, 1, 1, 1)),          # edge tiles both ways
    (2, 16, 18, 23, 20, (0, 2, 1, 0)),          # batch 2, uneven pads
    (1, 128, 28, 28, 128, (1, 1, 1, 1)),
    (1, 192, 14, 14, 40, (1, 1, 1, 1)),         # F(2,3), swapped orientation
    (3, 24, 12, 12, 17, (2, 2, 2, 2)),          # tiles past a block across images
    (1, 300, 12, 12, 24, (1, 1, 1, 1)),         # channels past one depth block (KC = 256)
    (2, 16, 30, 2, 16, (1, 0, 1, 12)),          # tile columns wholly in the right padding
]


@pytest.mark.parametrize("case", range(len(CASES)))
def test_results(case):
    n, c, h, w, m, pads = CASES[case]
    mdl, feeds = model(n, c, h, w, m, pads)
    assert wino(mdl)[0] is not None
    for nt in (1, 2, 3):     # 3: blocks left after whole rounds split by output channels
        ref, got = run(mdl, feeds, nt)
        np.testing.assert_allclose(got, ref, **TOL)


@pytest.mark.parametrize("nt", [2, 3])
def test_non_finite_input_in_a_split_tail_block(nt):
    """56x56, 64 channels: 5 blocks of 48 tiles, the last of 4 (the bottom right corner); at 2
    and 3 threads the blocks past whole rounds are split by output channels, each part
    transforming the block itself and finding the NaN."""
    mdl, feeds = model(1, 64, 56, 56, 64, act=None, seed=3)
    assert wino(mdl)[0]["Tb"] == 48
    feeds["x"][0, 7, 54, 50] = np.nan
    ref, got = run(mdl, feeds, nt)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(ref))
    fin = np.isfinite(ref)
    np.testing.assert_allclose(got[fin], ref[fin], **TOL)


@pytest.mark.parametrize("c", [64, 128, 256, 512])
def test_accuracy_wide(c):
    hw = {64: 56, 128: 28, 256: 14, 512: 16}[c]
    mdl, feeds = model(1, c, hw, hw, 64, act=None, seed=c)
    assert wino(mdl)[0] is not None
    ref, got = run(mdl, feeds)
    np.testing.assert_allclose(got, ref, **TOL)


def test_residual_and_symbolic_batch():
    mdl, feeds = model(2, 32, 20, 20, 32, res=True, batch="N")
    assert wino(mdl)[0] is not None
    for nt in (1, 2):
        ref, got = run(mdl, feeds, nt)
        np.testing.assert_allclose(got, ref, **TOL)


def test_non_finite_inputs_like_direct():
    mdl, feeds = model(1, 32, 16, 16, 32, act=None)
    x = feeds["x"]
    x[0, 3, 5, 7] = np.nan
    x[0, 9, 12, 2] = np.inf
    x[0, 1, 0, 15] = -np.inf
    ref, got = run(mdl, feeds)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(ref))
    np.testing.assert_array_equal(np.isinf(got), np.isinf(ref))
    fin = np.isfinite(ref)
    np.testing.assert_allclose(got[fin], ref[fin], **TOL)


# fewer tile blocks than threads: the blocks' V computed first, channels split over the threads
# (one block at 7x7 and 14x14; two blocks of a batch of 2 at 3 and 4 threads). The split is in
# vectors of a U panel, so ranges start and end inside panels (256 at 2 threads: 128 + 128; 130:
# 80 + 50); every output is the same sum whatever the split, so the bits equal one thread's.
PRE_CASES = [
    (1, 256, 14, 14, 256, False),
    (1, 70, 7, 7, 100, True),
    (2, 48, 7, 9, 130, True),
]


@pytest.mark.parametrize("case", range(len(PRE_CASES)))
def test_blocks_shared_by_threads(case):
    n, c, h, w, m, res = PRE_CASES[case]
    mdl, feeds = model(n, c, h, w, m, res=res, seed=case)
    assert wino(mdl)[0] is not None
    _, one = run(mdl, feeds, 1)
    for nt in (2, 3, 4):
        ref, got = run(mdl, feeds, nt)
        np.testing.assert_allclose(got, ref, **TOL)
        np.testing.assert_array_equal(got, one)


@pytest.mark.parametrize("nt", [2, 4])
def test_non_finite_inputs_shared_blocks(nt):
    mdl, feeds = model(2, 40, 7, 7, 64, act=None)
    x = feeds["x"]
    x[1, 3, 5, 6] = np.nan          # the second image only: one block clean, one not
    x[1, 30, 0, 0] = np.inf
    ref, got = run(mdl, feeds, nt)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(ref))
    np.testing.assert_array_equal(np.isinf(got), np.isinf(ref))
    fin = np.isfinite(ref)
    np.testing.assert_allclose(got[fin], ref[fin], **TOL)


def test_portable_build(tmp_path):
    """The transforms are plain C: the portable build (no AVX-512, 4-lane SGEMM tiles) agrees."""
    mdl, feeds = model(1, 64, 30, 29, 48, pads=(1, 1, 1, 1), res=True)
    ref = ReferenceEvaluator(mdl).run(None, feeds)[0]
    lib = onnxc.compiler.build_library(mdl, Options(portable=True), cache_dir=tmp_path)
    so = onnxc.SessionOptions()
    so.intra_op_num_threads = 2
    got = onnxc.InferenceSession(str(lib), so).run(None, feeds)[0]
    np.testing.assert_allclose(got, ref, **TOL)
