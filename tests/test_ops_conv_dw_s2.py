"""Stride-2 depthwise Conv on 8 output columns per vector (templates/c/ops/_conv_dw_s2.c.j2, AVX2
builds; AVX-512 takes the flat kernel, portable builds the phase kernel) against
onnx.reference: the chunks at a row's ends load masked (pads on either side, odd widths, rows
narrower than one vector, kernels up to 7x7), whole chunks in one loop, fused residual and
activations, NaN/inf, batch and threads."""
import numpy as np
import pytest

import onnxc
from onnxc.compiler import Options
from onnx.reference import ReferenceEvaluator
from test_ops_conv_dw import TOL, conv_model, params, rand, run_threads
from util import assert_close, typed_outputs

S2_CASES = [   # x shape, pads, kernel
    ((1, 6, 112, 112), [1, 1, 1, 1], (3, 3)),     # MobileNetV2's first: 7 whole chunks
    ((1, 4, 15, 15), [1, 1, 1, 1], (3, 3)),       # odd width: the last chunk reads 15 columns
    ((1, 3, 17, 23), [2, 2, 2, 2], (5, 5)),
    ((1, 4, 9, 9), [0, 0, 0, 0], (3, 3)),
    ((1, 3, 8, 40), [0, 1, 1, 0], (3, 3)),        # uneven pads
    ((1, 3, 5, 3), [1, 1, 1, 1], (3, 3)),         # a row narrower than one vector
    ((1, 2, 33, 65), [3, 3, 3, 3], (7, 7)),
    ((2, 3, 20, 36), [1, 0, 1, 2], (3, 3)),       # batch 2
    ((1, 3, 4, 4), [2, 2, 2, 2], (5, 5)),         # taps outside on both sides of one chunk
    ((1, 2, 16, 50), [1, 1, 1, 1], (2, 4)),       # even kernel
]


def s2_params(m):
    p = params(m)
    assert [q["kind"] for q in p] == ["depthwise"]
    return p[0]["dws2"]


@pytest.mark.parametrize("xs,pads,k", S2_CASES)
@pytest.mark.parametrize("fuse", ["", "res_clip", "relu"])
def test_depthwise_s2(xs, pads, k, fuse):
    m, feeds = conv_model(xs, (xs[1], 1) + k, {"group": xs[1], "pads": pads, "strides": [2, 2]}, fuse,
                          bias=fuse != "relu")
    s2 = s2_params(m)
    ow = (xs[3] + pads[1] + pads[3] - k[1]) // 2 + 1
    assert s2["nk"] == -(-ow // 8) and len(s2["edges"]) + s2["j1"] - s2["j0"] == s2["nk"]
    for nt in (1, 2):
        run_threads(m, feeds, nt)


def test_whole_chunks_need_no_masks():
    m, _ = conv_model((1, 6, 112, 112), (6, 1, 3, 3), {"group": 6, "pads": [1, 1, 1, 1], "strides": [2, 2]})
    s2 = s2_params(m)
    # chunk 0's first tap starts at column -1 (the pad); chunk 6's last would read column 112 (an
    # odd lane it does not use, past the row: the plane's end for the last row); 1-5 whole
    assert [e["j"] for e in s2["edges"]] == [0, 6] and (s2["j0"], s2["j1"]) == (1, 6)
    assert s2["edges"][0]["masks"] == [(0xfe, 0xff), (0xff, 0xff), (0xff, 0xff)]
    assert s2["edges"][1]["masks"] == [(0xff, 0xff), (0xff, 0xff), (0xff, 0x7f)]
    assert s2["edges"][0]["keep"] == s2["edges"][1]["keep"] == 0xff


@pytest.mark.parametrize("attrs", [{"strides": [2, 1]}, {"strides": [2, 2], "dilations": [2, 2]},
                                   {"strides": [3, 3]}, {"strides": [1, 1]}])
def test_other_geometry_is_not_taken(attrs):
    m, _ = conv_model((1, 4, 14, 14), (4, 1, 3, 3), {"group": 4, "pads": [1, 1, 1, 1], **attrs})
    assert s2_params(m) is None


def test_nan_inf_and_pads_read_zero():
    m, feeds = conv_model((1, 3, 14, 30), (3, 1, 3, 3), {"group": 3, "pads": [1, 1, 1, 1], "strides": [2, 2]},
                          "relu", bias=False)
    assert s2_params(m)
    x = feeds["x"]
    x[0, 0, 0, 0], x[0, 1, 7, 15], x[0, 2, 13, 29] = np.nan, np.inf, -np.inf
    # the row before channel 1's first: a chunk at the row's start must not read it
    x[0, 0, 13, 29] = np.nan
    got = run_threads(m, feeds, 2)
    assert np.isnan(got[0, 0, 0, 0]) and np.isnan(got[0, 0, 6, 14])
    assert not np.isnan(got[0, 1, :, 0]).any() and not np.isnan(got[0, 0, 0, 1:]).any()


@pytest.mark.parametrize("nt", [1, 2])
def test_symbolic_batch(nt):
    m, _ = conv_model((2, 20, 56, 56), (20, 1, 3, 3), {"group": 20, "pads": [1, 1, 1, 1], "strides": [2, 2]},
                      "res_clip", batch="N")
    assert s2_params(m)
    for n in (1, 3):
        run_threads(m, {"x": rand((n, 20, 56, 56)), "z": rand((n, 20, 28, 28))}, nt)


@pytest.mark.parametrize("portable", [False, True])
@pytest.mark.parametrize("case", [1, 2, 5])
def test_agrees_with_the_phase_kernel(case, portable, tmp_path):
    xs, pads, k = S2_CASES[case]
    m, feeds = conv_model(xs, (xs[1], 1) + k, {"group": xs[1], "pads": pads, "strides": [2, 2]}, "res_clip")
    want = ReferenceEvaluator(m).run(None, feeds)
    typed_outputs(m, want)
    path = onnxc.compiler.build_library(m, Options(portable=portable), cache_dir=tmp_path)
    assert_close(want, onnxc.InferenceSession(str(path)).run(None, feeds), TOL["rtol"], TOL["atol"])
