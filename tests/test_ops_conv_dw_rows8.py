"""Depthwise Conv at stride 1 and 2 on 8 output columns per vector straight from the input rows
(templates/c/ops/_conv_dw_rows8.c.j2, AVX2 builds; AVX-512 takes the flat kernel, portable builds
the phase kernel) against onnx.reference: the chunks at a row's ends load masked (pads on either
side, odd widths, rows narrower than one vector, kernels up to 7x7, dilations), whole chunks in one
loop, fused residual and activations, NaN/inf, batch and threads."""
import numpy as np
import pytest

import onnxc
from onnxc.compiler import Options
from onnx.reference import ReferenceEvaluator
from test_ops_conv_dw import TOL, conv_model, params, rand, run_threads
from util import assert_close, typed_outputs

CASES = [   # x shape, pads, kernel, stride, dilation
    ((1, 6, 112, 112), [1, 1, 1, 1], (3, 3), 2, 1),     # MobileNetV2's: 7 chunks, 5 whole
    ((1, 6, 56, 56), [1, 1, 1, 1], (3, 3), 1, 1),
    ((1, 4, 15, 15), [1, 1, 1, 1], (3, 3), 2, 1),       # odd width: the last chunk reads 15 columns
    ((1, 4, 15, 13), [1, 1, 1, 1], (3, 3), 1, 1),
    ((1, 3, 17, 23), [2, 2, 2, 2], (5, 5), 2, 1),
    ((1, 3, 17, 23), [2, 2, 2, 2], (5, 5), 1, 1),
    ((1, 4, 9, 9), [0, 0, 0, 0], (3, 3), 2, 1),
    ((1, 3, 8, 40), [0, 1, 1, 0], (3, 3), 2, 1),        # uneven pads
    ((1, 3, 8, 40), [2, 0, 0, 3], (3, 3), 1, 1),
    ((1, 3, 5, 3), [1, 1, 1, 1], (3, 3), 2, 1),         # a row narrower than one vector
    ((1, 3, 1, 1), [1, 1, 1, 1], (3, 3), 1, 1),         # one pixel
    ((1, 2, 33, 65), [3, 3, 3, 3], (7, 7), 2, 1),
    ((1, 2, 30, 70), [3, 3, 3, 3], (7, 7), 1, 1),
    ((2, 3, 20, 36), [1, 0, 1, 2], (3, 3), 2, 1),       # batch 2
    ((1, 3, 4, 4), [2, 2, 2, 2], (5, 5), 2, 1),         # taps outside on both sides of one chunk
    ((1, 2, 16, 50), [1, 1, 1, 1], (2, 4), 2, 1),       # even kernel
    ((1, 3, 20, 44), [2, 2, 2, 2], (3, 3), 1, 2),       # dilations
    ((1, 3, 21, 44), [2, 2, 2, 2], (3, 3), 2, 2),
]


def r8_params(m):
    p = params(m)
    assert [q["kind"] for q in p] == ["depthwise"]
    return p[0]["dwr8"]


def model(case, fuse, **kw):
    xs, pads, k, s, d = CASES[case]
    attrs = {"group": xs[1], "pads": pads, "strides": [s, s], "dilations": [d, d]}
    return conv_model(xs, (xs[1], 1) + k, attrs, fuse, **kw)


@pytest.mark.parametrize("case", range(len(CASES)))
@pytest.mark.parametrize("fuse", ["", "res_clip", "relu", "res_tanh"])
def test_depthwise_rows8(case, fuse):
    m, feeds = model(case, fuse, bias=fuse != "relu")
    xs, pads, k, s, d = CASES[case]
    r8 = r8_params(m)
    ow = (xs[3] + pads[1] + pads[3] - d * (k[1] - 1) - 1) // s + 1
    assert r8["S"] == s and r8["nk"] == -(-ow // 8)
    assert len(r8["edges"]) + r8["j1"] - r8["j0"] == r8["nk"]
    for nt in (1, 2):
        run_threads(m, feeds, nt)


def test_whole_chunks_need_no_masks():
    m, _ = model(0, "")
    r8 = r8_params(m)
    # chunk 0's first tap starts at column -1 (the pad); chunk 6's last would read column 112 (an
    # odd lane it does not use, past the row: the plane's end for the last row); 1-5 whole
    assert [e["j"] for e in r8["edges"]] == [0, 6] and (r8["j0"], r8["j1"]) == (1, 6)
    assert r8["edges"][0]["masks"] == [(0xfe, 0xff), (0xff, 0xff), (0xff, 0xff)]
    assert r8["edges"][1]["masks"] == [(0xff, 0xff), (0xff, 0xff), (0xff, 0x7f)]
    assert r8["edges"][0]["keep"] == r8["edges"][1]["keep"] == 0xff
    m, _ = model(1, "")        # stride 1, 56 wide: the first and last chunk reach the pads
    r8 = r8_params(m)
    assert [e["j"] for e in r8["edges"]] == [0, 6] and (r8["j0"], r8["j1"]) == (1, 6)
    assert r8["edges"][0]["masks"][0] == (0xfe, 0) and r8["edges"][1]["masks"][2] == (0x7f, 0)


@pytest.mark.parametrize("attrs", [{"strides": [2, 1]}, {"strides": [3, 3]}, {"strides": [1, 2]}])
def test_other_geometry_is_not_taken(attrs):
    m, _ = conv_model((1, 4, 14, 14), (4, 1, 3, 3), {"group": 4, "pads": [1, 1, 1, 1], **attrs})
    assert r8_params(m) is None


@pytest.mark.parametrize("stride", [1, 2])
def test_nan_inf_and_pads_read_zero(stride):
    m, feeds = conv_model((1, 3, 14, 30), (3, 1, 3, 3), {"group": 3, "pads": [1, 1, 1, 1], "strides": [stride] * 2},
                          "relu", bias=False)
    assert r8_params(m)
    x = feeds["x"]
    x[0, 0, 0, 0], x[0, 1, 7, 15], x[0, 2, 13, 29] = np.nan, np.inf, -np.inf
    # the last element of channel 0, just before channel 1's first row: a chunk at a row's start
    # must not read it, nor one at a row's end the next row's first
    x[0, 0, 13, 29] = np.nan
    got = run_threads(m, feeds, 2)
    assert np.isnan(got[0, 0, 0, 0]) and np.isnan(got[0, 0, -1, -1])
    assert not np.isnan(got[0, 1, :, 0]).any() and not np.isnan(got[0, 0, 1:-2, -1]).any()


@pytest.mark.parametrize("nt", [1, 2])
@pytest.mark.parametrize("stride", [1, 2])
def test_symbolic_batch(nt, stride):
    m, _ = conv_model((2, 20, 56, 56), (20, 1, 3, 3), {"group": 20, "pads": [1, 1, 1, 1], "strides": [stride] * 2},
                      "res_clip", batch="N")
    assert r8_params(m)
    o = 56 // stride
    for n in (1, 3):
        run_threads(m, {"x": rand((n, 20, 56, 56)), "z": rand((n, 20, o, o))}, nt)


@pytest.mark.parametrize("portable", [False, True])
@pytest.mark.parametrize("case", [2, 3, 4, 16])
def test_agrees_with_the_phase_kernel(case, portable, tmp_path):
    m, feeds = model(case, "res_clip")
    want = ReferenceEvaluator(m).run(None, feeds)
    typed_outputs(m, want)
    path = onnxc.compiler.build_library(m, Options(portable=portable), cache_dir=tmp_path)
    assert_close(want, onnxc.InferenceSession(str(path)).run(None, feeds), TOL["rtol"], TOL["atol"])
