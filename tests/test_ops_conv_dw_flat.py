"""Depthwise Conv on 16 output positions per vector (templates/c/ops/_conv_dw_flat.c.j2, AVX-512
builds) against onnx.reference: whole planes as one row of chunks and per-row chunks, stride 1
(rows as wide as the input's) and stride 2 (straight from the input's rows up to 64 outputs
wide, else from the input split into stride phases), pads on any
side, dilations, 1x1 to 7x7 kernels, fused residual and activation, batch and threads, NaN/inf;
and the same models in the portable build, where the phase kernel runs instead."""
import numpy as np
import pytest

import onnxc
from onnxc.compiler import Options
from onnx.reference import ReferenceEvaluator
from test_ops_conv_dw import TOL, conv_model, params, rand, run_threads
from util import assert_close, check, typed_outputs

FLAT_CASES = [   # x shape, attributes, kernel, expected mode
    ((1, 8, 16, 16), {"pads": [1, 1, 1, 1]}, (3, 3), "flat"),
    ((1, 5, 1, 1), {"pads": [1, 1, 1, 1]}, (3, 3), "flat"),                    # one position
    ((2, 3, 9, 21), {"pads": [0, 1, 0, 1]}, (3, 3), "flat"),                   # OH = IH - 2
    ((1, 4, 13, 12), {"pads": [2, 0, 1, 2], "dilations": [1, 1]}, (4, 3), "flat"),   # uneven pads
    ((1, 3, 20, 20), {"pads": [4, 4, 4, 4], "dilations": [2, 2]}, (5, 5), "flat"),
    ((1, 3, 64, 64), {"pads": [3, 3, 3, 3]}, (7, 7), "rows"),                  # 49 taps: per row
    ((1, 3, 70, 70), {"pads": [1, 1, 1, 1]}, (3, 3), "rows"),                  # 4900 positions
    ((1, 2, 3, 120), {"pads": [1, 1, 1, 1]}, (3, 3), "flat"),
    ((1, 4, 14, 14), {"pads": [1, 1, 1, 1], "strides": [2, 2]}, (3, 3), "s2rows"),
    ((1, 4, 15, 14), {"pads": [1, 1, 1, 1], "strides": [2, 2]}, (3, 3), "s2rows"),  # odd IH
    ((1, 4, 14, 14), {"pads": [0, 0, 1, 1], "strides": [2, 2]}, (3, 3), "s2rows"),  # SAME_UPPER-like
    ((1, 4, 14, 14), {"auto_pad": "SAME_LOWER", "strides": [2, 2]}, (3, 3), "s2rows"),
    ((2, 3, 20, 20), {"pads": [2, 2, 2, 2], "strides": [2, 2]}, (5, 5), "s2rows"),
    ((1, 3, 2, 2), {"pads": [1, 1, 1, 1], "strides": [2, 2]}, (3, 3), "s2rows"),
    ((1, 3, 9, 112), {"pads": [1, 1, 1, 1], "strides": [2, 2]}, (3, 3), "s2rows"),  # 7 vectors a row
    ((1, 3, 9, 98), {"pads": [3, 3, 3, 3], "strides": [2, 2]}, (7, 7), "s2rows"),   # shifts -2 .. 1
    ((1, 2, 16, 40), {"pads": [0, 0, 0, 2], "strides": [2, 2]}, (2, 3), "s2rows"),  # uneven pads
    ((1, 3, 132, 140), {"pads": [1, 1, 1, 1], "strides": [2, 2]}, (3, 3), "rows"),  # phases split in 32s + 12
    ((1, 2, 20, 140), {"pads": [1, 1, 1, 1], "strides": [2, 2]}, (3, 3), "flat"),   # phases, one row of chunks
]


def flat_params(m):
    p = params(m)
    assert [q["kind"] for q in p] == ["depthwise"]
    return p[0]["dwf"]


@pytest.mark.parametrize("xs,attrs,k,mode", FLAT_CASES)
@pytest.mark.parametrize("fuse", ["", "res_clip", "res_tanh"])
def test_depthwise_flat(xs, attrs, k, mode, fuse):
    m, feeds = conv_model(xs, (xs[1], 1) + k, {**attrs, "group": xs[1]}, fuse)
    f = flat_params(m)
    assert f and ("s2rows" if f.get("s2rows") else "flat" if f["flat"] else "rows") == mode
    assert bool(f["phases"]) == (attrs.get("strides", [1])[0] == 2 and mode != "s2rows")
    check(m, feeds, **TOL)


@pytest.mark.parametrize("xs,attrs,k", [
    ((1, 4, 9, 10), {}, (3, 3)),                                   # OW != IW
    ((1, 4, 15, 15), {"pads": [1, 1, 1, 1], "strides": [2, 2]}, (3, 3)),   # odd IW
    ((1, 4, 14, 14), {"pads": [1, 1, 1, 1], "strides": [2, 1]}, (3, 3)),
    ((1, 4, 14, 14), {"pads": [2, 2, 2, 2], "strides": [2, 2], "dilations": [2, 2]}, (3, 3)),
    ((1, 4, 14, 14), {"pads": [1, 1, 1, 1], "strides": [3, 3]}, (3, 3)),
    ((1, 2, 6, 80), {"pads": [0, 0, 0, 33], "strides": [2, 2]}, (1, 34)),   # shifts of 16+ lanes
])
def test_depthwise_other_geometry_keeps_phase_kernel(xs, attrs, k):
    m, feeds = conv_model(xs, (xs[1], 1) + k, {**attrs, "group": xs[1]}, "clip")
    f = flat_params(m)
    assert (f is None or not f["s2rows"]) and params(m)[0]["dw"]
    check(m, feeds, **TOL)


def test_depthwise_flat_1d():
    m, feeds = conv_model((2, 4, 37), (4, 1, 5), {"group": 4, "pads": [2, 2]}, "relu")
    assert flat_params(m)
    check(m, feeds, **TOL)


@pytest.mark.parametrize("nt", [1, 2])
@pytest.mark.parametrize("stride,hw", [(1, 14), (2, 28), (1, 112), (2, 112), (2, 140)])
def test_depthwise_flat_symbolic_batch_threads(nt, stride, hw):
    m, _ = conv_model((2, 20, hw, hw), (20, 1, 3, 3), {"group": 20, "pads": [1, 1, 1, 1], "strides": [stride] * 2},
                      "res_clip", batch="N")
    assert flat_params(m)
    o = hw // stride
    for n in (1, 3):
        feeds = {"x": rand((n, 20, hw, hw)), "z": rand((n, 20, o, o))}
        run_threads(m, feeds, nt)


@pytest.mark.parametrize("stride", [1, 2])
def test_depthwise_flat_nan_inf(stride):
    m, feeds = conv_model((1, 3, 14, 14), (3, 1, 3, 3), {"group": 3, "pads": [1, 1, 1, 1], "strides": [stride] * 2},
                          "relu", bias=False)
    assert flat_params(m)
    x = feeds["x"]
    x[0, 0, 0, 0], x[0, 1, 6, 6], x[0, 2, 13, 13] = np.nan, np.inf, -np.inf
    got = check(m, feeds, **TOL)[0]
    # the pads around the NaN read zeros, never the neighbouring rows' values
    assert np.isnan(got[0, 0, 0, 0]) and not np.isnan(got[0, 0, -1, :]).any()
    assert not np.isnan(got[0, 1]).all() and not np.isnan(got[0, 2, 0, :]).any()


@pytest.mark.parametrize("portable", [False, True])
@pytest.mark.parametrize("case", [0, 6, 9, 17, 18])
def test_depthwise_flat_and_phase_kernels_agree(case, portable, tmp_path):
    """The portable build has no AVX-512, so the same model runs on the phase kernel there."""
    xs, attrs, k, _ = FLAT_CASES[case]
    m, feeds = conv_model(xs, (xs[1], 1) + k, {**attrs, "group": xs[1]}, "res_clip")
    want = ReferenceEvaluator(m).run(None, feeds)
    typed_outputs(m, want)
    path = onnxc.compiler.build_library(m, Options(portable=portable), cache_dir=tmp_path)
    assert_close(want, onnxc.InferenceSession(str(path)).run(None, feeds), TOL["rtol"], TOL["atol"])
