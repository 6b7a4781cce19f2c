"""Compile-time weight prepacking: which convs get packed weights, the blob keeps only the
packed copy, and native and portable builds (different register blocks) compute what
onnx.reference does."""
import numpy as np
import pytest
from onnx import helper
from onnx.reference import ReferenceEvaluator

import onnxc
from onnxc import build, loader
from onnxc.compiler import Options, compile_model
from onnxc.passes.prepack import pack, sgemm_block, w_swapped
from passutil import rand
from util import make_model_from_nodes, typed_outputs

rng = np.random.default_rng(19)
TOL = dict(rtol=1e-4, atol=1e-5)


def model(xs, ws, attrs, tail=()):
    x = rand(rng, xs)
    m = make_model_from_nodes([helper.make_node("Conv", ["x", "w", "b"], ["c" if tail else "y"], **attrs),
                               *tail], {"x": x}, {"w": rand(rng, ws), "b": rand(rng, (ws[0],))}, ["y"])
    ref = ReferenceEvaluator(m).run(None, {"x": x})
    typed_outputs(m, ref)
    return m, {"x": x}, ref


CASES = [
    ((1, 16, 12, 12), (32, 16, 3, 3), {"pads": [1, 1, 1, 1], "strides": [2, 2]}),  # im2col (rows of 6), one chunk
    ((2, 16, 40, 41), (9, 16, 3, 3), {"pads": [1, 2, 0, 1]}),                    # chunks, 2 images
    ((1, 8, 9, 11), (12, 2, 1, 1), {"group": 4}),                                # grouped pointwise
    ((1, 64, 7, 7), (70, 64, 3, 3), {"pads": [1, 1, 1, 1]}),                     # K > KC, few pixels
]


def test_block_is_known_for_both_builds():
    for portable in (False, True):
        tc = build.toolchain(portable, False)
        mr, nr = sgemm_block(tc.cc, tc.flags)
        assert mr > 0 and nr > 0


def test_pack_layout():
    """Panels of P lines, k-major, depth blocks of KC, zero rows to a multiple of P."""
    w = np.arange(5 * 300, dtype=np.float32).reshape(5, 300)
    p = pack(w, 4)
    assert p.size == 8 * 300
    blk0 = p[:8 * 256].reshape(2, 256, 4)            # block 0: 2 panels x kc x P
    np.testing.assert_array_equal(blk0[0, :, :], w[0:4, :256].T)
    np.testing.assert_array_equal(blk0[1, :, 0], w[4, :256])
    assert not blk0[1, :, 1:].any()
    blk1 = p[8 * 256:].reshape(2, 44, 4)
    np.testing.assert_array_equal(blk1[0], w[0:4, 256:].T)
    assert w_swapped(512, 49, 8, 48) and not w_swapped(64, 3136, 8, 48)


def test_graph_and_blob():
    m, _, _ = model(*CASES[0])
    plain = compile_model(loader.load(m), Options(optimization_level=2), gemm_block=(8, 48))
    packed = compile_model(loader.load(m), Options(optimization_level=99), gemm_block=(8, 48))
    firmware = compile_model(loader.load(m), Options(optimization_level=99))
    (node,) = packed.graph.nodes
    assert node.attrs["_prepacked"]["mr"] == 8 and len(node.inputs) == 5
    assert "_prepacked" not in firmware.graph.nodes[0].attrs
    # the plain weights (32 x 144 floats) are replaced by 32 x 144 packed ones, not added to them
    assert len(packed.sources.weights) <= len(plain.sources.weights) + 64 * 2
    assert "#error" in packed.sources.c


@pytest.mark.parametrize("portable", [False, True])
@pytest.mark.parametrize("case", range(len(CASES)))
def test_results(case, portable, tmp_path):
    m, feeds, ref = model(*CASES[case], tail=[helper.make_node("Relu", ["c"], ["y"])])
    path = onnxc.compiler.build_library(m, Options(portable=portable), cache_dir=tmp_path)
    for nt in (1, 2):
        so = onnxc.SessionOptions()
        so.intra_op_num_threads = nt
        got = onnxc.InferenceSession(str(path), so).run(None, feeds)
        # float32 sums of K products: their rounding error grows with K (576 in case 3)
        k = int(np.prod(CASES[case][1][1:]))
        np.testing.assert_allclose(got[0], ref[0], rtol=TOL["rtol"], atol=TOL["atol"] * max(1, k / 64))
