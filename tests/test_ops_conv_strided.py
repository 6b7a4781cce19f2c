"""Strided direct Conv (onnxc_conv_strided.h: stride-phase planes per band of output rows,
weights packed at compile time) against onnx.reference: strides, pads, dilations, odd sizes,
no bias, fused Relu/Clip/residual, batch 2 and symbolic, 1 and 2 threads, NaN/inf."""
import numpy as np
import pytest
from onnx import numpy_helper

from test_ops_conv_dw import conv_model, params, rand, run_threads
from util import check

TOL = dict(rtol=1e-4, atol=1e-5)

CASES = [
    ((1, 3, 32, 32), (16, 3, 3, 3), {"pads": [1, 1, 1, 1], "strides": [2, 2]}),     # mobilenet's first conv
    ((1, 3, 40, 38), (20, 3, 7, 7), {"pads": [3, 3, 3, 3], "strides": [2, 2]}),     # resnet's (odd M, W)
    ((2, 2, 17, 19), (9, 2, 3, 3), {"pads": [0, 1, 2, 1], "strides": [3, 2]}),      # uneven pads and strides
    ((1, 4, 21, 23), (8, 4, 3, 2), {"dilations": [2, 3], "pads": [2, 1, 1, 2], "strides": [2, 3]}),
    ((1, 3, 31, 33), (5, 3, 7, 7), {"dilations": [2, 2], "pads": [4, 6, 5, 6], "strides": [2, 2]}),  # K = 147
    ((1, 1, 9, 70), (5, 1, 3, 5), {"strides": [1, 2]}),                              # no pads, 2 vector tiles
    ((1, 3, 6, 6), (4, 3, 2, 2), {"pads": [3, 3, 3, 3], "strides": [2, 2]}),          # pads wider than the kernel
    ((1, 3, 11, 11), (8, 3, 3, 3), {"auto_pad": "SAME_UPPER", "strides": [2, 2]}),
    ((1, 3, 6, 224), (8, 3, 7, 7), {"pads": [3, 3, 3, 3], "strides": [2, 2]}),       # rows of 112: 48 + 32 + 32
    ((1, 2, 5, 119), (6, 2, 3, 3), {"pads": [1, 1, 1, 1], "strides": [2, 2]}),       # rows of 60: 32 + 28
]


@pytest.mark.parametrize("xs,ws,attrs", CASES)
@pytest.mark.parametrize("fuse", ["", "clip", "res_relu"])
def test_strided(xs, ws, attrs, fuse):
    m, feeds = conv_model(xs, ws, attrs, fuse)
    assert [p["kind"] for p in params(m)] == ["strided"]
    check(m, feeds, **TOL)


def test_strided_no_bias_1d_stays_or_runs():
    m, feeds = conv_model((2, 3, 30, 30), (6, 3, 5, 5), {"strides": [2, 2], "pads": [2, 2, 2, 2]}, bias=False)
    assert params(m)[0]["kind"] == "strided"
    check(m, feeds, **TOL)
    m, feeds = conv_model((1, 3, 50), (4, 3, 5), {"strides": [2], "pads": [2, 2]})   # 1-D: im2col
    assert params(m)[0]["kind"] == "im2col"
    check(m, feeds, **TOL)


# deeper convs whose output rows fill the vector tiles (ops/conv.py STRIDED_WIDE_*): long sums
WIDE_CASES = [
    ((1, 16, 56, 56), (12, 16, 3, 3), {"pads": [1, 1, 1, 1], "strides": [2, 2]}),      # resnet's 56 -> 28, K = 144
    ((1, 64, 57, 64), (20, 64, 3, 3), {"pads": [0, 1, 2, 1], "strides": [2, 2]}),      # K = 576, rows of 32
    ((2, 9, 30, 60), (11, 9, 5, 3), {"pads": [2, 1, 2, 1], "strides": [3, 2]}),        # rows of 30, 2 images
]


def wide_model(xs, ws, attrs, fuse=""):
    """conv_model with weights N(0, 1/K), as trained nets have: sums of K terms of about one (the
    tolerance is relative; N(0, 1) weights over 576 terms cancel to values their rounding dwarfs)."""
    m, feeds = conv_model(xs, ws, attrs, fuse)
    for init in m.graph.initializer:
        if init.name == "w":
            init.CopyFrom(numpy_helper.from_array(numpy_helper.to_array(init) / np.float32(np.sqrt(np.prod(ws[1:]))), "w"))
    return m, feeds


@pytest.mark.parametrize("xs,ws,attrs", WIDE_CASES)
@pytest.mark.parametrize("fuse", ["", "res_relu"])
def test_strided_wide_rows(xs, ws, attrs, fuse):
    m, feeds = wide_model(xs, ws, attrs, fuse)
    assert [p["kind"] for p in params(m)] == ["strided"]
    check(m, feeds, **TOL)
    run_threads(m, feeds, 2)


def test_strided_wide_non_finite():
    m, feeds = wide_model((1, 24, 56, 56), (16, 24, 3, 3), {"pads": [1, 1, 1, 1], "strides": [2, 2]}, "relu")
    assert params(m)[0]["kind"] == "strided"
    feeds["x"][0, 5, 10, 11], feeds["x"][0, 20, 0, 0], feeds["x"][0, 0, 55, 30] = np.nan, np.inf, -np.inf
    for nt in (1, 2):
        run_threads(m, feeds, nt)


# deep convs with short rows (14, 7): tiles of wide positions across rows, channel shares per thread
SHORT_CASES = [
    ((1, 32, 28, 28), (20, 32, 3, 3), {"pads": [1, 1, 1, 1], "strides": [2, 2]}),      # rows of 14
    ((1, 40, 14, 13), (17, 40, 3, 3), {"pads": [1, 1, 1, 1], "strides": [2, 2]}),      # rows of 7, odd M
    ((2, 64, 27, 48), (9, 64, 3, 3), {"pads": [0, 1, 2, 1], "strides": [2, 2]}),       # rows of 24, K = 576
    ((1, 128, 19, 19), (24, 128, 3, 3), {"pads": [1, 1, 1, 1], "strides": [2, 2]}),    # K = 1152 > KC
    ((1, 256, 14, 14), (20, 256, 3, 3), {"pads": [1, 1, 1, 1], "strides": [2, 2]}),    # K = 2304
    ((1, 512, 14, 14), (9, 512, 3, 3), {"pads": [1, 1, 1, 1], "strides": [2, 2]}),     # K = 4608
    ((1, 64, 56, 56), (16, 64, 3, 3), {"pads": [1, 1, 1, 1], "strides": [2, 2]}),      # rows of 28, 2 bands
]


@pytest.mark.parametrize("xs,ws,attrs", SHORT_CASES)
@pytest.mark.parametrize("fuse", ["", "res_clip"])
def test_strided_short_rows(xs, ws, attrs, fuse):
    m, feeds = wide_model(xs, ws, attrs, fuse)
    p = params(m)[0]
    assert p["kind"] == "strided" and p["strided"]["tiles"] == "wide"
    check(m, feeds, **TOL)
    feeds["x"][0, 1, 2, 3], feeds["x"][-1, -1, -1, -1] = np.nan, np.inf
    for nt in (2, 3, 4):
        run_threads(m, feeds, nt)


def test_which_strided_convs_take_it():
    m, feeds = conv_model((1, 32, 14, 14), (8, 32, 3, 3), {"strides": [2, 2], "pads": [1, 1, 1, 1]})   # rows of 7
    assert params(m)[0]["kind"] == "strided"
    m, feeds = conv_model((1, 32, 10, 10), (8, 32, 3, 3), {"strides": [2, 2], "pads": [1, 1, 1, 1]})   # rows of 5
    assert params(m)[0]["kind"] == "im2col"
    m, feeds = conv_model((1, 256, 14, 14), (8, 256, 3, 3), {"strides": [2, 2], "pads": [1, 1, 1, 1]})  # K = 2304
    assert params(m)[0]["kind"] == "strided"
    m, feeds = conv_model((1, 576, 14, 14), (8, 576, 3, 3), {"strides": [2, 2], "pads": [1, 1, 1, 1]})  # K = 5184
    assert params(m)[0]["kind"] == "im2col"
    m, feeds = conv_model((1, 16, 56, 56), (8, 16, 3, 3), {"strides": [2, 2], "pads": [1, 1, 1, 1]})    # rows of 28
    assert params(m)[0]["strided"]["tiles"] == "wide"
    m, feeds = conv_model((1, 16, 64, 64), (8, 16, 3, 3), {"strides": [2, 2], "pads": [1, 1, 1, 1]})    # rows of 32
    assert params(m)[0]["strided"]["tiles"] == "rows"
    m, feeds = conv_model((1, 8, 40, 40), (8, 8, 5, 5), {"strides": [3, 3], "pads": [1, 1, 1, 1]})     # rows of 13
    assert params(m)[0]["kind"] == "strided"
    m, feeds = conv_model((1, 4, 14, 14), (8, 2, 3, 3), {"strides": [2, 2], "group": 2})
    assert params(m)[0]["kind"] == "im2col"


@pytest.mark.parametrize("nt", [1, 2])
def test_strided_symbolic_batch_threads_nan(nt):
    m, _ = conv_model((2, 3, 45, 47), (24, 3, 3, 3), {"pads": [1, 1, 1, 1], "strides": [2, 2]}, "res_clip", batch="N")
    for n in (1, 3):
        feeds = {"x": rand((n, 3, 45, 47)), "z": rand((n, 24, 23, 24))}
        feeds["x"][n - 1, 1, 44, 46], feeds["x"][0, 0, 10, 10], feeds["z"][0, 2, 3, 3] = np.nan, np.inf, -np.inf
        got = run_threads(m, feeds, nt)
        assert np.isnan(got[n - 1, :, 22, 23]).all() and got[0, 2, 3, 3] == 0


@pytest.mark.parametrize("nt", [1, 2])
def test_strided_1x1_convs_take_the_sgemm(nt):
    """A 1x1 conv with strides reads one pixel per tap: a gather and the SGEMM (onnxc_pw_rows
    where its pixels fill the tiles, else im2col's) and never the strided kernel, whose taps have
    no reuse (ResNet-50's 1024 -> 2048 downsample to 7x7: 2423 -> 1962 us). Its 49 pixels fill no
    AVX-512 tile (im2col there), AVX2's 16-wide ones well enough (onnxc_pw_rows)."""
    m, feeds = conv_model((1, 256, 14, 14), (64, 256, 1, 1), {"strides": [2, 2]}, "res_relu")
    assert params(m)[0]["kind"] in ("pointwise", "im2col")
    check(m, feeds, **TOL)
    feeds["x"][0, 3, 4, 6], feeds["x"][0, 5, 0, 0] = np.nan, -np.inf   # read pixels (even rows and columns)
    run_threads(m, feeds, nt)
